"""QoS profiles of the G2G nodes: camera streams and TF."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


def sensor_qos(reliability: str, depth: int = 5) -> QoSProfile:
    """QoS for camera streams: best effort by default (overridable per node parameter)."""
    policies = {"best_effort": ReliabilityPolicy.BEST_EFFORT,
                "reliable": ReliabilityPolicy.RELIABLE}
    if reliability not in policies:
        raise ValueError(f"sensor_qos_reliability must be one of {sorted(policies)}, "
                         f"got {reliability!r}")
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=policies[reliability])


def tf_qos(static: bool, depth: int = 100) -> QoSProfile:
    """QoS of tf2_ros on ``/tf`` (reliable, volatile) or ``/tf_static`` (reliable, transient
    local, so that transforms latched before a subscriber existed still reach it)."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if static
                      else DurabilityPolicy.VOLATILE)
