"""The pose of a generalized camera from 2D-3D matches (PoseLib), with its covariance: the
solver of relocalization's structure verifier and of rig odometry's overlap step."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.covariance import pose_covariance
from g2g_model.localization.verdict import Fallback
from g2g_model.poselib_conversions import camera_pose, pose_matrix

if TYPE_CHECKING:
    from g2g_model.localization.verifier_config import VerifierConfig


def absolute_pose(p2d: List[np.ndarray], p3d: List[np.ndarray], exts, cams, intrinsics,
                  prior: np.ndarray, cfg: "VerifierConfig") -> Tuple[np.ndarray, np.ndarray, int]:
    """``(world_T_b0, its [6, 6] covariance, inliers)``: the pose of a generalized camera from
    2D-3D matches per camera (``exts``: PoseLib's cam_T_b0 of each; ``cams``: its pinhole
    cameras, ``intrinsics`` their K) by PoseLib's ``estimate_generalized_absolute_pose``
    (RANSAC and refinement, seeded with ``prior`` = world_T_b0), the covariance from the
    inliers' reprojections (:func:`pose_covariance`). Raises :class:`Fallback` when fewer than
    ``min_inliers`` or not finite."""
    import poselib

    matched = sum(len(p) for p in p2d)
    pose, info = poselib.estimate_generalized_absolute_pose(
        p2d, p3d, exts, cams,
        {"max_reproj_error": cfg.reprojection_px, "seed": 0, "success_prob": 0.999,
         "max_iterations": cfg.ransac_iterations,
         "min_iterations": min(100, cfg.ransac_iterations)},
        {"loss_scale": cfg.reprojection_px}, initial_pose=camera_pose(invert_pose(prior)))
    inlier_masks = [np.asarray(m, bool) for m in info.get("inliers", [])]
    inliers = int(sum(m.sum() for m in inlier_masks))
    if inliers < cfg.min_inliers:
        raise Fallback(f"{inliers} inliers (< verify_min_inliers {cfg.min_inliers}) "
                       f"among {matched} matches")
    b0_T_world = pose_matrix(pose)
    if not np.all(np.isfinite(b0_T_world)):
        raise Fallback("the geometric solution is not finite")
    world_T_b0 = invert_pose(b0_T_world)
    cov = pose_covariance(world_T_b0, [p[m] for p, m in zip(p2d, inlier_masks)],
                          [p[m] for p, m in zip(p3d, inlier_masks)],
                          [e.Rt for e in exts], intrinsics)
    return world_T_b0, cov, inliers


def reprojection_errors(b0_T_world: np.ndarray, p2d: List[np.ndarray], p3d: List[np.ndarray],
                        cam_T_b0: List[np.ndarray], intrinsics) -> List[np.ndarray]:
    """Per camera, ``[M]`` reprojection errors (pixels) of its 2D-3D matches with the
    generalized camera at ``b0_T_world`` (``cam_T_b0``: each camera's 3x4 or 4x4 pose, e.g.
    PoseLib's ``Rt``; ``intrinsics``: its K); ``inf`` for a point behind the camera."""
    b0_T_world = np.asarray(b0_T_world, float)
    out = []
    for x, X, ext, K in zip(p2d, p3d, cam_T_b0, intrinsics):
        ext = np.asarray(ext, float)
        R = ext[:3, :3] @ b0_T_world[:3, :3]
        t = ext[:3, :3] @ b0_T_world[:3, 3] + ext[:3, 3]
        cam = np.asarray(X, float).reshape(-1, 3) @ R.T + t
        h = cam @ np.asarray(K, float).T
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.linalg.norm(h[:, :2] / h[:, 2:3] - np.asarray(x, float).reshape(-1, 2),
                                 axis=1)
        out.append(np.where((cam[:, 2] > 0) & np.isfinite(err), err, np.inf))
    return out
