"""Parameters of the relocalize node: one dataclass (:mod:`g2g_ros.parameters`), checks, and
the engine configurations (:class:`~g2g_model.localization.selector_config.SelectorConfig`,
:class:`~g2g_model.localization.correction.GateConfig`) built from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from g2g_model.localization.correction import GateConfig
from g2g_model.localization.verifier_config import VerifierConfig
from g2g_model.localization.selector_config import WINDOW_SCORERS, SelectorConfig
from g2g_ros.model_loading import (BACKBONE_WEIGHTS_DESCRIPTION, model_max_frames,
                                   window_size_problem)
from g2g_ros.nodes.camera_params import CameraParams
from g2g_ros.nodes.verify_params import VerifyParams, verify_param
from g2g_ros.parameters import param, status_period_param
from g2g_ros.qos import sensor_qos


@dataclass
class RelocalizeParams(VerifyParams, CameraParams):
    """Every parameter of the relocalize node (ranges enforced by rclpy)."""

    cameras: List[str] = param(["cam0"], "rig cameras; relocalization uses reloc_camera")
    reloc_camera: str = param("", "camera used for relocalization (empty = the first of "
                              "cameras)")
    map_frame: str = param("map", "map frame (REP-105)")
    odom_frame: str = param("odom", "odometry frame (REP-105)")
    odom_source: str = param("tf", "odometry from 'tf' (odom->base_link) or 'topic' "
                             "(nav_msgs/Odometry on odom_topic)")
    odom_topic: str = param("odometry", "odometry topic (odom_source=topic)")
    tf_wait_s: float = param(0.5, "how long to wait for odometry at an image stamp (and for a "
                             "first camera_info)", value_range=(0.0, 60.0))
    window_size: int = param(5, "frames per group (W); at most what the model takes (its "
                             "max_frames: 5 for the embedded default), checked when set and at "
                             "configure", value_range=(1, 64))
    min_translation_m: float = param(0.1, "buffer a frame only after this much motion ...",
                                     value_range=(0.0, 1000.0))
    min_rotation_deg: float = param(5.0, "... or this much rotation", value_range=(0.0, 180.0))
    map_path: str = param("", "map (.g2gmap) loaded at start-up")
    localize_period_s: float = param(
        2.0, "relocalize this often (0 = only via ~/localize); 0 or at least 0.05 s: a "
        "localization takes longer than that, so a shorter period would not localize more "
        "often, only wake the node more often than images arrive (CPU while idle)",
        value_range=(0.0, 3600.0), zero_or_at_least=0.05)
    localize_pacing: str = param("wall", "'wall': localize_period_s of wall time; 'stamps': of "
                                 "image stamps, run right after the triggering image "
                                 "(evaluation)")
    hint_radius_m: float = param(5.0, "search radius around a pose hint",
                                 value_range=(0.01, 10000.0))
    max_jump_translation_m: float = param(1.0, "larger correction changes need consistency",
                                          value_range=(0.001, 10000.0))
    max_jump_rotation_deg: float = param(10.0, "larger correction changes need consistency",
                                         value_range=(0.01, 180.0))
    consistency_count: int = param(2, "consistent candidates needed for a first fix / a jump",
                                   value_range=(1, 1000))
    geometric_hold: int = param(5, "a verified / refined fix is not replaced by G2G-only "
                                "candidates for this many consecutive localizations",
                                value_range=(0, 1000000))
    fix_needs_geometry: bool = param(
        True, "with verify on: only a geometric (verified / refined) candidate moves the "
        "correction; G2G-only candidates are reported (status, log), never published. false: "
        "G2G alone may fix and track (away from the map it was accepted metres off)")
    max_fusion_spread_m: float = param(1.0, "reject when the estimates of the first query "
                                       "frame's pose (each frame, both directions) disagree by "
                                       "more", value_range=(0.001, 10000.0))
    min_overlap_score: float = param(
        0.0, "reject windows whose covisibility score (window_scorer combined, embedding, image "
        "or covisibility: an estimated overlap in [0, 1]) is lower", value_range=(-1.0, 1.0))
    tf_rate_hz: float = param(
        20.0, "re-send rate of map->odom; at most 100 Hz (a fast odometry's rate): the "
        "correction changes only at a fix and TF users interpolate between sends, so faster "
        "re-sending only costs CPU and bandwidth",
        value_range=(0.1, 100.0))
    tf_future_dating_s: float = param(0.1, "map->odom is stamped now + this",
                                      value_range=(0.0, 10.0))
    checkpoint: str = param("", "G2G checkpoint; empty = embedded default")
    backbone_weights: str = param("", BACKBONE_WEIGHTS_DESCRIPTION)
    window_scorer: str = param(
        "combined", "how map windows are scored without a pose hint: 'combined' (mean of the "
        "token embedding of covis_embedding and the image embedding of covis_image_embedding, "
        "best on held-out sim scenes), 'embedding' or 'image' (one of them), 'whitened' "
        "(map-whitened token similarity, no model), 'covisibility' (the decoder of "
        "covis_checkpoint) or 'descriptor' (mean-pooled token cosine)")
    covis_embedding: str = param("", "token covisibility embedding for window_scorer=combined/"
                                 "embedding; empty = embedded default")
    covis_image_embedding: str = param("", "image covisibility embedding for window_scorer="
                                       "combined/image; empty = embedded default")
    covis_pair_verifier: str = param(
        "", "pair verifier that re-ranks the best map windows of window_scorer=combined/"
        "embedding/image (its file holds how many and with what weight); empty = embedded "
        "default, 'none' = no re-ranking")
    covis_checkpoint: str = param("", "covisibility decoder for window_scorer=covisibility; "
                                  "empty = embedded default")
    covis_coarse_stride: int = param(1, "score every k-th map frame first (large maps)",
                                     value_range=(1, 10000))
    verify: bool = verify_param("every localization (map points triangulated from the map's "
                                "poses, one generalized absolute pose for the query group)")
    verify_cameras: List[str] = param([""], "rig cameras whose images join the verification "
                                      "(their images at the query stamps); [''] = every camera "
                                      "of cameras, [] = reloc_camera only")
    verify_window_span_m: float = param(
        VerifierConfig.window_span_m, "the whole query window's geometric solution is refined "
        "on the instants within this odometry travel of its newest one (where the fix holds), "
        "when they have "
        "verify_min_inliers and fit the refined pose far better than noise explains (drift "
        "inside a long window bends the rigid group); 0 = off",
        value_range=(0.0, 1000.0))
    verify_tracking_radius_px: float = param(
        VerifierConfig.tracking_radius_px, "while tracking a geometric fix, each query "
        "keypoint is matched only among the map points that the fix (carried by the odometry) "
        "projects within this many pixels of it, so the ratio test compares neighbours, not "
        "look-alikes across the image; 0 = off (every point of the map window)",
        value_range=(0.0, 10000.0))
    verify_relative_fallback: bool = param(
        VerifierConfig.relative_fallback, "where the map window's triangulated points give no "
        "geometric pose, solve the query's anchor frame from its 2D-3D and 2D-2D matches with "
        "the map window, then the generalized relative pose between the map window and the "
        "query window (2D-2D matches, both windows' known poses), judged by the same rules and "
        "confirmed by the map's own points; off by default (docs/VERIFICATION.md)")
    verify_fallback_feature: str = param(
        VerifierConfig.fallback_feature, "where verify_feature's local features give no "
        "geometric pose (and no ambiguous one), verify again with these: 'aliked' (ALIKED-t16: "
        "matches on plain surfaces where RootSIFT finds too few; about ten times RootSIFT's "
        "cost per image, spent only on localizations the first features could not solve) or "
        "'' (none)")
    verify_second_window: bool = param(
        True, "when the map window gives no geometric pose, verify once more against the "
        "nearest window (to G2G's estimate) that shares no keyframe with it")
    device: str = param("cpu", "torch device")
    precision: str = param("auto", "model arithmetic: auto (bf16 where fast), fp32 (as g2g-eval) "
                           "or bf16")
    rotation_matching: bool = param(True, "take the rotation of G2G's answer from matches of the "
                                    "frozen image features where enough agree (relocalization "
                                    "checkpoints); false: G2G's own rotation")
    status_period_s: float = status_period_param()
    stale_after_s: float = param(
        3.0, "no image from reloc_camera for this long: status DEGRADED and the cameras reported "
        "quiet (periodic localization also waits for new frames)", value_range=(0.1, 3600.0))


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
    problem = window_problem(p)
    if problem:
        raise ValueError(problem)


def window_problem(p: Dict) -> Optional[str]:
    """Why ``window_size`` does not fit the model ``checkpoint`` names (read from its header;
    None also when that is only known once loaded: the engine checks it then)."""
    if not isinstance(p["window_size"], int) or not isinstance(p["checkpoint"], str):
        return None  # the type check refuses these with its own reason
    return window_size_problem(p["window_size"],
                               *model_max_frames(p["checkpoint"], "relocalization"))


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
                      geometric_fix=bool(p["fix_needs_geometry"] and p["verify"]),
                      min_overlap_score=p["min_overlap_score"],
                      max_fusion_spread_m=p["max_fusion_spread_m"])
