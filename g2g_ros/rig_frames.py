"""The usable images of one synchronized rig group (rig_odometry): each camera's image
converted to RGB and checked against its camera_info; a camera whose image is missing, has no
valid camera_info yet, cannot be converted or has another size is left out and reported."""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from g2g_ros.image_conversion import to_rgb


def usable_images(group, cameras: Sequence[str], intrinsics: Callable[[str], Optional[tuple]],
                  report: Callable[[str, str], None], clear: Callable[[str], None]
                  ) -> Tuple[List[str], List[np.ndarray], List[np.ndarray]]:
    """``(cameras, rgb images, K)`` of the group's usable cameras, in rig order.
    ``intrinsics(cam)``: ``(K, (width, height))`` or None; ``report(key, why)`` /
    ``clear(key)``: the node's problem log, keyed ``camera <name>``."""
    cams, images, ks = [], [], []
    for cam in cameras:
        key = f"camera {cam}"
        msg = group.messages.get(cam)
        if msg is None:
            report(key, "missing from the synchronized group")
            continue
        intr = intrinsics(cam)
        if intr is None:
            report(key, "no valid camera_info received yet")
            continue
        try:
            rgb = to_rgb(msg)
        except ValueError as exc:
            report(key, f"image rejected: {exc}")
            continue
        k, (width, height) = intr
        if rgb.shape[:2] != (height, width):
            report(key, f"image is {rgb.shape[1]}x{rgb.shape[0]} but camera_info says "
                   f"{width}x{height}")
            continue
        clear(key)
        cams.append(cam)
        images.append(rgb)
        ks.append(k)
    return cams, images, ks
