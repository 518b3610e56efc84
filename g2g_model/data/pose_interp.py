"""Pose interpolation at query timestamps (linear translation, quaternion slerp)."""

from __future__ import annotations

import numpy as np

from g2g_model.geometry import make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix


def slerp(q0: np.ndarray, q1: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spherical interpolation of unit quaternions ``[N,4]`` (xyzw) with weights ``[N]``."""
    q0 = np.asarray(q0, dtype=np.float64)
    q1 = np.asarray(q1, dtype=np.float64).copy()
    dot = np.sum(q0 * q1, -1)
    q1[dot < 0] *= -1.0
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    small = theta < 1e-6
    sin = np.where(small, 1.0, np.sin(theta))
    a = np.where(small, 1.0 - w, np.sin((1.0 - w) * theta) / sin)
    b = np.where(small, w, np.sin(w * theta) / sin)
    q = a[:, None] * q0 + b[:, None] * q1
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def interpolate_poses(stamps: np.ndarray, poses: np.ndarray, query: np.ndarray,
                      max_gap_ns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Poses ``[M,4,4]`` at ``query [M]`` from sorted ``stamps [N]`` / ``poses [N,4,4]``.

    Returns the poses and a validity mask ``[M]``: False outside ``[stamps[0], stamps[-1]]`` or
    where the bracketing samples are more than ``max_gap_ns`` apart (invalid rows are identity).
    A query stamp equal to a sample's is that sample, whatever the gap to its neighbours (a
    ground truth already associated with the images, one sample per image).
    """
    stamps = np.asarray(stamps, dtype=np.int64)
    query = np.asarray(query, dtype=np.int64)
    if len(stamps) < 2 or np.any(np.diff(stamps) <= 0):
        raise ValueError("interpolation needs >= 2 strictly increasing source timestamps")
    hi = np.clip(np.searchsorted(stamps, query, side="right"), 1, len(stamps) - 1)
    lo = hi - 1
    valid = (query >= stamps[0]) & (query <= stamps[-1])
    gap = stamps[hi] - stamps[lo]
    if max_gap_ns is not None:
        exact = (query == stamps[lo]) | (query == stamps[hi])
        valid &= (gap <= max_gap_ns) | exact
    w = np.clip((query - stamps[lo]) / gap, 0.0, 1.0)
    poses = np.asarray(poses, dtype=np.float64)
    t = (1 - w)[:, None] * poses[lo, :3, 3] + w[:, None] * poses[hi, :3, 3]
    q = slerp(matrix_to_quat_xyzw(poses[lo, :3, :3]), matrix_to_quat_xyzw(poses[hi, :3, :3]), w)
    out = make_pose(quat_xyzw_to_matrix(q), t)
    out[~valid] = np.eye(4)
    return out, valid
