"""Each camera's calibration (from ``camera_info`` or a YAML rig), checked, and its images made
usable for the pipeline: converted to RGB, checked against the calibration's size, reduced to
the size the node's consumers need (:mod:`g2g_model.cameras.reduction`: a JPEG decoded at a
reduced size, the rest area-averaged) and rectified to the calibration's pinhole
(:mod:`g2g_model.cameras.lens`; the maps are built for the reduced image, which is cheaper to
remap).

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
* The K the rest of the pipeline gets (:meth:`CameraCalibrations.image`,
  :meth:`CameraCalibrations.intrinsics`) is that of the reduced, rectified image.
* An image whose size differs from its calibration's is refused with both sizes named. K is not
  scaled to fit: a ``camera_info`` describes the image as published (image_proc's resize
  publishes a matching one), and a guessed scale would hide a mismatched pair of topics.
* With a YAML calibration (``extrinsics_source: yaml``) the file's cameras are fixed (their
  ``camera_info`` is not used), with the lens the file gives (``distortion_model``,
  ``distortion_coefficients``; none: a pinhole), rectified the same way.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from g2g_model.cameras.lens import DEFAULT_FISHEYE_HFOV_DEG, Lens, Rectifier
from g2g_model.cameras.reduction import (ImageNeeds, jpeg_factor, reduce_image,
                                         reduced_intrinsics)
from g2g_ros.calibration import camera_info_to_lens
from g2g_ros.image_conversion import compressed_size, compressed_to_rgb, reducible, to_rgb

NO_CALIBRATION = "no valid camera_info received yet"


@dataclass
class CameraImaging:
    """How one camera's images become the pipeline's: its calibration ``lens`` (at the
    published size), the ``rectifier`` of the reduced copy (its ``lens`` has the reduced size,
    its ``K`` is the one the pipeline uses) and the JPEG reduction at decode."""

    lens: Lens
    rectifier: Rectifier
    jpeg_factor: int = 1

    @classmethod
    def of(cls, lens: Lens, fisheye_hfov_deg: float,
           needs: Optional[ImageNeeds]) -> "CameraImaging":
        size = needs.size(*lens.size) if needs is not None else lens.size
        reduced = lens if size == lens.size else Lens(
            lens.model, reduced_intrinsics(lens.K, lens.size, size), lens.D, *size, lens.what)
        return cls(lens, Rectifier(reduced, fisheye_hfov_deg), jpeg_factor(lens.size, size))

    @property
    def K(self) -> np.ndarray:
        """K of the images the pipeline gets (reduced, rectified)."""
        return self.rectifier.K

    @property
    def size(self) -> Tuple[int, int]:
        """``(width, height)`` of the images the pipeline gets."""
        return self.rectifier.lens.size

    def image(self, msg: Any) -> np.ndarray:
        """The pipeline's image of a message (module docstring; ``ValueError`` for one that
        cannot be converted or has another size than the calibration)."""
        factor = self.jpeg_factor if reducible(msg) else 1
        if factor > 1:  # checked against the calibration before decoding at 1/factor
            self._check_size(compressed_size(msg))
            rgb = compressed_to_rgb(msg, reduction=factor)
        else:
            rgb = to_rgb(msg)
            self._check_size(rgb.shape[1::-1])
        small, _ = reduce_image(rgb, self.lens.K, self.size, factor)
        return self.rectifier(small)

    def _check_size(self, size: Tuple[int, int]) -> None:
        if tuple(size) != self.lens.size:
            raise ValueError(f"image is {size[0]}x{size[1]} but its camera_info says "
                             f"{self.lens.width}x{self.lens.height}: refused")


class CameraCalibrations:
    """The current :class:`CameraImaging` of every camera (module docstring).

    Args:
        fisheye_hfov_deg: horizontal field of view a rectified fisheye keeps.
        report: ``report(key, why)``: the node's problem report (``report_input``).
        clear: ``clear(key)``: forget a problem once the camera_info is valid again.
        log: ``log(line)``: one line per new calibration of a distorted or reduced camera.
        needs: what the node's consumers need (the reduced copy's size); None: full size.
    """

    def __init__(self, fisheye_hfov_deg: float = DEFAULT_FISHEYE_HFOV_DEG,
                 report: Callable[[str, str], None] = lambda key, why: None,
                 clear: Callable[[str], None] = lambda key: None,
                 log: Callable[[str], None] = lambda line: None,
                 needs: Optional[ImageNeeds] = None):
        self.fisheye_hfov_deg = float(fisheye_hfov_deg)
        self.needs = needs
        self._report, self._clear, self._log = report, clear, log
        self._lock = threading.Lock()
        self._current: Dict[str, CameraImaging] = {}
        self._fixed: set = set()
        self.refused: Dict[str, int] = {}

    def set_lens(self, cam: str, lens: Lens, fixed: bool = False) -> CameraImaging:
        """Use ``lens`` for ``cam`` (maps built only when it differs from the current one);
        ``fixed``: later ``camera_info`` of the camera is not used (a YAML calibration)."""
        with self._lock:
            current = self._current.get(cam)
        if current is None or not lens.same_as(current.lens):
            current = CameraImaging.of(lens, self.fisheye_hfov_deg, self.needs)
            if not lens.is_pinhole or current.size != lens.size:
                K, (w, h) = current.K, current.size
                what = "rectified to the pinhole" if not lens.is_pinhole else "reduced to"
                self._log(f"camera {cam}: {_summary(lens)} {what} {w}x{h} "
                          f"fx={K[0, 0]:.2f} fy={K[1, 1]:.2f} cx={K[0, 2]:.2f} "
                          f"cy={K[1, 2]:.2f}" + (f" (JPEG decoded at 1/{current.jpeg_factor})"
                                                 if current.jpeg_factor > 1 else ""))
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

    def get(self, cam: str) -> Optional[CameraImaging]:
        """The camera's current calibration and reduction, or None before a valid one."""
        with self._lock:
            return self._current.get(cam)

    def intrinsics(self, cam: str) -> Optional[Tuple[np.ndarray, Tuple[int, int]]]:
        """``(K, (width, height))`` of the camera's reduced, rectified images, or None."""
        imaging = self.get(cam)
        return None if imaging is None else (imaging.K, imaging.size)

    def image(self, cam: str, msg: Any) -> Tuple[np.ndarray, np.ndarray]:
        """``(rgb [H, W, 3] reduced and rectified, K)`` of an image message of ``cam``.

        Raises:
            ValueError: no valid calibration yet, an image that cannot be converted, or one
                whose size is not the calibration's (both sizes named).
        """
        imaging = self.get(cam)
        if imaging is None:
            raise ValueError(NO_CALIBRATION)
        return imaging.image(msg), imaging.K


