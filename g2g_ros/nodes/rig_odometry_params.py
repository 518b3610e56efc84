"""Parameters of the rig_odometry node: their declarations (a 4th argument True: read at
configure, settable while unconfigured, see :class:`~g2g_ros.managed_node.ManagedNode`;
``keyframe_stride`` and ``max_spread_m`` apply at once)."""

from __future__ import annotations

from g2g_model.localization.rig_motion import RIG_DEFAULTS
from g2g_ros.model_loading import BACKBONE_WEIGHTS_DESCRIPTION
from g2g_ros.nodes.verify_params import declare_verify_parameters


def declare_parameters(node) -> None:
    """Declare every parameter of the rig_odometry node (ranges enforced by rclpy)."""
    node.declare_camera_params()
    d = node.declare
    d("cameras", ["cam0", "cam1", "cam2", "cam3", "cam4"],
      "camera names in rig order; topics <cam>/image_raw, <cam>/camera_info", True)
    d("odom_frame", "odom", "odometry frame (REP-105)", True)
    d("sync_slop_ms", 20.0, "max stamp spread within a rig group", True,
      value_range=(0.0, 1000.0))
    d("sync_min_interval_ms", 50.0, "lower bound of the camera frame interval", True,
      value_range=(0.0, 10000.0))
    d("sync_max_wait_ms", 300.0, "how long (stamp time) a group waits for a late camera", True,
      value_range=(0.0, 60000.0))
    d("min_cameras", 0, "smallest usable group (0 = all cameras; fewer = degraded mode)", True,
      value_range=(0, 64))
    d("queue_size", 10, "per-camera synchronizer queue", True, value_range=(1, 1000))
    d("keyframe_stride", 1, "use every k-th synchronized group", value_range=(1, 1000))
    d("max_spread_m", 1.0, "reject a step whose per-camera motions disagree by more",
      value_range=(0.001, 100.0))
    d("checkpoint", "", "G2G checkpoint; empty = embedded default", True)
    d("backbone_weights", "", BACKBONE_WEIGHTS_DESCRIPTION, True)
    d("device", "cpu", "torch device", True)
    d("precision", "auto", "model arithmetic: auto (bf16 where fast), fp32 (as g2g-eval) "
      "or bf16", True)
    d("publish_tf", True, "broadcast odom->base_link", True)
    d("status_period_s", 1.0, "status/diagnostics period", fixed=True,
      value_range=(0.05, 3600.0))
    d("lost_after_s", 3.0, "state LOST when no update for this long", True,
      value_range=(0.1, 3600.0))
    declare_verify_parameters(node, "every keyframe step (generalized relative pose between "
                              "the rig's keyframes with its extrinsics)",
                              max_image_px=RIG_DEFAULTS["max_image_px"],
                              max_features=RIG_DEFAULTS["max_features"])
    d("verify_max_turn_deg", RIG_DEFAULTS["max_turn_deg"], "camera pairs of a keyframe step: a "
      "camera of the previous keyframe is matched with a camera of the current one only if "
      "their views can overlap (optical axes from the extrinsics, view cones from the "
      "intrinsics) when the rig turns by at most this much between keyframes; 180 = every "
      "pair", True,
      value_range=(0.0, 180.0))
    d("verify_max_deferred", 4, "when a newer group is already queued as a step is about to "
      "be verified (the node falls behind), publish G2G's motion from the last keyframe at "
      "once and verify the next group instead (against that keyframe), at most this many "
      "groups in a row; 0 = verify every step", True, value_range=(0, 1000))
