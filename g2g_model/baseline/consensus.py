"""Consensus steps of the classical baseline: the geodesic L1 median of the pairs' rotations
(Weiszfeld on SO(3)) and the robust intersection of the pairs' translation rays."""

from __future__ import annotations

import itertools
import math
from typing import Optional, Tuple

import numpy as np


def angle_deg(u: np.ndarray, v: np.ndarray) -> float:
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu < 1e-12 or nv < 1e-12:
        return 180.0
    return float(np.degrees(np.arccos(np.clip(u @ v / (nu * nv), -1.0, 1.0))))


def max_pairwise_angle_deg(dirs: np.ndarray) -> float:
    cos = np.clip(dirs @ dirs.T, -1.0, 1.0)
    return float(np.degrees(np.arccos(cos.min()))) if len(dirs) > 1 else 0.0


def intersect_rays(origins, dirs, weights, min_eig):
    """Weighted least-squares point closest to rays ``o_k + s d_k``.

    Returns None when the rays are too close to parallel: the smallest eigenvalue of the
    weighted mean of ``I - d d^T`` is ``sin^2(theta/2)`` for two rays at angle theta.
    """
    w = weights / weights.sum()
    proj = np.eye(3)[None] - dirs[:, :, None] * dirs[:, None, :]
    a_mat = np.einsum("k,kij->ij", w, proj)
    if np.linalg.eigvalsh(a_mat)[0] < min_eig:
        return None
    b_vec = np.einsum("k,kij,kj->i", w, proj, origins)
    return np.linalg.solve(a_mat, b_vec)


def ray_inliers(centre, origins, dirs, cos_thr):
    """Rays whose direction points at ``centre`` within the threshold (in front of the camera)."""
    v = centre[None] - origins
    norm = np.linalg.norm(v, axis=1)
    cosines = np.where(norm > 1e-9, np.sum(v * dirs, axis=1) / np.maximum(norm, 1e-9), -1.0)
    return cosines >= cos_thr, cosines


def log_so3(r: np.ndarray) -> np.ndarray:
    """Rotation vectors ``[M, 3]`` of rotation matrices ``[M, 3, 3]``."""
    cos = np.clip((np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    theta = np.arccos(cos)
    vee = np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0], r[:, 1, 0] - r[:, 0, 1]], 1)
    sin = np.sin(theta)
    small = sin < 1e-6
    scale = np.where(small, 0.5, theta / (2.0 * np.where(small, 1.0, sin)))
    out = vee * scale[:, None]
    near_pi = small & (theta > 1.0)
    for k in np.nonzero(near_pi)[0]:  # theta ~ pi: axis from the symmetric part
        sym = (r[k] + np.eye(3)) / 2.0
        axis = sym[np.argmax(np.diag(sym))]
        out[k] = axis / np.linalg.norm(axis) * theta[k]
    return out


def exp_so3(v: np.ndarray) -> np.ndarray:
    theta = np.linalg.norm(v)
    if theta < 1e-12:
        return np.eye(3)
    k = v / theta
    skew = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(theta) * skew + (1 - math.cos(theta)) * skew @ skew


def rotation_l1_median(rotations: np.ndarray, weights: Optional[np.ndarray] = None,
                       iterations: int = 50) -> np.ndarray:
    """Weighted geodesic L1 median of rotations ``[M, 3, 3]`` (Weiszfeld on SO(3)).

    Starts from the chordal L2 mean (SVD projection of the weighted sum), then repeats
    ``R <- R exp(sum w_k v_k / |v_k| / sum w_k / |v_k|)`` with ``v_k = log(R^T R_k)``.
    """
    rotations = np.asarray(rotations, dtype=np.float64)
    w = np.ones(len(rotations)) if weights is None else np.asarray(weights, dtype=np.float64)
    u, _, vt = np.linalg.svd(np.einsum("k,kij->ij", w, rotations))
    rot = u @ np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt))]) @ vt
    for _ in range(iterations):
        v = log_so3(np.swapaxes(rot, -1, -2)[None] @ rotations)
        dist = np.linalg.norm(v, axis=1)
        if np.all(dist < 1e-10):
            break
        inv = w / np.maximum(dist, 1e-10)
        step = (inv[:, None] * v).sum(0) / inv.sum()
        rot = rot @ exp_so3(step)
        if np.linalg.norm(step) < 1e-10:
            break
    return rot


def ray_consensus(origins: np.ndarray, dirs: np.ndarray, weights: np.ndarray, inlier_deg: float,
                  min_rays: int, min_ray_angle_deg: float, max_hypotheses: int, seed: int
                  ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], str]:
    """The point ``[3]`` that the most rays ``o_k + s d_k`` point at.

    RANSAC over pairs of rays (all pairs, or ``max_hypotheses`` of them drawn with ``seed``),
    then a weighted least-squares intersection of the inliers, refitted once on the rays that
    agree with it.

    Returns:
        ``(centre, inlier_mask, "")``; on failure ``(None, None, reason)`` when no pair of rays
        intersects, ``(None, mask, reason)`` when the inliers are nearly parallel.
    """
    n = len(origins)
    cos_thr = math.cos(math.radians(inlier_deg))
    min_eig = math.sin(math.radians(min_ray_angle_deg) / 2.0) ** 2
    hypotheses = list(itertools.combinations(range(n), 2))
    if len(hypotheses) > max_hypotheses:
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(hypotheses), max_hypotheses, replace=False)
        hypotheses = [hypotheses[k] for k in sorted(pick)]
    best_mask, best_score = None, (-1, -np.inf)
    for k, m in hypotheses:
        idx = np.array([k, m])
        centre = intersect_rays(origins[idx], dirs[idx], np.ones(2), min_eig)
        if centre is None:
            continue
        mask, cosines = ray_inliers(centre, origins, dirs, cos_thr)
        score = (int(mask.sum()), float(np.sum(cosines[mask])))
        if score > best_score:
            best_mask, best_score = mask, score
    if best_mask is None or best_mask.sum() < min_rays:
        max_angle = max_pairwise_angle_deg(dirs)
        return (None, None, f"degenerate ray geometry: no two rays intersect in front of their "
                            f"cameras at >= {min_ray_angle_deg} deg (widest pair "
                            f"{max_angle:.2f} deg)")
    centre = intersect_rays(origins[best_mask], dirs[best_mask], weights[best_mask], min_eig)
    if centre is None:
        return None, best_mask, "degenerate ray geometry: inlier rays are nearly parallel"
    final_mask, _ = ray_inliers(centre, origins, dirs, cos_thr)
    if final_mask.sum() >= min_rays and not np.array_equal(final_mask, best_mask):
        refit = intersect_rays(origins[final_mask], dirs[final_mask], weights[final_mask],
                               min_eig)
        if refit is not None:
            centre, best_mask = refit, final_mask
    return centre, best_mask, ""
