"""4x4 matrices <-> geometry_msgs/Pose (duck-typed; no message import needed)."""

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
