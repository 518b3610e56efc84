"""Windows of a map: runs of consecutive keyframes of one camera, and the window nearest to a
camera pose (the map side of window selection, :mod:`g2g_model.localization.window_selector`).
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from g2g_model.maps.format import G2GMap


def map_windows(gmap: G2GMap, camera: Optional[str], window: int,
                stride: int = 1) -> List[np.ndarray]:
    """Frame-index windows of ``window`` consecutive frames of one camera (``camera=None``: of
    every camera of the map; a window never mixes cameras)."""
    cameras = gmap.cameras() if camera is None else [camera]
    out: List[np.ndarray] = []
    for cam in cameras:
        idx = gmap.camera_indices(cam)
        out += [idx[s:s + window] for s in range(0, len(idx) - window + 1, stride)]
    return out


def nearest_window(gmap: G2GMap, windows: Sequence[np.ndarray], position: np.ndarray,
                   radius: float = float("inf"), direction: Optional[np.ndarray] = None,
                   metres_per_radian: float = 2.0,
                   disjoint_from: Optional[Sequence[int]] = None) -> Optional[int]:
    """Index of the window closest to a camera pose hint (within ``radius`` metres).

    The distance is that of the window's mean camera centre to ``position``; with a viewing
    ``direction`` (the hint camera's optical axis, map frame) the angle to the window's mean
    optical axis is added at ``metres_per_radian``, so that a window seen from the other side of
    the same place (no overlap) is not preferred.
    """
    if not windows:
        return None
    centres = gmap.positions()
    axes = np.stack([f.world_T_cam[:3, 2] for f in gmap.frames])
    best, best_cost = None, np.inf
    taken = set() if disjoint_from is None else {int(i) for i in disjoint_from}
    for i, w in enumerate(windows):
        if taken and taken.intersection(int(j) for j in w):
            continue
        dist = float(np.linalg.norm(centres[w].mean(0) - np.asarray(position)))
        if dist > radius:
            continue
        cost = dist
        if direction is not None:
            axis = axes[w].mean(0)
            norms = max(np.linalg.norm(axis) * np.linalg.norm(direction), 1e-9)
            cos = np.dot(axis, direction) / norms
            cost += metres_per_radian * float(np.arccos(np.clip(cos, -1.0, 1.0)))
        if cost < best_cost:
            best, best_cost = i, cost
    return best