def _summary(lens: Lens) -> str:
    return (f"({lens.width}x{lens.height}, fx={lens.K[0, 0]:.2f} fy={lens.K[1, 1]:.2f} "
            f"cx={lens.K[0, 2]:.2f} cy={lens.K[1, 2]:.2f}, {lens.describe()})")


def image_needs(pipeline: Any, verify: Optional[Any] = None) -> ImageNeeds:
    """What a node's images must serve: the ``pipeline``'s input size and, when ``verify`` (a
    :class:`~g2g_model.localization.verification.VerifierConfig`) is enabled, its
    ``max_image_px``."""
    enabled = verify is not None and verify.enabled
    return ImageNeeds(tuple(pipeline.image_size),
                      int(verify.max_image_px) if enabled else None)


def node_calibrations(node: Any, rig: Optional[Any] = None,
                      needs: Optional[ImageNeeds] = None) -> CameraCalibrations:
    """The calibrations of a G2G node (its ``fisheye_hfov_deg`` parameter, its problem report,
    what its consumers ``need``): :func:`rig_calibrations`."""
    return rig_calibrations(rig, CameraCalibrations(
        node.p["fisheye_hfov_deg"], node.report_input, node.problems.clear,
        node.get_logger().info, needs))


def rig_calibrations(rig: Optional[Any], calibrations: CameraCalibrations
                     ) -> CameraCalibrations:
    """``calibrations`` with the cameras of a YAML ``rig`` fixed to the file's lenses (a
    distorted one rectified like a ``camera_info`` with its model); the other cameras follow
    their ``camera_info``."""
    for cam in rig.cameras if rig is not None else ():
        calibrations.set_lens(cam.name, cam.lens(), fixed=True)
    return calibrations
