"""Which query instants relocalization's structure verifier refines its solution on.

The verifier solves the whole query window as ONE rigid group whose frames sit where the
odometry says. Odometry that drifts inside the window (a long window, a slipping wheel) bends
that group, and the solve then lands off with a tight covariance and hundreds of inliers: on the
real TUM frames replayed with the demo's drift (2 %/m, 1 deg/m), two verified fixes over 2.2 m
windows were 0.19 and 0.21 m off while the same windows with the true intra-window poses were
5-9 mm off (benchmarks/RESULTS_real_reloc.md). So the whole window's solution is refined on the
instants within ``verify_window_span_m`` of odometry travel from the first one (the anchor's,
whose pose is published), where a drift of a few percent per metre bends the group by a
centimetre or so; where those instants have too few inliers, the whole window's solution stands,
and so it does where the refinement moves the anchor further than drift can explain
(:func:`refinement_allowed`).

A check that refused a window whose first instant, solved alone, disagreed with it was tried
and dropped: one frame alone settles on a wrong pose with tens of inliers often enough (a 1.26 m
error with 46 inliers on a correctly verified simulator window) to refuse good fixes.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np


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
