"""The query window's own consistency check of relocalization's structure verifier.

The verifier solves the whole query window as ONE rigid group whose frames sit where the
odometry says. Odometry that drifts inside the window (a long window, a slipping wheel) bends
that group, and the solve then lands off with a tight covariance and hundreds of inliers: on the
real TUM frames replayed with the demo's drift, the two wrong verified fixes (0.19 and 0.21 m)
passed every other test (benchmarks/RESULTS_real_reloc.md). The frames of the window's first
instant (the anchor B0 and the rig's other cameras at its stamp) solved on their own do not
depend on the odometry between instants; where they have enough inliers to be trusted and put
B0 far from the group's solution, the window is not one rigid group and the fix is refused.
On those replays (B0 alone, one camera): 2 of 2 wrong fixes refused, 15 of 15 good ones kept,
with 30 inliers required (with 3-4 inliers B0 alone is metres off: fewer say nothing).

:func:`frames_within` bounds the cause instead: the verifier refines the whole window's solution
on the instants within a span of odometry travel from the first one (``verify_window_span_m``),
so drift of a few percent per metre bends it by a centimetre or so; where those instants have
too few inliers the whole window's solution stands (and is checked).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.verdict import Fallback
from g2g_model.poselib_conversions import camera_pose, pose_matrix


#: The first instant alone must explain this many times the inliers its frames have under the
#: window's pose before its disagreement counts.
BETTER_BY = 1.5


def frames_within(cam_to_world: np.ndarray, stamps: Optional[Sequence[int]],
                  span_m: float) -> np.ndarray:
    """Indices of the query frames taken where the odometry had moved at most ``span_m`` from
    the window's first instant (every frame when ``span_m`` is 0). An instant's displacement
    is that of its first frame (the relocalization camera's: the query window comes first in
    the group), so the rig's other cameras at that stamp go with it whatever their lever arm;
    without stamps, each frame's own position counts. The anchor is always kept."""
    poses = np.asarray(cam_to_world, float)
    if span_m <= 0 or len(poses) < 2:
        return np.arange(len(poses))
    positions = poses[:, :3, 3]
    if stamps is not None and len(stamps) == len(poses):
        stamps = np.asarray(stamps, dtype=np.int64)
        first = {}
        for j, stamp in enumerate(stamps.tolist()):
            first.setdefault(stamp, j)
        positions = positions[[first[s] for s in stamps.tolist()]]
    moved = np.linalg.norm(positions - positions[0], axis=1)
    keep = moved <= span_m
    keep[0] = True
    return np.flatnonzero(keep)


def first_instant(stamps: Optional[Sequence[int]], count: int) -> np.ndarray:
    """Indices of the frames taken at the first frame's stamp (the anchor's instant); without
    stamps, the anchor alone."""
    if stamps is None or len(stamps) != count:
        return np.array([0])
    return np.flatnonzero(np.asarray(stamps, dtype=np.int64) == int(stamps[0]))


def anchor_alone(points2d: Sequence[np.ndarray], points3d: Sequence[np.ndarray],
                 b0_T_frames: Sequence[np.ndarray], cameras: Sequence[dict],
                 threshold_px: float, map_T_b0: np.ndarray
                 ) -> Tuple[Optional[np.ndarray], int]:
    """``(map_T_b0 solved from these frames alone, inliers)``: the frames' own 2D-3D matches,
    their poses ``b0_T_frames`` relative to B0 (PoseLib: one camera's absolute pose, or the
    generalized one for several), seeded with the group's ``map_T_b0``; ``(None, 0)`` with too
    few matches to solve."""
    import poselib

    x = [np.asarray(p, float).reshape(-1, 2) for p in points2d]
    X = [np.asarray(p, float).reshape(-1, 3) for p in points3d]
    if sum(len(p) for p in x) < 6:
        return None, 0
    ransac = {"max_reproj_error": threshold_px, "seed": 0}
    seed = camera_pose(invert_pose(np.asarray(map_T_b0, float)))
    if len(x) == 1:
        pose, info = poselib.estimate_absolute_pose(
            x[0], X[0], cameras[0], ransac, {"loss_scale": threshold_px}, initial_pose=seed)
        inliers = int(np.sum(info.get("inliers", [])))
    else:
        exts = [camera_pose(invert_pose(np.asarray(T, float))) for T in b0_T_frames]
        pose, info = poselib.estimate_generalized_absolute_pose(
            x, X, exts, list(cameras), ransac, {"loss_scale": threshold_px}, initial_pose=seed)
        inliers = int(sum(np.sum(m) for m in info.get("inliers", [])))
    solved = invert_pose(pose_matrix(pose))
    if not np.all(np.isfinite(solved)):
        return None, 0
    return solved, inliers


def check_window(points2d: Sequence[np.ndarray], points3d: Sequence[np.ndarray],
                 b0_T_frames: Sequence[np.ndarray], cameras: Sequence[dict],
                 stamps: Optional[Sequence[int]], threshold_px: float, map_T_b0: np.ndarray,
                 group_inliers: Dict[int, int], max_gap_m: float, min_inliers: int
                 ) -> Optional[float]:
    """Raise :class:`~g2g_model.localization.verdict.Fallback` when the window's first
    instant solved alone puts B0 more than ``max_gap_m`` from the group's ``map_T_b0`` AND
    explains its own matches clearly better than the group's pose does (at least
    ``min_inliers``, and :data:`BETTER_BY` times the inliers those frames have under the
    group's pose, ``group_inliers``: frame index -> count): one frame alone can settle on a
    wrong pose with tens of inliers (a wall, a repeated texture), and it then explains no more
    of its matches than the group does. Else return the gap (None when the first instant says
    nothing: too few inliers, or the whole window is one instant). Per frame: matches, pose
    relative to B0, camera; ``stamps`` (optional) tell which frames share the first instant."""
    idx = first_instant(stamps, len(points2d))
    if len(idx) == len(points2d):
        return None
    alone, inliers = anchor_alone([points2d[i] for i in idx], [points3d[i] for i in idx],
                                  [b0_T_frames[i] for i in idx], [cameras[i] for i in idx],
                                  threshold_px, map_T_b0)
    under_group = sum(int(group_inliers.get(int(i), 0)) for i in idx)
    if alone is None or inliers < max(min_inliers, BETTER_BY * under_group):
        return None
    gap = float(np.linalg.norm(alone[:3, 3] - np.asarray(map_T_b0, float)[:3, 3]))
    if gap > max_gap_m:
        raise Fallback(f"the query window is not one rigid group: its first instant solved "
                       f"alone ({len(idx)} frame{'s' if len(idx) > 1 else ''}, {inliers} "
                       f"inliers, {under_group} under the window's pose) puts its first frame "
                       f"{gap:.2f} m from the window's solution "
                       f"(> verify_window_check_m {max_gap_m:g}): odometry drift inside the "
                       f"window?")
    return gap
