"""Parameters of the rig_odometry node: one dataclass (:mod:`g2g_ros.parameters`; read at
configure, settable while unconfigured, see :class:`~g2g_ros.managed_node.ManagedNode`, except
``keyframe_stride`` and ``max_spread_m``, which apply at once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from g2g_model.localization.rig_motion import RIG_DEFAULTS
from g2g_model.localization.verifier_config import VerifierConfig
from g2g_ros.model_loading import BACKBONE_WEIGHTS_DESCRIPTION
from g2g_ros.nodes.camera_params import CameraParams
from g2g_ros.nodes.verify_params import (VerifyParams, max_features_param, max_image_px_param,
                                         verify_param)
from g2g_ros.parameters import param, status_period_param


@dataclass
class RigOdometryParams(VerifyParams, CameraParams):
    """Every parameter of the rig_odometry node (ranges enforced by rclpy)."""

    cameras: List[str] = param(["cam0", "cam1", "cam2", "cam3", "cam4"], "camera names in rig "
                               "order; topics <cam>/image_raw, <cam>/camera_info")
    odom_frame: str = param("odom", "odometry frame (REP-105)")
    sync_slop_ms: float = param(20.0, "max stamp spread within a rig group",
                                value_range=(0.0, 1000.0))
    sync_min_interval_ms: float = param(50.0, "lower bound of the camera frame interval",
                                        value_range=(0.0, 10000.0))
    sync_max_wait_ms: float = param(300.0, "how long (stamp time) a group waits for a late "
                                    "camera", value_range=(0.0, 60000.0))
    min_cameras: int = param(0, "smallest usable group (0 = all cameras; fewer = degraded "
                             "mode)", value_range=(0, 64))
    queue_size: int = param(10, "per-camera synchronizer queue", value_range=(1, 1000))
    keyframe_stride: int = param(1, "use every k-th synchronized group", at_configure=False,
                                 value_range=(1, 1000))
    max_spread_m: float = param(1.0, "reject a step taken from G2G alone whose motion "
                                "estimates (each camera; both directions) disagree by more "
                                "(a geometrically verified step is kept)",
                                at_configure=False, value_range=(0.001, 100.0))
    checkpoint: str = param("", "G2G checkpoint; empty = embedded default")
    backbone_weights: str = param("", BACKBONE_WEIGHTS_DESCRIPTION)
    device: str = param("cpu", "torch device")
    precision: str = param("auto", "model arithmetic: auto (bf16 where fast), fp32 (as g2g-eval) "
                           "or bf16")
    publish_tf: bool = param(True, "broadcast odom->base_link")
    status_period_s: float = status_period_param()
    lost_after_s: float = param(3.0, "state LOST when no update for this long",
                                value_range=(0.1, 3600.0))
    verify: bool = verify_param("every keyframe step (generalized relative pose between the "
                                "rig's keyframes with its extrinsics, and absolute pose against "
                                "the points its overlapping cameras triangulate)")
    verify_max_image_px: int = max_image_px_param(RIG_DEFAULTS["max_image_px"])
    verify_max_features: int = max_features_param(RIG_DEFAULTS["max_features"])
    verify_max_turn_deg: float = param(
        RIG_DEFAULTS["max_turn_deg"], "camera pairs of a keyframe step: a camera of the previous "
        "keyframe is matched with a camera of the current one only if their views can overlap "
        "(optical axes from the extrinsics, view cones from the intrinsics) when the rig turns "
        "by at most this much between keyframes; 180 = every pair", value_range=(0.0, 180.0))
    verify_standstill_deg: float = param(
        VerifierConfig.standstill_deg, "a step in which every camera's feature matches with "
        "itself moved less than this (median, as an angle from the camera) is standing still: "
        "identity motion, the keyframe kept (a parked rig gives the geometry no parallax); "
        "0 = never", value_range=(0.0, 9.9))
    verify_overlap: bool = param(
        VerifierConfig.overlap, "where the relative pose between keyframes fails or cannot "
        "measure the step's length (straight motion), and cameras of the rig overlap (from the "
        "extrinsics and intrinsics): triangulate their matches at the previous keyframe with "
        "the calibrated extrinsics and solve the current keyframe against those metric points "
        "(generalized absolute pose; docs/VERIFICATION.md); false = relative pose only")
    verify_keyframe_map: bool = param(
        VerifierConfig.keyframe_map, "after a step whose length the geometry measured, also "
        "solve the next step from the points the last two keyframes triangulate (that length "
        "carried forward; generalized absolute pose) wherever the relative pose's step departs "
        "from the previous step's velocity by more than 10 %; where the two disagree, take the "
        "step nearer that velocity (docs/VERIFICATION.md); false = the relative pose alone "
        "decides")
    verify_max_deferred: int = param(
        4, "when a newer group is already queued as a step is about to be verified (the node "
        "falls behind), publish G2G's motion from the last keyframe at once and verify the next "
        "group instead (against that keyframe), at most this many groups in a row; 0 = verify "
        "every step", value_range=(0, 1000))
    window_keyframes: int = param(
        0, "refine the last this many keyframes' poses and the points they share together "
        "after every verified step (bundle adjustment, GTSAM; the oldest held fixed, the newest "
        "published refined; docs/VERIFICATION.md); 0 = off (the default: on real stereo steps "
        "it made the steps' lengths worse), else >= 3; needs verify", value_range=(0, 50))
