"""2-D occupancy and clearance of a scene's walkable floor (for collision-free trajectories).

Blocked: everything outside the rooms, every wall (except door openings) and the footprint of
every floor-standing piece of furniture. Small season objects stand on furniture, so the map is
the same for every appearance variant of a scene.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from g2g_model.data.sim.scene import Scene

RESOLUTION = 0.05  # metres per cell


@dataclass
class Occupancy:
    """Grid with cell (i, j) centred at ``origin + (j + 0.5, i + 0.5) * res`` (x = column).

    ``blocked [H,W]`` bool, ``clearance [H,W]`` metres to the nearest blocked cell.
    """

    origin: np.ndarray
    res: float
    blocked: np.ndarray
    clearance: np.ndarray

    def to_cell(self, xy: np.ndarray) -> np.ndarray:
        """``[N,2]`` metres -> ``[N,2]`` integer (row, col), clipped to the grid."""
        ij = np.floor((np.asarray(xy)[:, ::-1] - self.origin[::-1]) / self.res).astype(np.int64)
        return np.clip(ij, 0, np.array(self.blocked.shape) - 1)

    def to_xy(self, ij: np.ndarray) -> np.ndarray:
        """``[N,2]`` (row, col) -> ``[N,2]`` cell centres in metres."""
        return (np.asarray(ij)[:, ::-1] + 0.5) * self.res + self.origin

    def clearance_at(self, xy: np.ndarray) -> np.ndarray:
        """Bilinear clearance ``[N]`` at metric points ``[N,2]``."""
        rc = (np.asarray(xy)[:, ::-1] - self.origin[::-1]) / self.res - 0.5
        return ndimage.map_coordinates(self.clearance, rc.T, order=1, mode="nearest")


def build_occupancy(scene: Scene, res: float = RESOLUTION) -> Occupancy:
    lo, hi = scene.bounds()
    origin = lo[:2] - 2 * res
    shape = np.ceil((hi[:2] - lo[:2]) / res).astype(int) + 4
    h, w = int(shape[1]), int(shape[0])
    centres = origin + (np.stack(np.meshgrid(np.arange(w), np.arange(h)), -1) + 0.5) * res
    x, y = centres[..., 0], centres[..., 1]
    inside = np.zeros((h, w), bool)
    for r_lo, r_hi in zip(scene.room_lo, scene.room_hi):
        inside |= (x > r_lo[0]) & (x < r_hi[0]) & (y > r_lo[1]) & (y < r_hi[1])
    blocked = ~inside
    half = res * 0.75
    for r_lo, r_hi in zip(scene.room_lo, scene.room_hi):
        in_y = (y >= r_lo[1] - half) & (y <= r_hi[1] + half)
        in_x = (x >= r_lo[0] - half) & (x <= r_hi[0] + half)
        for cx in (r_lo[0], r_hi[0]):
            blocked |= (np.abs(x - cx) <= half) & in_y
        for cy in (r_lo[1], r_hi[1]):
            blocked |= (np.abs(y - cy) <= half) & in_x
    for door in scene.doors:
        along = y if door.axis == 0 else x
        across = x if door.axis == 0 else y
        opening = (np.abs(across - door.coord) <= half + 1e-9) & (along > door.span[0]) & (
            along < door.span[1])
        blocked &= ~opening
    for b_lo, b_hi, on_floor in zip(scene.box_lo, scene.box_hi, scene.floor_boxes):
        if on_floor:
            blocked |= (x >= b_lo[0] - half) & (x <= b_hi[0] + half) & (
                y >= b_lo[1] - half) & (y <= b_hi[1] + half)
    clearance = ndimage.distance_transform_edt(~blocked) * res
    return Occupancy(origin=origin, res=res, blocked=blocked, clearance=clearance)
