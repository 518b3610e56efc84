"""Which cameras of two rig instants can see the same part of the scene, from the rig's
extrinsics and intrinsics alone (rig odometry's camera pairing, :mod:`.rig_motion`)."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from g2g_model.localization.local_features import per_frame_intrinsics


def view_cone_deg(K: np.ndarray, image: np.ndarray) -> float:
    """Half-angle (degrees) of the smallest cone about the optical axis that holds the whole
    image: the angle of its farthest corner."""
    h, w = image.shape[:2]
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], float)
    rays = corners @ np.linalg.inv(np.asarray(K, float)).T
    return float(np.degrees(np.arctan(np.linalg.norm(rays[:, :2], axis=1).max())))


def overlapping_pairs(group_a, group_b, max_turn_deg: float) -> List[Tuple[int, int]]:
    """``(i, j)``: camera i of the previous keyframe and camera j of the current one whose
    views can overlap when the rig turns by at most ``max_turn_deg`` between them: the angle
    between their optical axes (in the body frame, from the extrinsics) is at most the sum of
    their view cones' half-angles (from the intrinsics and image sizes) plus that turn. Every
    camera is paired with itself; 180 pairs every camera with every camera."""
    out = []
    sides = []
    for group in (group_a, group_b):
        ks = per_frame_intrinsics(group.intrinsics, len(group.images))
        sides.append((np.asarray(group.cam_to_world, float)[:, :3, 2],
                      [view_cone_deg(k, im) for k, im in zip(ks, group.images)]))
    (axes_a, cone_a), (axes_b, cone_b) = sides
    angle = np.degrees(np.arccos(np.clip(axes_a @ axes_b.T, -1.0, 1.0)))
    for i in range(len(axes_a)):
        for j in range(len(axes_b)):
            if max_turn_deg >= 180 or angle[i, j] <= cone_a[i] + cone_b[j] + max_turn_deg:
                out.append((i, j))
    return out
