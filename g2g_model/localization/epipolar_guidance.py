"""Guided matching between two calibrated cameras: which keypoint pairs can be one point (near
each other's epipolar line, the rays meeting in front of both cameras)."""

from __future__ import annotations

import numpy as np


def epipolar_distance(p_i: np.ndarray, p_j: np.ndarray, centre_i: np.ndarray, x_i: np.ndarray,
                      x_j: np.ndarray) -> np.ndarray:
    """``[Ni, Nj]`` pixel distances of the keypoints ``x_j`` of camera j from the epipolar
    lines of the keypoints ``x_i`` of camera i (projection matrices ``p_i``, ``p_j``; camera i's
    centre ``centre_i``): ``F = [e_j]x P_j P_i^+`` (Hartley and Zisserman, eq. 9.1)."""
    e = p_j @ np.append(centre_i, 1.0)
    skew = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
    fundamental = skew @ p_j @ np.linalg.pinv(p_i)
    lines = np.c_[x_i, np.ones(len(x_i))] @ fundamental.T
    lines /= np.maximum(np.linalg.norm(lines[:, :2], axis=1, keepdims=True), 1e-12)
    # float32: a pixel distance needs no more, and the [Ni, Nj] product is the cost.
    return np.abs(lines.astype(np.float32) @ np.c_[x_j, np.ones(len(x_j))].T.astype(np.float32))


def guided_candidates(p_i: np.ndarray, p_j: np.ndarray, w_i: np.ndarray, w_j: np.ndarray,
                      x_i: np.ndarray, x_j: np.ndarray, max_px: float) -> np.ndarray:
    """``[Ni, Nj]`` bool: the keypoint pairs of two calibrated cameras (projection matrices
    ``p_*``, poses ``w_*`` = world_T_cam) that can be one point: within ``max_px`` of each
    other's epipolar line, and with both rays meeting in front of both cameras (the closest
    points of the two rays, one 2x2 solve per pair)."""
    near = epipolar_distance(p_i, p_j, w_i[:3, 3], x_i, x_j) < max_px
    a, b = np.nonzero(near)  # a few per cent of all pairs: solved only for those

    def rays(p, w, x):
        k = p[:, :3] @ w[:3, :3]  # P = K [R^T | -R^T c]
        r = np.c_[x, np.ones(len(x))] @ np.linalg.inv(k).T @ w[:3, :3].T
        return r / np.linalg.norm(r, axis=1, keepdims=True)

    near[a, b] = meet_in_front(rays(p_i, w_i, x_i[a]), rays(p_j, w_j, x_j[b]),
                               w_j[:3, 3] - w_i[:3, 3])
    return near


def meet_in_front(u: np.ndarray, v: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``[N]`` bool: whether the rays ``u`` from camera i's centre and ``v`` from camera j's
    (unit ``[N, 3]`` directions in one frame; ``base``: camera j's centre minus camera i's)
    come closest in front of both cameras (one 2x2 solve per pair of rays)."""
    uv, ub, vb = np.sum(u * v, axis=1), u @ base, v @ base
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1.0 - uv ** 2
        s = (ub - uv * vb) / den   # along ray i
        t = (uv * ub - vb) / den   # along ray j
    return (s > 0) & (t > 0)
