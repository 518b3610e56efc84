"""Parameters of the relocalize node: their declarations, checks, and the engine configurations
(:class:`~g2g_model.localization.window_selector.SelectorConfig`,
:class:`~g2g_model.localization.correction.GateConfig`) built from them."""

from __future__ import annotations

from typing import Dict

from g2g_model.localization.correction import GateConfig
from g2g_model.localization.window_selector import WINDOW_SCORERS, SelectorConfig
from g2g_ros.model_loading import BACKBONE_WEIGHTS_DESCRIPTION
from g2g_ros.nodes.verify_params import declare_verify_parameters
from g2g_ros.qos import sensor_qos


def declare_parameters(node) -> None:
    """Declare every parameter of the relocalize node (a :class:`~g2g_ros.managed_node.
    ManagedNode`); a 4th argument True: read at configure (settable while unconfigured)."""
    node.declare_camera_params()
    d = node.declare
    d("cameras", ["cam0"], "rig cameras; relocalization uses reloc_camera", True)
    d("reloc_camera", "", "camera used for relocalization "
      "(empty = the first of cameras)", True)
    d("map_frame", "map", "map frame (REP-105)", True)
    d("odom_frame", "odom", "odometry frame (REP-105)", True)
    d("odom_source", "tf", "odometry from 'tf' (odom->base_link) or "
      "'topic' (nav_msgs/Odometry on odom_topic)", True)
    d("odom_topic", "odometry", "odometry topic (odom_source=topic)", True)
    d("tf_wait_s", 0.5, "how long to wait for odometry at an image stamp "
      "(and for a first camera_info)", True, value_range=(0.0, 60.0))
    d("window_size", 5, "frames per group (W)", True, value_range=(1, 64))
    d("min_translation_m", 0.1, "buffer a frame only after this much motion ...", True,
      value_range=(0.0, 1000.0))
    d("min_rotation_deg", 5.0, "... or this much rotation", True, value_range=(0.0, 180.0))
    d("map_path", "", "map (.g2gmap) loaded at start-up", True)
    d("localize_period_s", 2.0, "relocalize this often (0 = only via ~/localize)", True,
      value_range=(0.0, 3600.0))
    d("localize_pacing", "wall", "'wall': localize_period_s of wall time; 'stamps': of "
      "image stamps, run right after the triggering image (evaluation)", True)
    d("hint_radius_m", 5.0, "search radius around a pose hint", True, value_range=(0.01, 10000.0))
    d("max_jump_translation_m", 1.0, "larger correction changes need consistency", True,
      value_range=(0.001, 10000.0))
    d("max_jump_rotation_deg", 10.0, "larger correction changes need consistency", True,
      value_range=(0.01, 180.0))
    d("consistency_count", 2, "consistent candidates needed for a first fix / a jump", True,
      value_range=(1, 1000))
    d("geometric_hold", 5, "a verified / refined fix is not replaced by G2G-only candidates for "
      "this many consecutive localizations", True, value_range=(0, 1000000))
    d("max_fusion_spread_m", 1.0,
      "reject when the per-frame corrections disagree by more",
      True, value_range=(0.001, 10000.0))
    d("min_overlap_score", 0.0, "reject windows whose covisibility score (window_scorer "
      "combined, embedding, image or covisibility: an estimated overlap in [0, 1]) is "
      "lower", True, value_range=(-1.0, 1.0))
    d("tf_rate_hz", 20.0, "re-send rate of map->odom", True, value_range=(0.1, 1000.0))
    d("tf_future_dating_s", 0.1, "map->odom is stamped now + this", True, value_range=(0.0, 10.0))
    d("checkpoint", "", "G2G checkpoint; empty = embedded default", True)
    d("backbone_weights", "", BACKBONE_WEIGHTS_DESCRIPTION, True)
    d("window_scorer", "combined",
      "how map windows are scored without a pose hint: 'combined' (mean of the token "
      "embedding of covis_embedding and the image embedding of covis_image_embedding, best "
      "on held-out sim scenes), 'embedding' or 'image' (one of them), 'whitened' "
      "(map-whitened token similarity, no model), 'covisibility' (the decoder of "
      "covis_checkpoint) or 'descriptor' (mean-pooled token cosine)", True)
    d("covis_embedding", "",
      "token covisibility embedding for window_scorer=combined/embedding; empty = embedded "
      "default", True)
    d("covis_image_embedding", "",
      "image covisibility embedding for window_scorer=combined/image; empty = embedded "
      "default", True)
    d("covis_pair_verifier", "",
      "pair verifier that re-ranks the best map windows of window_scorer=combined/"
      "embedding/image (its file holds how many and with what weight); empty = embedded "
      "default, 'none' = no re-ranking", True)
    d("covis_checkpoint", "",
      "covisibility decoder for window_scorer=covisibility; empty = embedded default", True)
    d("covis_coarse_stride", 1, "score every k-th map frame first (large maps)", True,
      value_range=(1, 10000))
    declare_verify_parameters(node, "every localization (map points triangulated from the "
                              "map's poses, one generalized absolute pose for the query group)")
    d("verify_cameras", [""], "rig cameras whose images join the verification (their images "
      "at the query stamps); [''] = every camera of cameras, [] = reloc_camera only", True)
    d("device", "cpu", "torch device", True)
    d("precision", "auto", "model arithmetic: auto (bf16 where fast), fp32 (as g2g-eval) "
      "or bf16", True)
    d("status_period_s", 1.0, "status/diagnostics period", fixed=True, value_range=(0.05, 3600.0))
    d("stale_after_s", 3.0, "no image from reloc_camera for this long: status DEGRADED and the "
      "cameras reported quiet (periodic localization also waits for new frames)", True,
      value_range=(0.1, 3600.0))


