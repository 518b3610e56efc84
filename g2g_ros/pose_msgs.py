"""4x4 matrices <-> geometry_msgs/Pose (duck-typed; no message import needed), and the
``nav_msgs/Odometry`` of a rig-odometry update."""

from __future__ import annotations

import numpy as np

from g2g_model.geometry import make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix


def pose_msg_to_matrix(pose) -> np.ndarray:
    """``geometry_msgs/Pose`` -> 4x4; ``ValueError`` for non-finite values or a zero quaternion."""
    q = np.array([pose.orientation.x, pose.orientation.y, pose.orientation.z,
                  pose.orientation.w], float)
    t = np.array([pose.position.x, pose.position.y, pose.position.z], float)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(t))) or np.linalg.norm(q) < 1e-6:
        raise ValueError("pose must be finite with a non-zero quaternion")
    return make_pose(quat_xyzw_to_matrix(q), t)


def matrix_to_pose_msg(T: np.ndarray, pose) -> None:
    """Fill ``pose`` (a geometry_msgs/Pose) from a 4x4 matrix."""
    pose.position.x, pose.position.y, pose.position.z = map(float, T[:3, 3])
    q = matrix_to_quat_xyzw(T[:3, :3])
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = map(float, q)


def odometry_msg(update, odom_frame: str, base_frame: str):
    """``nav_msgs/Odometry`` of an :class:`~g2g_ros.odometry_core.OdometryUpdate`: pose and
    covariance in ``odom_frame``, velocities in ``base_frame``, stamped with the group."""
    from nav_msgs.msg import Odometry

    from g2g_ros.node_common import to_stamp

    msg = Odometry()
    msg.header.stamp = to_stamp(update.stamp_ns)
    msg.header.frame_id = odom_frame
    msg.child_frame_id = base_frame
    matrix_to_pose_msg(update.odom_T_base, msg.pose.pose)
    msg.pose.covariance = [float(v) for v in update.covariance.reshape(-1)]
    tw = msg.twist.twist
    tw.linear.x, tw.linear.y, tw.linear.z = map(float, update.linear_velocity)
    tw.angular.x, tw.angular.y, tw.angular.z = map(float, update.angular_velocity)
    msg.twist.covariance = [float(v) for v in np.diag([0.01] * 3 + [0.003] * 3).reshape(-1)]
    return msg
