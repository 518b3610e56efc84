"""Each camera's calibration (from ``camera_info`` or a YAML rig), checked, and its images made
usable for the pipeline: converted to RGB, checked against the calibration's size and
rectified to the calibration's pinhole (:mod:`g2g_model.cameras.lens`).

The rules the nodes follow:

* A ``camera_info`` is checked (:func:`g2g_ros.calibration.camera_info_to_lens`): an unusable K
  (zero, NaN/Inf, non-positive focal lengths, a principal point outside the image), a zero
  size, an unsupported distortion model or a ``D`` of the wrong length is refused and reported
  (problem ``camera_info <cam>``: the camera and why). The camera keeps its last valid
  calibration, and the report says so: a robot keeps working on the calibration it had rather
  than stop on one bad message, and nothing is kept silently. A camera without any valid
  calibration has its images dropped (reported per image).
* A ``camera_info`` equal to the current one (the usual stream, one per image) costs one
  comparison; a changed one builds the rectification maps of its camera once.
* An image whose size differs from its calibration's is refused with both sizes named. K is not
  scaled to fit: a ``camera_info`` describes the image as published (image_proc's resize
  publishes a matching one), and a guessed scale would hide a mismatched pair of topics.
* With a YAML calibration (``extrinsics_source: yaml``) the file's cameras are fixed: their
  ``camera_info`` is not used.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from g2g_model.cameras.lens import DEFAULT_FISHEYE_HFOV_DEG, Lens, Rectifier
from g2g_ros.calibration import camera_info_to_lens
from g2g_ros.image_conversion import to_rgb

NO_CALIBRATION = "no valid camera_info received yet"


class CameraCalibrations:
    """The current :class:`~g2g_model.cameras.lens.Rectifier` of every camera (module
    docstring).

    Args:
        fisheye_hfov_deg: horizontal field of view a rectified fisheye keeps.
        report: ``report(key, why)``: the node's problem report (``report_input``).
        clear: ``clear(key)``: forget a problem once the camera_info is valid again.
        log: ``log(line)``: one line per new calibration of a distorted camera.
    """

    def __init__(self, fisheye_hfov_deg: float = DEFAULT_FISHEYE_HFOV_DEG,
                 report: Callable[[str, str], None] = lambda key, why: None,
                 clear: Callable[[str], None] = lambda key: None,
                 log: Callable[[str], None] = lambda line: None):
        self.fisheye_hfov_deg = float(fisheye_hfov_deg)
        self._report, self._clear, self._log = report, clear, log
        self._lock = threading.Lock()
        self._current: Dict[str, Rectifier] = {}
        self._fixed: set = set()
        self.refused: Dict[str, int] = {}

    def set_lens(self, cam: str, lens: Lens, fixed: bool = False) -> Rectifier:
        """Use ``lens`` for ``cam`` (maps built only when it differs from the current one);
        ``fixed``: later ``camera_info`` of the camera is not used (a YAML calibration)."""
        with self._lock:
            current = self._current.get(cam)
        if current is None or not lens.same_as(current.lens):
            current = Rectifier(lens, self.fisheye_hfov_deg)
            if not lens.is_pinhole:
                K = current.K
                self._log(f"camera {cam}: {_summary(lens)} rectified to the pinhole "
                          f"fx={K[0, 0]:.2f} fy={K[1, 1]:.2f} cx={K[0, 2]:.2f} "
                          f"cy={K[1, 2]:.2f}")
        with self._lock:
            self._current[cam] = current
            if fixed:
                self._fixed.add(cam)
        return current

    def on_camera_info(self, cam: str, msg: Any) -> None:
        """A ``camera_info`` of ``cam`` arrived: use it, or refuse and report it."""
        if cam in self._fixed:
            return
        try:
            self.set_lens(cam, camera_info_to_lens(msg, f"camera_info of {cam}"))
        except ValueError as exc:
            with self._lock:
                self.refused[cam] = self.refused.get(cam, 0) + 1
                kept = self._current.get(cam)
            what = ("keeping its last valid calibration " + _summary(kept.lens) if kept
                    else "no valid calibration yet: its images are dropped")
            self._report(f"camera_info {cam}", f"refused: {exc}; {what}")
            return
        self._clear(f"camera_info {cam}")

    def get(self, cam: str) -> Optional[Rectifier]:
        """The camera's current rectifier, or None before a valid calibration."""
        with self._lock:
            return self._current.get(cam)

    def intrinsics(self, cam: str) -> Optional[Tuple[np.ndarray, Tuple[int, int]]]:
        """``(K, (width, height))`` of the camera's rectified images, or None."""
        rect = self.get(cam)
        return None if rect is None else (rect.K, rect.lens.size)

    def image(self, cam: str, msg: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``(rgb [H, W, 3] rectified, K)`` of an image message of ``cam``.

        Raises:
            ValueError: no valid calibration yet, an image that cannot be converted, or one
                whose size is not the calibration's (both sizes named).
        """
        rect = self.get(cam)
        if rect is None:
            raise ValueError(NO_CALIBRATION)
        rgb = to_rgb(msg)
        if rgb.shape[:2] != (rect.lens.height, rect.lens.width):
            raise ValueError(f"image is {rgb.shape[1]}x{rgb.shape[0]} but its camera_info says "
                             f"{rect.lens.width}x{rect.lens.height}: refused")
        return rect(rgb), rect.K


def _summary(lens: Lens) -> str:
    return (f"({lens.width}x{lens.height}, fx={lens.K[0, 0]:.2f} fy={lens.K[1, 1]:.2f} "
            f"cx={lens.K[0, 2]:.2f} cy={lens.K[1, 2]:.2f}, {lens.describe()})")


def node_calibrations(node: Any, rig: Optional[Any] = None) -> CameraCalibrations:
    """The calibrations of a G2G node (its ``fisheye_hfov_deg`` parameter, its problem report):
    the cameras of a YAML ``rig`` are fixed pinholes, the others follow their camera_info."""
    calibrations = CameraCalibrations(node.p["fisheye_hfov_deg"], node.report_input,
                                      node.problems.clear, node.get_logger().info)
    for cam in rig.cameras if rig is not None else ():
        calibrations.set_lens(cam.name, Lens.pinhole(cam.K, cam.width, cam.height,
                                                     f"camera {cam.name}"), fixed=True)
    return calibrations
