"""A metric rig step from the cameras of the rig that overlap.

Where two cameras of the rig see the same part of the scene at one instant (a stereo pair,
neighbouring ring cameras, a car's front cameras), their matches at the previous keyframe are
triangulated with the rig's calibrated extrinsics: metric points in the previous body frame,
whatever the motion. Relocalization's
:class:`~g2g_model.localization.verification.StructureVerifier` triangulates them (its checks;
the previous keyframe, ``cam_to_world`` = base_T_cam, is its map window; only the overlapping
camera pairs are matched, and only along their epipolar lines, since the calibration is known).
Each triangulated keypoint is then followed into the cameras of the current keyframe that can
see what its camera saw (the camera pairs of the relative pose). Matching every point's
descriptor against every image, as relocalization does, found few right ones across the rig's
wide viewpoint changes. The current body pose is solved from those 2D-3D matches by the
generalized absolute pose that relocalization uses
(:func:`~g2g_model.localization.absolute_pose.absolute_pose`). The step's length then comes
from the rig's own geometry, also when it drives straight, where the generalized relative pose
between two keyframes barely observes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.local_features import per_frame_intrinsics
from g2g_model.localization.verdict import Fallback, judge
from g2g_model.localization.absolute_pose import absolute_pose
from g2g_model.localization.verification import StructureVerifier
from g2g_model.poselib_conversions import camera_pose, pinhole_camera


@dataclass
class PointStep:
    """A rig step solved from triangulated points: ``delta`` (base_prev_T_base_now), its
    ``[6, 6]`` covariance, ``inliers``, the verdict ``path``, ``reason``, ``apart`` ((m, deg)
    from G2G) and the 2D-3D matches it was solved from (per camera of the current keyframe:
    pixels ``p2d``, points ``p3d`` in the previous body frame, PoseLib's cam_T_base ``exts``,
    ``intrinsics``), by which another candidate step can be scored
    (:func:`~g2g_model.localization.rig_keyframe_map.reprojection_inliers`)."""

    delta: np.ndarray
    covariance: np.ndarray
    inliers: int
    path: str
    reason: str
    apart: Tuple[float, float]
    p2d: List[np.ndarray]
    p3d: List[np.ndarray]
    exts: list
    intrinsics: np.ndarray


def overlap_motion(structure: StructureVerifier, group_a, group_b, delta: np.ndarray,
                   pairs: List[Tuple[int, int]], followed: List[Tuple[int, int]]) -> PointStep:
    """The rig step from ``group_a`` (previous keyframe) to ``group_b`` (current one), both
    with ``cam_to_world`` = base_T_cam and the same cameras: ``(base_prev_T_base_now, its
    [6, 6] covariance, inliers, verdict path, reason, (m, deg) from G2G)``. ``delta``: G2G's
    step (the seed and the prior of the verdict, :func:`~g2g_model.localization.verdict.judge`);
    ``pairs``: the cameras ``(i, j)``, i < j, of ``group_a`` that overlap; ``followed``: the
    cameras ``(i, j)`` (i of ``group_a``, j of ``group_b``) in which a point of camera i is
    looked for in camera j (those whose views can overlap between keyframes). The covariance is
    the body origin's (x y z, then rotations about the previous base axes). Raises
    :class:`Fallback` when there is no trusted pose."""
    if not pairs:
        raise Fallback("no cameras of the rig overlap")
    if len(group_a.images) != len(group_b.images):
        raise Fallback("the keyframes have different cameras")
    return window_motion(structure, group_a, group_b, delta, pairs, followed,
                         "overlapping camera pairs")


def window_motion(structure: StructureVerifier, group_a, group_b, delta: np.ndarray,
                  pairs: List[Tuple[int, int]], followed: List[Tuple[int, int]],
                  what: str) -> PointStep:
    """:func:`overlap_motion` for any window of posed frames ``group_a`` (``cam_to_world`` in
    the previous body frame; e.g. the rig at the previous keyframe and at the one before):
    ``pairs`` of its frames are triangulated, ``followed`` ``(window frame, camera of
    group_b)``; ``what`` names the pairs in the reason."""
    cfg = structure.config
    k_a = per_frame_intrinsics(group_a.intrinsics, len(group_a.images))
    k_b = per_frame_intrinsics(group_b.intrinsics, len(group_b.images))
    tracks = structure.triangulated_keypoints(group_a.images, k_a,
                                              np.asarray(group_a.cam_to_world, float), pairs)
    num_points = sum(len(idx) for idx, _ in tracks)
    if num_points < cfg.min_inliers:
        raise Fallback(f"{num_points} points triangulated by {len(pairs)} {what} "
                       f"(< {cfg.min_inliers})")
    local = structure.local
    base_T_cam = np.asarray(group_b.cam_to_world, float)
    feats_a = [local.describe(image) for image in group_a.images]
    p2d, p3d, exts, cams = [], [], [], []
    for cam in range(len(group_b.images)):
        now = local.describe(group_b.images[cam])
        x, X = [np.zeros((0, 2))], [np.zeros((0, 3))]
        looked = [prev for prev, (idx, _) in enumerate(tracks)
                  if len(idx) and (prev, cam) in followed]
        for prev, found in zip(looked, local.match_each(
                [feats_a[prev].descriptors[tracks[prev][0]] for prev in looked],
                now.descriptors)):
            x.append(now.keypoints[found[:, 1]])
            X.append(tracks[prev][1][found[:, 0]])
        p2d.append(np.concatenate(x).astype(float))
        p3d.append(np.concatenate(X).astype(float))
        exts.append(camera_pose(invert_pose(base_T_cam[cam])))
        cams.append(pinhole_camera(k_b[cam], group_b.images[cam]))
    matched = sum(len(p) for p in p2d)
    if matched < cfg.min_inliers:
        raise Fallback(f"{matched} of the {num_points} points triangulated by {len(pairs)} "
                       f"{what} found again (< {cfg.min_inliers})")
    solved, cov, inliers = absolute_pose(p2d, p3d, exts, cams, k_b, delta, cfg)
    path, reason, apart = judge(delta, solved, cov, inliers, matched, cfg)
    return PointStep(solved, cov, inliers, path,
                     f"{num_points} points of {len(pairs)} {what}; {reason}", apart, p2d, p3d,
                     exts, k_b)
