"""Which query instants relocalization's structure verifier refines its solution on.

The verifier solves the whole query window as ONE rigid group whose frames sit where the
odometry says. Odometry that drifts inside the window (a long window, a slipping wheel) bends
that group, and the solve then lands off with a tight covariance and hundreds of inliers: on the
real TUM frames replayed with the demo's drift (2 %/m, 1 deg/m), two verified fixes over 2.2 m
windows were 0.19 and 0.21 m off while the same windows with the true intra-window poses were
5-9 mm off (benchmarks/RESULTS_real_reloc.md). So the whole window's solution is refined on the
instants within ``verify_window_span_m`` of odometry travel from the first one (the anchor's,
whose pose is published; the relocalize node gives the window newest instant first,
:func:`~g2g_model.localization.relocalizer.newest_first`), where a drift of a few percent per
metre bends the group by a
centimetre or so; where those instants have too few inliers, the whole window's solution stands,
and so it does where the refinement moves the anchor further than drift can explain
(:func:`refinement_allowed`) or where they do not fit the refined pose much better than the
whole window's (:func:`bend_shown`): with the odometry right inside the window, the solve on
all its frames is the more accurate (real TUM windows with their true intra-window poses,
2026-11-30: the refinement on every window took the rotation error from 0.16 to 0.28 deg mean
on the node replay without drift, and g2g-eval's 26 real 5 + 5 pairs from 0.45 to 0.55).

A check that refused a window whose first instant, solved alone, disagreed with it was tried
and dropped: one frame alone settles on a wrong pose with tens of inliers often enough (a 1.26 m
error with 46 inliers on a correctly verified simulator window) to refuse good fixes.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.absolute_pose import reprojection_errors


#: The refinement near the start may move the anchor by at most this share of the window's
#: odometry travel (and at least :data:`MIN_MOVE_M`): a bend from drift moves it by a part of
#: the travel (0.19-0.21 m over the real replay's 2.2-2.4 m), a solve that settles on another
#: consensus of the fewer frames near the start jumps further (1.25 m over a 1 m window seen in
#: the demo), and the whole window's solution then stands.
MAX_MOVE_SHARE = 0.15
MIN_MOVE_M = 0.1


def instant_travel(cam_to_world: np.ndarray, stamps: Optional[Sequence[int]]) -> np.ndarray:
    """Per query frame, how far the odometry had moved from the window's first instant. An
    instant's displacement is that of its first frame (the relocalization camera's: the query
    window comes first in the group), so the rig's other cameras at that stamp go with it
    whatever their lever arm; without stamps, each frame's own position counts."""
    poses = np.asarray(cam_to_world, float)
    positions = poses[:, :3, 3]
    if stamps is not None and len(stamps) == len(poses):
        first: dict = {}
        for j, stamp in enumerate(int(s) for s in stamps):
            first.setdefault(stamp, j)
        positions = positions[[first[int(s)] for s in stamps]]
    return np.linalg.norm(positions - positions[0], axis=1)


def frames_within(travel: np.ndarray, span_m: float) -> np.ndarray:
    """Indices of the query frames taken where the odometry had moved at most ``span_m`` from
    the window's first instant (``travel``: :func:`instant_travel`; every frame when ``span_m``
    is 0). The anchor is always kept."""
    travel = np.asarray(travel, float)
    if span_m <= 0 or len(travel) < 2:
        return np.arange(len(travel))
    keep = travel <= span_m
    keep[0] = True
    return np.flatnonzero(keep)


def refinement_allowed(whole_T: np.ndarray, near_T: np.ndarray, travel: np.ndarray) -> bool:
    """Whether the anchor pose refined near the start (``near_T``) stays within what drift
    inside the window can explain of the whole window's (``whole_T``): :data:`MAX_MOVE_SHARE`
    of the window's odometry travel (``travel``: :func:`instant_travel`), at least
    :data:`MIN_MOVE_M`."""
    moved = float(np.linalg.norm(np.asarray(near_T)[:3, 3] - np.asarray(whole_T)[:3, 3]))
    return moved <= max(MIN_MOVE_M, MAX_MOVE_SHARE * float(np.max(travel, initial=0.0)))


#: How much better the refined anchor pose must fit the instants near the start than the whole
#: window's pose (the drop of their squared reprojection errors, in units of the keypoints'
#: noise) before the whole window counts as bent. For independent errors a pose's six degrees of
#: freedom would call for 22.5 (chi-square, p = 0.001); map points' errors are shared by every
#: frame that sees them. On real TUM windows with ground-truth intra-window poses the drop
#: stayed under 95 on g2g-eval's 16 windows of 5 + 5 pairs and under 200 on 41 of its 42 of
#: 3 + 3 (171 and 337 the highest), and reached 141 on the node replay without drift, against
#: 654-9,391 on the same replay's windows with the demo's drift (2 %/m, 1 deg/m; 2026-11-30).
BEND_CHI2 = 200.0


def bend_shown(whole_T: np.ndarray, near_T: np.ndarray, p2d: List[np.ndarray],
               p3d: List[np.ndarray], cam_T_b0: List[np.ndarray], intrinsics,
               max_px: float) -> bool:
    """Whether the instants near the start fit the refined anchor pose ``near_T`` (world_T_b0)
    so much better than the whole window's ``whole_T`` that the window is bent
    (:data:`BEND_CHI2`). ``p2d``/``p3d``: their 2D-3D matches per frame, ``cam_T_b0`` (3x4 or
    4x4) and ``intrinsics`` [3, 3] their cameras; the matches within ``max_px`` of ``near_T``
    count, each error truncated at ``max_px``, and the noise is their median under
    ``near_T``. Where the odometry inside the window is right, the whole window's solution,
    on all its frames, is the more accurate one."""
    whole, near = (np.concatenate(reprojection_errors(invert_pose(T), p2d, p3d, cam_T_b0,
                                                      intrinsics) or [np.zeros(0)]) ** 2
                   for T in (whole_T, near_T))
    inliers = near < max_px ** 2
    if inliers.sum() < 6:
        return True  # too few to tell: the refinement stands
    drop = float(np.sum(np.minimum(whole[inliers], max_px ** 2)) - np.sum(near[inliers]))
    # The median of a 2D Gaussian error's squared length is 2 ln 2 sigma^2.
    sigma2 = max(float(np.median(near[inliers])) / (2.0 * np.log(2.0)), 1e-6)
    return drop / sigma2 > BEND_CHI2