def check_parameters(p: Dict) -> None:
    """``ValueError`` naming the first parameter with a value the node cannot use."""
    for name, (a, b) in {"odom_source": ("tf", "topic"),
                         "extrinsics_source": ("tf_static", "yaml"),
                         "localize_pacing": ("wall", "stamps")}.items():
        if p[name] not in (a, b):
            raise ValueError(f"{name} must be {a!r} or {b!r}, got {p[name]!r}")
    if p["window_scorer"] not in WINDOW_SCORERS:
        raise ValueError(f"window_scorer must be one of {WINDOW_SCORERS}, "
                         f"got {p['window_scorer']!r}")
    if p["tf_rate_hz"] <= 0:
        raise ValueError(f"tf_rate_hz must be > 0, got {p['tf_rate_hz']}")
    sensor_qos(p["sensor_qos_reliability"])  # raises naming a bad value


def verify_cameras(p: Dict, reloc_camera: str) -> list:
    """The other rig cameras whose images join the verification."""
    chosen = list(p["cameras"]) if list(p["verify_cameras"]) == [""] else list(
        p["verify_cameras"])
    unknown = [c for c in chosen if c not in p["cameras"]]
    if unknown:
        raise ValueError(f"verify_cameras {unknown} are not in cameras {list(p['cameras'])}")
    return [c for c in chosen if c != reloc_camera] if p["verify"] else []


def selector_config(p: Dict) -> SelectorConfig:
    """The window selection the parameters describe."""
    return SelectorConfig(
        scorer=p["window_scorer"], embedding=p["covis_embedding"],
        image_embedding=p["covis_image_embedding"], pair_verifier=p["covis_pair_verifier"],
        covisibility=p["covis_checkpoint"], window_size=p["window_size"],
        hint_radius_m=p["hint_radius_m"], min_overlap_score=p["min_overlap_score"],
        coarse_stride=p["covis_coarse_stride"])


def gate_config(p: Dict) -> GateConfig:
    """The correction gate the parameters describe."""
    return GateConfig(max_jump_translation_m=p["max_jump_translation_m"],
                      max_jump_rotation_deg=p["max_jump_rotation_deg"],
                      consistency_count=p["consistency_count"],
                      geometric_hold=p["geometric_hold"],
                      min_overlap_score=p["min_overlap_score"],
                      max_fusion_spread_m=p["max_fusion_spread_m"])
