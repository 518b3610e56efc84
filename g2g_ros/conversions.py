"""Stamps and poses of ROS messages <-> integer nanoseconds and 4x4 matrices: the one conversion
for rclpy messages and rosbags-deserialized messages alike.

Every function is duck-typed on the field names, which both message flavours share
(``sec``/``nanosec``; ``position``/``orientation``; ``translation``/``rotation``), so the bag
tools use it on rosbags messages without rclpy. Nothing from ROS is imported at module level; the
two builders of new rclpy messages (:func:`to_stamp`, :func:`matrix_to_transform_stamped`)
import theirs when called. Quaternions are (x, y, z, w) as in ROS and :mod:`g2g_model.geometry`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from g2g_model.geometry import make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix

NS_PER_S = 1_000_000_000


# ---------------------------------------------------------------------- stamps
def stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time``-like (``sec``, ``nanosec``) -> integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def header_ns(header: Any) -> int:
    """The stamp of a ``std_msgs/Header``-like message in nanoseconds."""
    return stamp_ns(header.stamp)


def to_stamp(ns: int, time_type: Any = None):
    """Integer nanoseconds -> ``builtin_interfaces/msg/Time``: rclpy's, or ``time_type`` (e.g.
    a rosbags typestore's ``Time``)."""
    if time_type is None:
        from builtin_interfaces.msg import Time as time_type

    return time_type(sec=int(ns // NS_PER_S), nanosec=int(ns % NS_PER_S))


def publish_processed(pub, stamp_ns: int, outcome: str) -> None:
    """A node's ``~/processed``: one ``std_msgs/Header`` per finished input (its stamp; the
    outcome in ``frame_id``), what an evaluation replay waits for. Nothing without ``pub``
    (the node is being cleaned up)."""
    if pub is None:
        return
    from std_msgs.msg import Header

    pub.publish(Header(stamp=to_stamp(stamp_ns), frame_id=outcome))


# ---------------------------------------------------------------------- poses
def _unwrap(msg: Any, leaf_field: str, wrapper_field: str) -> Any:
    while not hasattr(msg, leaf_field):
        msg = getattr(msg, wrapper_field)
    return msg


def _checked_pose(translation: Any, quat_xyzw: Any) -> np.ndarray:
    q = np.array([quat_xyzw.x, quat_xyzw.y, quat_xyzw.z, quat_xyzw.w], float)
    t = np.array([translation.x, translation.y, translation.z], float)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(t))) or np.linalg.norm(q) < 1e-6:
        raise ValueError("pose must be finite with a non-zero quaternion")
    return make_pose(quat_xyzw_to_matrix(q), t)


def pose_to_matrix(msg: Any) -> np.ndarray:
    """``geometry_msgs/Pose`` -> 4x4; also a message that holds one in ``pose``
    (``PoseStamped``, ``PoseWithCovariance[Stamped]``, ``nav_msgs/Odometry``).

    Raises:
        ValueError: non-finite values or a zero quaternion.
    """
    pose = _unwrap(msg, "position", "pose")
    return _checked_pose(pose.position, pose.orientation)


def transform_to_matrix(msg: Any) -> np.ndarray:
    """``geometry_msgs/Transform`` -> 4x4; also a ``TransformStamped`` (then the matrix is
    ``T_{header.frame_id<-child_frame_id}``). Raises ``ValueError`` like :func:`pose_to_matrix`."""
    transform = _unwrap(msg, "translation", "transform")
    return _checked_pose(transform.translation, transform.rotation)


def _fill(T: np.ndarray, translation: Any, quat_xyzw: Any) -> None:
    translation.x, translation.y, translation.z = (float(v) for v in T[:3, 3])
    q = matrix_to_quat_xyzw(T[:3, :3])
    quat_xyzw.x, quat_xyzw.y, quat_xyzw.z, quat_xyzw.w = (float(v) for v in q)


def matrix_to_pose(T: np.ndarray, msg: Any) -> Any:
    """Fill the ``geometry_msgs/Pose`` of ``msg`` (a Pose, or a message holding one in ``pose``)
    from a 4x4 matrix; returns ``msg``."""
    pose = _unwrap(msg, "position", "pose")
    _fill(np.asarray(T, dtype=np.float64), pose.position, pose.orientation)
    return msg


def matrix_to_transform(T: np.ndarray, msg: Any) -> Any:
    """Fill the ``geometry_msgs/Transform`` of ``msg`` (a Transform or a ``TransformStamped``)
    from a 4x4 matrix; returns ``msg``."""
    transform = _unwrap(msg, "translation", "transform")
    _fill(np.asarray(T, dtype=np.float64), transform.translation, transform.rotation)
    return msg


def matrix_to_transform_stamped(pose: np.ndarray, parent: str, child: str, stamp_ns: int) -> Any:
    """4x4 ``T_{parent<-child}`` -> ``geometry_msgs.msg.TransformStamped`` (rclpy).

    Raises:
        ValueError: ``pose`` is not a finite 4x4 matrix.
    """
    from geometry_msgs.msg import TransformStamped

    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise ValueError(f"pose {parent} -> {child} must be a finite 4x4 matrix")
    msg = TransformStamped()
    msg.header.frame_id = parent
    msg.header.stamp = to_stamp(int(stamp_ns))
    msg.child_frame_id = child
    return matrix_to_transform(pose, msg)
