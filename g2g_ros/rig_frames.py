"""The usable images of one synchronized rig group (rig_odometry): each camera's image
converted to RGB, checked against its calibration and rectified to its pinhole
(:class:`~g2g_ros.camera_calibrations.CameraCalibrations`); a camera whose image is missing, has
no valid camera_info yet, cannot be converted or has another size is left out and reported."""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

from g2g_ros.camera_calibrations import CameraCalibrations


def usable_images(group, cameras: Sequence[str], calibrations: CameraCalibrations,
                  report: Callable[[str, str], None], clear: Callable[[str], None]
                  ) -> Tuple[List[str], List[np.ndarray], List[np.ndarray]]:
    """``(cameras, rectified rgb images, their K)`` of the group's usable cameras, in rig
    order. ``report(key, why)`` / ``clear(key)``: the node's problem log, keyed
    ``camera <name>``."""
    cams, images, ks = [], [], []
    for cam in cameras:
        key = f"camera {cam}"
        msg = group.messages.get(cam)
        if msg is None:
            report(key, "missing from the synchronized group")
            continue
        try:
            rgb, k = calibrations.image(cam, msg)
        except ValueError as exc:
            report(key, f"image rejected: {exc}")
            continue
        clear(key)
        cams.append(cam)
        images.append(rgb)
        ks.append(k)
    return cams, images, ks
