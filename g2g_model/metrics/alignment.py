"""Sim(3) (Umeyama) alignment, only for up-to-scale methods; its results are always labelled
``sim3_aligned``."""

from __future__ import annotations

from typing import Tuple

import numpy as np

SIM3_LABEL = "sim3_aligned"


def umeyama_sim3(src: np.ndarray, dst: np.ndarray) -> Tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ~ s * R @ src + t`` (Umeyama 1991).

    Args:
        src, dst: ``[N, 3]`` corresponding points, N >= 3, not all collinear.
    Returns:
        ``(s, R [3,3], t [3])``.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 3:
        raise ValueError(f"src and dst must both be [N,3], got {src.shape} and {dst.shape}")
    if src.shape[0] < 3:
        raise ValueError(f"Sim(3) alignment needs at least 3 points, got {src.shape[0]}")
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    var_s = np.mean(np.sum(xs ** 2, axis=1))
    if var_s < 1e-12:
        raise ValueError("Sim(3) alignment is degenerate: source points coincide")
    cov = xd.T @ xs / src.shape[0]
    u, d, vt = np.linalg.svd(cov)
    if d[1] < 1e-9 * max(d[0], 1e-12):
        raise ValueError("Sim(3) alignment is degenerate: points are collinear")
    sign = np.ones(3)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        sign[2] = -1.0
    rot = u @ np.diag(sign) @ vt
    scale = float(np.sum(d * sign) / var_s)
    trans = mu_d - scale * rot @ mu_s
    return scale, rot, trans


def sim3_aligned_poses(pred: np.ndarray, gt: np.ndarray) -> Tuple[np.ndarray, float]:
    """Apply the Umeyama Sim(3) that maps predicted camera centres onto the true ones.

    Args:
        pred, gt: ``[N, 4, 4]`` poses, N >= 3 with non-collinear centres.
    Returns:
        ``(sim3_aligned pred [N,4,4], scale)``. Rotations are rotated by the alignment rotation,
        centres mapped by ``s R c + t``.
    """
    pred = np.asarray(pred, dtype=np.float64)
    gt = np.asarray(gt, dtype=np.float64)
    scale, rot, trans = umeyama_sim3(pred[:, :3, 3], gt[:, :3, 3])
    out = pred.copy()
    out[:, :3, :3] = rot[None] @ pred[:, :3, :3]
    out[:, :3, 3] = scale * pred[:, :3, 3] @ rot.T + trans
    return out, scale
