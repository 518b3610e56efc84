"""The query's anchor frame alone against the map window: 2D-3D and 2D-2D matches in one solve.

Where the map window's structure gives the whole query window too few 2D-3D inliers
(:class:`~g2g_model.localization.verification.StructureVerifier`), the query's anchor frame
(the first of the group: in the relocalize node the window's newest instant, where the fix
holds) still has its few 2D-3D matches with the map window's points AND its 2D-2D matches with
every map frame, whose poses the map knows. PoseLib's ``estimate_hybrid_pose`` solves one
camera from both kinds at once (RANSAC, then refinement on both), seeded with G2G's estimate.

It is judged by the rules of every geometric pose (:func:`~g2g_model.localization.verdict.
judge`: at least ``min_inliers``, the position uncertainty, the distance from G2G). Its
covariance is that of its 2D-3D inliers alone (:func:`~g2g_model.localization.covariance.
pose_covariance`): the epipolar inliers constrain the pose further, so it errs on the wide
side; with fewer than :data:`MIN_POINT_INLIERS` 2D-3D inliers the pose is not used.

Measured 2026-11-30 (scratch runs, then :class:`~g2g_model.localization.window_relative.
RelocalizationVerifier`, docs/VERIFICATION.md): on the simulated twin's window where the
relative pose between the windows made a wrong fix (0.18 m / 3.4 deg) the anchor frame solved
so had 93 inliers and was 0.8 cm / 0.14 deg off; on five other windows where the structure
failed it found 0-16 inliers and is refused.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.absolute_pose import reprojection_errors
from g2g_model.localization.covariance import pose_covariance
from g2g_model.localization.local_features import LocalFeatures, per_frame_intrinsics
from g2g_model.localization.verdict import Fallback
from g2g_model.localization.verification import QueryMatches
from g2g_model.poselib_conversions import camera_pose, pinhole_camera, pose_matrix

#: The least 2D-2D matches with a map frame for that frame to join the solve.
MIN_PAIR_MATCHES = 8
#: The least 2D-3D inliers behind the published covariance (six unknowns).
MIN_POINT_INLIERS = 6
#: PoseLib's epipolar (Sampson) threshold of the 2D-2D matches, pixels.
EPIPOLAR_PX = 2.0


def anchor_hybrid_pose(local: LocalFeatures, group_a, query, found: QueryMatches,
                       map_T_b0: np.ndarray, reprojection_px: float
                       ) -> Tuple[np.ndarray, np.ndarray, int, int]:
    """``(map_T_b0, [6, 6] covariance, inliers, matches)`` of the query's anchor frame
    (``query``'s first image) from its 2D-3D matches with the map window's points (``found``,
    :meth:`~g2g_model.localization.verification.StructureVerifier.query_matches`) and its 2D-2D
    matches with ``group_a``'s frames (module docstring), seeded with G2G's ``map_T_b0``.
    Raises :class:`Fallback` with the reason where it gives no usable pose."""
    import poselib

    k_a = per_frame_intrinsics(group_a.intrinsics, len(group_a.images))
    k_b = per_frame_intrinsics(query.intrinsics, len(query.images))
    anchor = local.describe(query.images[0])
    frames = [local.describe(image) for image in group_a.images]
    pairs = []
    for i, (feats, m) in enumerate(zip(frames, local.match_each(
            [f.descriptors for f in frames], anchor.descriptors))):
        if len(m) < MIN_PAIR_MATCHES:
            continue
        pm = poselib.PairwiseMatches()
        pm.cam_id1, pm.cam_id2 = i, 0
        pm.x1, pm.x2 = feats.keypoints[m[:, 0]], anchor.keypoints[m[:, 1]]
        pairs.append(pm)
    p2d = np.asarray(found.p2d[0], float).reshape(-1, 2) if found.p2d else np.zeros((0, 2))
    p3d = np.asarray(found.p3d[0], float).reshape(-1, 3) if found.p3d else np.zeros((0, 3))
    matched = len(p2d) + sum(len(p.x1) for p in pairs)
    if not pairs and len(p2d) < MIN_POINT_INLIERS:
        raise Fallback(f"the anchor frame has {len(p2d)} 2D-3D matches and no map frame with "
                       f"{MIN_PAIR_MATCHES} 2D-2D matches")
    pose, info = poselib.estimate_hybrid_pose(
        p2d, p3d, pairs, pinhole_camera(k_b[0], query.images[0]),
        [camera_pose(invert_pose(T)) for T in np.asarray(group_a.cam_to_world, float)],
        [pinhole_camera(k, im) for k, im in zip(k_a, group_a.images)],
        {"max_reproj_error": float(reprojection_px), "max_epipolar_error": EPIPOLAR_PX}, {},
        camera_pose(invert_pose(np.asarray(map_T_b0, float))))
    b0_T_map = pose_matrix(pose)
    if not np.all(np.isfinite(b0_T_map)):
        raise Fallback("a non-finite pose")
    solved = invert_pose(b0_T_map)
    inliers = int(info.get("num_inliers", 0))
    errors = reprojection_errors(b0_T_map, [p2d], [p3d], [np.eye(4)], k_b[:1])[0]
    near = errors < reprojection_px
    if near.sum() < MIN_POINT_INLIERS:
        raise Fallback(f"{int(near.sum())} of its 2D-3D matches agree (< {MIN_POINT_INLIERS}): "
                       "no covariance")
    cov = pose_covariance(solved, [p2d[near]], [p3d[near]], [np.eye(4)], k_b[:1])
    return solved, cov, inliers, matched
