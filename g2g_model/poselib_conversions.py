"""The small conversions every PoseLib call needs: pinhole cameras and poses, both ways.

Shared by geometric verification (:mod:`g2g_model.localization`) and the two-view geometry of
matched rays (:mod:`g2g_model.estimation.match_geometry`).
"""

from __future__ import annotations

import numpy as np


def pinhole_camera(K: np.ndarray, image) -> dict:
    """PoseLib camera description of a pinhole camera and its image (or the image's (h, w))."""
    h, w = image if isinstance(image, tuple) else image.shape[:2]
    return {"model": "PINHOLE", "width": int(w), "height": int(h),
            "params": [float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2])]}


def camera_pose(T: np.ndarray):
    """PoseLib ``CameraPose`` of a 4x4 transform (PoseLib's poses map world to camera)."""
    import poselib

    pose = poselib.CameraPose()
    pose.R, pose.t = T[:3, :3], T[:3, 3]
    return pose


def pose_matrix(pose) -> np.ndarray:
    """The 4x4 transform of a PoseLib ``CameraPose`` (the reverse of :func:`camera_pose`)."""
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = pose.R, pose.t
    return T
