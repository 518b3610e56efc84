"""Two-view geometry of one cross pair of the classical baseline: normalised coordinates, a robust
essential matrix with cheirality (OpenCV) and the parallax of the matches."""

from __future__ import annotations

import cv2
import numpy as np

ESSENTIAL_METHODS = {
    "ransac": cv2.RANSAC,
    "lmeds": cv2.LMEDS,
    "usac_accurate": cv2.USAC_ACCURATE,
    "usac_magsac": cv2.USAC_MAGSAC,
}


def normalise_pixels(pixels: np.ndarray, k_mat: np.ndarray) -> np.ndarray:
    """Pixel coordinates ``[M, 2]`` -> normalised image coordinates ``[M, 2]``."""
    homog = np.concatenate([pixels, np.ones((len(pixels), 1))], axis=1)
    rays = homog @ np.linalg.inv(k_mat).T
    return rays[:, :2] / rays[:, 2:3]


def essential_relative_pose(xa, xb, threshold, cfg):
    """Robust essential matrix + cheirality on normalised coordinates.

    Returns ``(R, t, inlier_mask)`` with ``x_b = R x_a + t``, or None.
    """
    e_mats, mask = cv2.findEssentialMat(xa, xb, np.eye(3), ESSENTIAL_METHODS[cfg.essential_method],
                                        cfg.ransac_confidence, threshold, cfg.ransac_max_iters)
    if e_mats is None or mask is None or e_mats.shape[0] < 3:
        return None
    best = None
    # The five-point solver can return several stacked 3x3 solutions: keep the best supported.
    for k in range(e_mats.shape[0] // 3):
        e_mat = e_mats[3 * k:3 * k + 3]
        n_good, r_mat, t_vec, pose_mask = cv2.recoverPose(e_mat, xa, xb, np.eye(3),
                                                          mask=mask.copy())
        if best is None or n_good > best[0]:
            best = (n_good, r_mat, t_vec.ravel(), pose_mask.ravel() > 0)
    if best is None or best[0] == 0:
        return None
    return best[1], best[2] / max(np.linalg.norm(best[2]), 1e-12), best[3]


def bearings(x: np.ndarray) -> np.ndarray:
    b = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    return b / np.linalg.norm(b, axis=1, keepdims=True)


def median_parallax_deg(xa: np.ndarray, xb: np.ndarray, r_ba: np.ndarray) -> float:
    """Median angle between matched bearings once the rotation is removed (translation cue)."""
    ba = bearings(xa)
    bb_in_a = bearings(xb) @ r_ba  # rows: R^T b
    cos = np.clip(np.sum(ba * bb_in_a, axis=1), -1.0, 1.0)
    return float(np.degrees(np.median(np.arccos(cos))))
