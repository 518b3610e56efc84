"""QoS profiles of the G2G nodes (camera streams, TF) and the Fast DDS profile of our players."""

from __future__ import annotations

import os
from typing import MutableMapping, Optional

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
    if static:
        return latched_qos(depth)
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)


def latched_qos(depth: int = 1) -> QoSProfile:
    """QoS of a topic whose last message is state (``/tf_static``, the loaded map's
    trajectory): reliable and transient local, so a subscriber that joins later (RViz opened
    afterwards) still gets it; the subscriber must ask for transient local durability too."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


PROFILES_VAR = "FASTDDS_DEFAULT_PROFILES_FILE"


def prefer_large_shm_profile(environ: Optional[MutableMapping[str, str]] = None) -> str:
    """Give this process (and the processes it starts with ``environ``) Fast DDS' large
    shared-memory segment, ``config/fastdds_large_shm.xml``, unless a profile file is set
    already or another RMW is chosen; returns the profile in force ("" for none).

    Our players publish a whole camera group at once; with the default 512 KB segment a group
    of large images overwrites its own buffers, and a reliable subscriber then waits for
    repairs, seconds on a loaded machine (a CI replay waited 57 s for its first group).
    Call it before the process's first DDS participant (Fast DDS reads the file once)."""
    from g2g_ros.bringup import config_dir

    environ = os.environ if environ is None else environ
    if environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return environ.get(PROFILES_VAR, "")
    profile = config_dir() / "fastdds_large_shm.xml"
    if PROFILES_VAR not in environ and profile.is_file():
        environ[PROFILES_VAR] = str(profile)
    return environ.get(PROFILES_VAR, "")
