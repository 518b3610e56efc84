"""Which map points a query keypoint may match while tracking: those an accurate prior pose
projects near it (``verify_tracking_radius_px``).

Matching a query image against every point of the map window needs Lowe's ratio test to pass
among all of them, which plain or repeated surfaces fail (two map points look alike). While the
relocalizer tracks a geometric fix, the query camera's pose in the map is known to a few pixels
of reprojection, so each keypoint only competes with the map points projected within a radius of
it: the ratio test then separates neighbours, not look-alikes across the image. The solve that
follows is the same robust one, so the prior narrows the candidates but does not decide the pose.
"""

from __future__ import annotations

import numpy as np
import torch

#: Descriptor distance a guided match's nearest neighbour must beat by the ratio test when no
#: other map point lies within the radius. Descriptors are unit vectors; on the real office frames
#: (2026-12-01, 10th-90th percentiles) RootSIFT's true matches lie 0.13-0.36 apart and unrelated
#: pairs 0.74-1.02, ALIKED's 0.19-0.55 and 1.21-1.50.
NO_RIVAL_DISTANCE = 1.0


def projected_candidates(keypoints: np.ndarray, points: np.ndarray, k: np.ndarray,
                         map_T_cam: np.ndarray, radius_px: float) -> np.ndarray:
    """``[N, M]`` bool: keypoint ``n`` (``[N, 2]`` pixels) may match map point ``m`` (``[M, 3]``
    in the map frame) when the camera at ``map_T_cam`` with intrinsics ``k`` sees the point in
    front of it within ``radius_px`` of the keypoint."""
    cam = (points - map_T_cam[:3, 3]) @ map_T_cam[:3, :3]  # world -> camera
    depth = cam[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = (cam @ np.asarray(k, float).T)[:, :2] / depth[:, None]
    front = (depth > 1e-6) & np.all(np.isfinite(uv), axis=1)
    uv = np.where(front[:, None], uv, 1e12)
    dist = torch.cdist(torch.from_numpy(np.asarray(keypoints, float)),
                       torch.from_numpy(uv))
    return (dist <= radius_px).numpy() & front[None, :]
