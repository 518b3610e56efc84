"""Covariances of geometric solutions: from reprojection residuals (Gauss-Newton,
``sigma^2 (J^T J)^-1``) and carried to another point of the same rigid body."""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from g2g_model.geometry import invert_pose


def skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]], float)


def transfer_covariance(covariance: np.ndarray, lever: np.ndarray) -> np.ndarray:
    """Covariance of another point rigidly attached to the camera, ``lever`` metres from the
    camera centre in the map frame (rotations about the map axes, as in :class:`Verification`):
    dp' = dp + dphi x lever."""
    jac = np.eye(6)
    jac[:3, 3:] = -skew(np.asarray(lever, float))
    return jac @ covariance @ jac.T


def pose_covariance(map_T_b0: np.ndarray, p2d: Sequence[np.ndarray], p3d: Sequence[np.ndarray],
                    cam_T_b0: Sequence[np.ndarray], intrinsics: np.ndarray,
                    min_sigma_px: float = 0.5) -> np.ndarray:
    """``[6, 6]`` covariance of the camera-0 pose (see :class:`Verification`) from its inlier
    reprojections: ``sigma^2 (J^T J)^-1`` with J by central differences of a world-frame
    perturbation (dp of the camera centre, then rotation about the map axes) and sigma the
    residuals' RMS (at least ``min_sigma_px``)."""
    def residuals(delta: np.ndarray) -> np.ndarray:
        R = cv2.Rodrigues(delta[3:])[0]
        T = map_T_b0.copy()
        T[:3, :3] = R @ map_T_b0[:3, :3]
        T[:3, 3] = map_T_b0[:3, 3] + delta[:3]
        b0_T_map = invert_pose(T)
        out = []
        for x, X, ext, K in zip(p2d, p3d, cam_T_b0, intrinsics):
            if not len(x):
                continue
            cam = np.vstack([ext, [0, 0, 0, 1]]) @ b0_T_map
            h = (X @ cam[:3, :3].T + cam[:3, 3]) @ K.T
            out.append((h[:, :2] / h[:, 2:3] - x).reshape(-1))
        return np.concatenate(out)

    r0 = residuals(np.zeros(6))
    eps = np.array([1e-4] * 3 + [1e-5] * 3)
    jac = np.stack([(residuals(np.eye(6)[k] * eps[k]) - residuals(-np.eye(6)[k] * eps[k]))
                    / (2 * eps[k]) for k in range(6)], axis=1)
    dof = max(len(r0) - 6, 1)
    sigma2 = max(float(r0 @ r0) / dof, min_sigma_px ** 2)
    try:
        cov = sigma2 * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return np.full((6, 6), np.nan)
    return 0.5 * (cov + cov.T)
