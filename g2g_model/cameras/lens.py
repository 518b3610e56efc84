"""Lens models of a camera calibration and their rectification to a pinhole camera.

Everything after the camera inputs (G2G, the verifiers, the maps) assumes pinhole cameras. A
calibration with lens distortion (``distortion_model`` and ``D`` of ``sensor_msgs/CameraInfo``)
is therefore rectified: OpenCV builds one pixel map per calibration, every image is remapped
with it, and the rest of the pipeline uses the map's new pinhole ``K``.

Models (the names of ROS's ``sensor_msgs/distortion_models``):

* ``plumb_bob``: radial-tangential, ``D = (k1, k2, t1, t2, k3)``;
* ``rational_polynomial``: ``D = (k1, k2, t1, t2, k3, k4, k5, k6)``;
* ``equidistant``: the fisheye model of ``cv2.fisheye`` (Kannala-Brandt), ``D = (k1, k2, k3,
  k4)``;
* ``""`` (no model named) with an empty or all-zero ``D``: an ideal pinhole.

Any other model, or a ``D`` of another length, is refused with a message naming it. An empty
``D`` of ``plumb_bob`` / ``rational_polynomial`` means no distortion (what many simulators
publish).

The rectified camera keeps the image size:

* ``plumb_bob`` / ``rational_polynomial``: the new K is ``cv2.getOptimalNewCameraMatrix`` with
  alpha 0, the widest view whose every pixel comes from the image (a black border would give
  features on its edge that belong to no surface). An all-zero ``D`` is a pinhole already: K is
  kept and no image is remapped (no cost).
* ``equidistant``: a fisheye sees more than a pinhole image can hold, so the pinhole keeps a
  chosen horizontal field of view (``fisheye_hfov_deg``, default 100 deg), square pixels and the
  principal point at the image centre; what the fisheye does not see stays black. A fisheye is
  never a pinhole (with zero coefficients its model is r = f theta, not r = f tan theta), so it
  is always remapped.

The rotation ``R`` and projection ``P`` of a stereo ``camera_info`` are not applied: a
rectified image stays in its camera's own optical frame, whose TF extrinsics stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import cv2
import numpy as np

from g2g_model.data.rig import check_intrinsics, pinhole_K

#: distortion model -> number of coefficients in ``D``.
MODEL_COEFFICIENTS = {"plumb_bob": 5, "rational_polynomial": 8, "equidistant": 4}
#: ``distortion_model`` of a camera_info that names none (a pinhole, ``D`` empty or zero).
NO_MODEL = ""
SUPPORTED_MODELS = (NO_MODEL,) + tuple(MODEL_COEFFICIENTS)
FISHEYE = "equidistant"
DEFAULT_FISHEYE_HFOV_DEG = 100.0
#: Horizontal field of view a rectified fisheye may keep (a pinhole reaches 180 only at infinity).
FISHEYE_HFOV_RANGE_DEG = (10.0, 170.0)


class UnsupportedLens(ValueError):
    """A distortion model (or ``D``) that cannot be rectified; the message names it."""


def check_principal_point(K: np.ndarray, width: int, height: int, what: str) -> None:
    """Raise ``ValueError`` unless the principal point lies in the image (borders included).

    An optical axis outside the image is no real camera's; it is what a K written for another
    image size looks like (e.g. a K of the full sensor with a binned image)."""
    cx, cy = float(K[0, 2]), float(K[1, 2])
    if not (0.0 <= cx <= width and 0.0 <= cy <= height):
        raise ValueError(f"{what}: principal point ({cx:g}, {cy:g}) lies outside the "
                         f"{width}x{height} image (a K for another image size?)")


@dataclass(eq=False)
class Lens:
    """One camera's calibration: ``model`` (see the module docstring), ``K [3, 3]``, ``D``
    and the image size. Validated at construction; errors name ``what`` (e.g. the camera)."""

    model: str
    K: np.ndarray
    D: np.ndarray
    width: int
    height: int
    what: str = field(default="camera", repr=False)

    def __post_init__(self) -> None:
        self.model = str(self.model)
        self.K = np.asarray(self.K, dtype=np.float64).reshape(3, 3)
        self.D = np.asarray(self.D, dtype=np.float64).reshape(-1)
        self.width, self.height = int(self.width), int(self.height)
        what = self.what
        check_intrinsics(self.K, self.width, self.height, what)
        check_principal_point(self.K, self.width, self.height, what)
        if self.model not in SUPPORTED_MODELS:
            raise UnsupportedLens(
                f"{what}: distortion model {self.model!r} is not supported (supported: "
                f"{', '.join(repr(m) for m in SUPPORTED_MODELS)}; rectify the images upstream, "
                f"e.g. with image_proc, and publish a pinhole camera_info)")
        if not np.all(np.isfinite(self.D)):
            raise ValueError(f"{what}: distortion coefficients must be finite, got "
                             f"{self.D.tolist()}")
        if self.model == NO_MODEL:
            if np.any(self.D):
                raise UnsupportedLens(f"{what}: distortion coefficients {self.D.tolist()} "
                                      f"without a distortion model")
            return
        expected = MODEL_COEFFICIENTS[self.model]
        if self.D.size == 0 and self.model != FISHEYE:
            self.D = np.zeros(expected)
        if self.D.size != expected:
            raise UnsupportedLens(f"{what}: distortion model {self.model!r} takes {expected} "
                                  f"coefficients, got {self.D.size}: {self.D.tolist()}")

    @classmethod
    def pinhole(cls, K: np.ndarray, width: int, height: int, what: str = "camera") -> "Lens":
        """An ideal pinhole camera."""
        return cls(NO_MODEL, K, np.zeros(0), width, height, what)

    @property
    def size(self) -> Tuple[int, int]:
        """``(width, height)``."""
        return self.width, self.height

    @property
    def is_pinhole(self) -> bool:
        """No distortion: images are used as they come."""
        return self.model != FISHEYE and not np.any(self.D)

    def same_as(self, other: Optional["Lens"]) -> bool:
        """Whether ``other`` is the same calibration (then its rectifier can be kept)."""
        return (other is not None and other.model == self.model and other.size == self.size
                and np.array_equal(other.K, self.K) and np.array_equal(other.D, self.D))

    def describe(self) -> str:
        """A short description for logs: the model and its coefficients."""
        if self.is_pinhole:
            return "pinhole (no distortion)"
        return f"{self.model} D={np.round(self.D, 6).tolist()}"


class Rectifier:
    """``rectifier(image) -> image`` of ``lens`` as the pinhole ``K`` (same size); the pixel
    maps are built once, here (``cv2.initUndistortRectifyMap`` or its ``cv2.fisheye`` twin).

    Args:
        lens: the calibration.
        fisheye_hfov_deg: horizontal field of view the pinhole of an ``equidistant`` lens
            keeps (ignored for the other models).
    """

    def __init__(self, lens: Lens, fisheye_hfov_deg: float = DEFAULT_FISHEYE_HFOV_DEG):
        low, high = FISHEYE_HFOV_RANGE_DEG
        if not low <= float(fisheye_hfov_deg) <= high:
            raise ValueError(f"fisheye_hfov_deg must be in [{low:g}, {high:g}], got "
                             f"{fisheye_hfov_deg}")
        self.lens = lens
        self.maps: Optional[Tuple[np.ndarray, np.ndarray]] = None
        size = lens.size
        if lens.is_pinhole:
            self.K = lens.K.copy()
        elif lens.model == FISHEYE:
            self.K = pinhole_K(lens.width, lens.height, float(fisheye_hfov_deg))
            self.maps = cv2.fisheye.initUndistortRectifyMap(
                lens.K, lens.D, np.eye(3), self.K, size, cv2.CV_16SC2)
        else:
            self.K, _ = cv2.getOptimalNewCameraMatrix(lens.K, lens.D, size, 0.0, size)
            self.maps = cv2.initUndistortRectifyMap(lens.K, lens.D, None, self.K, size,
                                                    cv2.CV_16SC2)
        check_intrinsics(self.K, lens.width, lens.height, f"{lens.what} (rectified)")

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """The rectified ``image`` (``[H, W(, C)]`` of the lens's size; returned as it is for
        a pinhole)."""
        if image.shape[:2] != (self.lens.height, self.lens.width):
            raise ValueError(f"{self.lens.what}: image is {image.shape[1]}x{image.shape[0]} but "
                             f"its calibration says {self.lens.width}x{self.lens.height}")
        if self.maps is None:
            return image
        return cv2.remap(image, self.maps[0], self.maps[1], cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_CONSTANT)
