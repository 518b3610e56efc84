"""Window pairs of one trajectory without depth: overlap approximated from the poses alone.

Real sequences without depth maps (or without depth at the frames kept) cannot get the overlap
labels of ``g2g-data overlap``. Here the overlap of two frames is approximated by assuming a
fronto-parallel scene at a constant depth ``depth_m`` in front of each camera: the share of a
grid of pixels of frame a, lifted to that depth, that lands inside frame b in front of it, and
the same the other way; the symmetric overlap is the minimum of both (as in ``overlap.py``). It
ignores occlusion and the real scene depth, so it is a proxy from pose distance and viewing
angle, not a measured overlap.

Pairs: a window of ``window`` consecutive frames as group A and a disjoint window of the same
trajectory and camera, ``gap`` frames later (and, with ``both_directions``, the same two windows
with B as the anchor group); the score is the max-mean window score of ``mining.window_scores``.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from g2g_model.data.mining import WindowPair, window_scores
from g2g_model.geometry import invert_pose


def _pixel_grid(width: int, height: int, n: int) -> np.ndarray:
    u = (np.arange(n) + 0.5) * width / n - 0.5
    v = (np.arange(n) + 0.5) * height / n - 0.5
    uu, vv = np.meshgrid(u, v)
    return np.stack([uu.ravel(), vv.ravel(), np.ones(uu.size)])  # [3, n*n]


def frustum_overlap_matrix(K: np.ndarray, width: int, height: int, world_T_cam: np.ndarray,
                           depth_m: float = 2.0, grid: int = 16) -> np.ndarray:
    """Symmetric approximate overlap ``[T, T]`` of the frames of one camera (see module doc)."""
    if depth_m <= 0:
        raise ValueError(f"depth_m must be > 0, got {depth_m}")
    K = np.asarray(K, dtype=np.float64)
    poses = np.asarray(world_T_cam, dtype=np.float64)
    rays = np.linalg.inv(K) @ _pixel_grid(width, height, grid)
    pts_cam = np.vstack([rays * depth_m, np.ones(rays.shape[1])])      # [4, P], z = depth_m
    world = poses @ pts_cam                                             # [T, 4, P]
    inv = np.stack([invert_pose(p) for p in poses])                     # [T, 4, 4]
    # cam_b <- world applied to the points of every frame a: [T_b, T_a, 4, P]
    in_b = np.einsum("bij,ajp->baip", inv, world)
    z = in_b[:, :, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (K[0, 0] * in_b[:, :, 0] + K[0, 2] * z) / z
        v = (K[1, 1] * in_b[:, :, 1] + K[1, 2] * z) / z
    inside = (z > 1e-6) & (u >= -0.5) & (u <= width - 0.5) & (v >= -0.5) & (v <= height - 0.5)
    a_in_b = inside.mean(-1).T                                          # [T_a, T_b]
    return np.minimum(a_in_b, a_in_b.T)


def frustum_window_pairs(overlap: np.ndarray, traj: str, cam: str, window: int,
                         gaps: Iterable[int], min_score: float = 0.0,
                         both_directions: bool = True) -> list[WindowPair]:
    """Window pairs ``gap`` frames apart (``gap >= window``: no shared frame), scored."""
    scores = window_scores(overlap, window)
    pairs = []
    n_starts = scores.shape[0]
    for gap in sorted(set(int(g) for g in gaps)):
        if gap < window:
            raise ValueError(f"gap {gap} < window {window}: the windows would share frames")
        for i in range(n_starts - gap):
            j = i + gap
            starts = [(i, j), (j, i)] if both_directions else [(i, j)]
            for a, b in starts:
                s = float(scores[a, b])
                if s >= min_score:
                    pairs.append(WindowPair(traj, cam, a, traj, cam, b, window, round(s, 4)))
    return pairs
