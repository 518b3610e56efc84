"""Shared pieces of the rig-verification tests: a yaw rotation, rigs of cameras placed on a
body, and the rig rendered at poses along a straight stretch of a simulated hall."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from g2g_model.data.rig import R_BODY_CAM_FORWARD, pinhole_K
from g2g_model.data.sim.occupancy import build_occupancy
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.scene import make_scene
from g2g_model.data.sim.trajectory import make_traversals
from g2g_model.estimation.groups import Group
from g2g_model.geometry import make_pose


def yawed(deg: float) -> np.ndarray:
    """Rotation about the body's z axis (REP-103: up) by ``deg``."""
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rig(cameras: Sequence[Tuple[float, Sequence[float]]]) -> np.ndarray:
    """``[N, 4, 4]`` base_T_cam of cameras given as (yaw in degrees, position on the body)."""
    return np.stack([make_pose(yawed(yaw) @ R_BODY_CAM_FORWARD, position)
                     for yaw, position in cameras])


def straight_drive(base_T_cam: np.ndarray, size: int, step_m: float, steps: int
                   ) -> List[Group]:
    """The rig (90 deg pinhole cameras of ``size`` px) rendered at ``steps + 1`` poses
    ``step_m`` apart straight ahead, from the first pose of a simulated walk through a hall
    with room around that whole stretch."""
    scene = make_scene(20005, 0, "hall")
    occupancy = build_occupancy(scene)
    walk = make_traversals(scene, 1, 40)[0].world_T_body
    ahead = np.linspace(0.0, steps * step_m, 6 * steps + 1)
    for start in walk:
        if occupancy.clearance_at(start[:2, 3] + np.outer(ahead, start[:2, 0])).min() > 0.8:
            break
    else:
        raise AssertionError("no straight stretch in the scene")
    K = pinhole_K(size, size, 90.0)
    renderer = Renderer(scene)
    step = make_pose(np.eye(3), [step_m, 0.0, 0.0])
    groups = []
    for k in range(steps + 1):
        rgb, _ = renderer.render((start @ np.linalg.matrix_power(step, k))[None] @ base_T_cam,
                                 K, size, size)
        groups.append(Group(list(rgb), np.stack([K] * len(base_T_cam)), base_T_cam))
    return groups
