"""The reduced copy of a camera image that everything after the camera inputs works on.

A robot's cameras give 1-6 MP images, but no consumer needs that many pixels: G2G takes its
backbone's input size (e.g. 112 x 112), the rotation matcher works from that, and the verifiers
describe images at ``verify_max_image_px`` on the long side (:func:`description_scale`). Each
image is therefore reduced ONCE, as it is converted, to the smallest size that still serves
every consumer (:class:`ImageNeeds`), and its K is scaled with it.

How the copy is made:

* a JPEG (``CompressedImage``) is decoded at a reduced size: libjpeg scales in the DCT domain,
  by 1/2, 1/4 or 1/8 (OpenCV's ``IMREAD_REDUCED_COLOR_*``), much cheaper than a full decode and
  a resize (:func:`jpeg_factor` picks the largest factor that keeps the needed size, and only
  factors that divide the image size, so the reduced image covers the same field as the full
  one);
* the rest (raw images, PNG, the remainder of a JPEG reduction) is area-averaged
  (``cv2.INTER_AREA``, :func:`~g2g_model.estimation.groups.resize_with_intrinsics`).

Both keep the pixel-centre convention of
:func:`~g2g_model.estimation.groups.scale_intrinsics`: a reduced pixel averages a block of full
pixels and sits at its centre, ``x' + 0.5 = s (x + 0.5)``
(measured for both paths by ``test/test_reduction.py``: scaling K alone, ``x' = s x``, puts a
point 0.25-0.44 reduced pixels off at 1/2-1/8).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from g2g_model.estimation.groups import resize_with_intrinsics, scale_intrinsics

#: Reductions libjpeg applies while decoding (OpenCV's IMREAD_REDUCED_COLOR_2/4/8).
JPEG_FACTORS = (8, 4, 2)
#: The widest aspect (long side / short side) whose images are described at ``max_image_px``
#: on the long side; a wider image keeps the short side of a 16:9 image of that long side.
DESCRIBED_ASPECT = 16 / 9


def description_scale(width: int, height: int, max_image_px: int) -> float:
    """The factor (<= 1) an image is described at for a verifier's ``max_image_px`` (0: full
    size): its long side at most ``max_image_px``, except that an image wider than 16:9 keeps
    the short side of a 16:9 image of that long side (``9/16 max_image_px``).

    Feature accuracy on a wide image follows its short side, not its long side or its pixel
    count: a 1241 x 376 car camera (3.3:1) at a long side of 320 px would be described at
    320 x 97, and on real stereo car steps (benchmarks/RESULTS_real_rig_steps.md) 7 of 50
    verified steps were then off by more than 10 % of their length; at 594 x 180 none is, and
    the steps' translation error is lower than with the same pixel count as 320 x 180
    (436 x 132). At 480, KITTI's relocalization pairs described at 895 x 270 are verified
    within 10 % of full size, where 655 x 198 was 1.2 x less accurate
    (benchmarks/RESULTS_fullsize.md). Images up to 16:9 (square, 4:3, 16:10, 16:9) keep
    ``max_image_px`` on the long side, so their reduced JPEG decode keeps its factor."""
    if not max_image_px:
        return 1.0
    long_side, short_side = max(width, height), min(width, height)
    by_side = max_image_px / long_side
    by_short_side = max_image_px / DESCRIBED_ASPECT / short_side
    return min(1.0, max(by_side, by_short_side))


@dataclass(frozen=True)
class ImageNeeds:
    """What the consumers of a node's images need.

    Attributes:
        min_hw: (H, W) the model's input; the copy keeps at least this many pixels in each
            direction (G2G resizes every image to it, whatever its aspect).
        max_image_px: the verifier describes images at this long side
            (:func:`description_scale`); 0: at full size (no reduction then); None: no
            verifier (the model alone decides).
    """

    min_hw: Tuple[int, int]
    max_image_px: Optional[int] = None

    def scale(self, width: int, height: int) -> float:
        """The factor (<= 1) the images of a ``width`` x ``height`` camera are reduced by."""
        if self.max_image_px == 0:
            return 1.0
        model = max(self.min_hw[0] / height, self.min_hw[1] / width)
        verifier = description_scale(width, height, self.max_image_px) \
            if self.max_image_px else 0.0
        return min(1.0, max(model, verifier))

    def size(self, width: int, height: int) -> Tuple[int, int]:
        """``(width, height)`` of the reduced copy (the full size when nothing is gained)."""
        s = self.scale(width, height)
        if s >= 1.0:
            return width, height
        return max(1, round(width * s)), max(1, round(height * s))


def jpeg_factor(full_wh: Tuple[int, int], reduced_wh: Tuple[int, int]) -> int:
    """The largest libjpeg reduction (1, 2, 4 or 8) that keeps ``reduced_wh`` and divides the
    image size exactly (a partial last block would shift the image's scale)."""
    (w, h), (rw, rh) = full_wh, reduced_wh
    for f in JPEG_FACTORS:
        if w % f == 0 and h % f == 0 and w // f >= rw and h // f >= rh:
            return f
    return 1


def reduce_image(image: np.ndarray, K: np.ndarray, reduced_wh: Tuple[int, int],
                 factor: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """``(image at reduced_wh, its K)``: ``image`` was decoded at 1/``factor`` of the size
    ``K`` describes (``factor`` 1: a full-size image), the rest is area-averaged."""
    if factor != 1:
        K = scale_intrinsics(np.asarray(K, float), 1.0 / factor, 1.0 / factor)
    return resize_with_intrinsics(image, np.asarray(K, float), (reduced_wh[1], reduced_wh[0]))


def reduced_intrinsics(K: np.ndarray, full_wh: Tuple[int, int],
                       reduced_wh: Tuple[int, int]) -> np.ndarray:
    """K of the reduced copy (the same whichever way it was made)."""
    return scale_intrinsics(np.asarray(K, float), reduced_wh[0] / full_wh[0],
                            reduced_wh[1] / full_wh[1])
