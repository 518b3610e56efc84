"""Local features for geometric verification: detection, caching and matching.

RootSIFT (OpenCV SIFT, L1-normalised, square-rooted; ``feature`` "sift", the default) or ALIKED
(``feature`` "aliked", :mod:`~g2g_model.localization.aliked_keypoints`: more matches on plain
surfaces but less accurate poses, about ten times the cost), both compared with the L2 norm;
matches are mutual nearest neighbours that pass Lowe's ratio test. An image whose long side exceeds
``max_image_px`` is described at that size (area-averaged; an image wider than 16:9 keeps the
short side of a 16:9 image of that long side,
:func:`~g2g_model.cameras.reduction.description_scale`) and its keypoints are returned in the
original image's pixels, so intrinsics and thresholds stay those of the camera. Descriptions are
cached per image (keyed by its bytes, :mod:`~g2g_model.localization.image_keys`; bounded in
entries and in bytes, :mod:`~g2g_model.localization.bounded_cache`), so a map frame or a query
frame that takes part in several verifications is described once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import cv2
import numpy as np
import torch

from g2g_model.cameras.reduction import description_scale
from g2g_model.localization.bounded_cache import BoundedCache
from g2g_model.localization.image_keys import image_keys

FEATURES = ("sift", "aliked")
# Half of OpenCV's default: the simulator's and many indoor images are low in contrast, and
# this doubles to triples the inliers at a modest cost (measured in docs/VERIFICATION.md).
CONTRAST_THRESHOLD = 0.02
# Squared descriptor distance of a candidate pair that ``match`` may not take (RootSIFT's are
# at most 2).
NOT_ALLOWED = 1e6
# Smallest long side images may be described at (max_image_px); 0 = full size.
MIN_IMAGE_PX = 64


@dataclass
class Features:
    keypoints: np.ndarray    # [N, 2] float64 pixels
    descriptors: np.ndarray  # [N, D] float32


class LocalFeatures:
    """``describe(image) -> Features`` (cached: at most ``cache_size`` images and
    ``cache_bytes`` of keypoints and descriptors) and ``match(desc_a, desc_b) -> [M, 2]``.
    ``max_image_px``: images with a longer side are described downscaled to it
    (:func:`~g2g_model.cameras.reduction.description_scale`; 0: never)."""

    def __init__(self, feature: str = "sift", max_features: int = 2000, ratio: float = 0.8,
                 cache_size: int = 160, contrast_threshold: float = CONTRAST_THRESHOLD,
                 cache_bytes: int = 64 << 20, max_image_px: int = 0):
        if feature not in FEATURES:
            raise ValueError(f"verify_feature must be one of {FEATURES}, got {feature!r}")
        if max_image_px and max_image_px < MIN_IMAGE_PX:
            raise ValueError(f"max_image_px must be 0 (full size) or >= {MIN_IMAGE_PX}, got "
                             f"{max_image_px}")
        self.ratio = ratio
        self.max_image_px = int(max_image_px)
        self.cache_size = cache_size
        self.feature = feature
        if feature == "aliked":
            from g2g_model.localization.aliked_keypoints import AlikedKeypoints

            self._aliked = AlikedKeypoints(max_features)
        else:
            self._sift = cv2.SIFT_create(nfeatures=max_features,
                                         contrastThreshold=contrast_threshold)
        self.cache = BoundedCache(cache_bytes, cache_size)

    @staticmethod
    def image_key(image: np.ndarray) -> bytes:
        """The cache key of ``image``'s content (:mod:`~g2g_model.localization.image_keys`)."""
        return image_keys(image)

    def __len__(self) -> int:
        return len(self.cache)

    def describe(self, image: np.ndarray) -> Features:
        key = self.image_key(image)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        aliked = self.feature == "aliked"
        pixels = image if aliked or image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        height, width = pixels.shape[:2]
        f = description_scale(width, height, self.max_image_px)
        if f < 1.0:
            pixels = cv2.resize(pixels, (max(1, round(width * f)), max(1, round(height * f))),
                                interpolation=cv2.INTER_AREA)
        if aliked:
            pts, desc = self._aliked(pixels)
        else:
            pts, desc = self._rootsift(pixels)
        if len(pts) and pixels.shape[:2] != (height, width):
            # the small image's pixel centres -> the original's
            pts = (pts + 0.5) * [width / pixels.shape[1], height / pixels.shape[0]] - 0.5
        return self.cache.put(key, Features(pts, desc))

    def _rootsift(self, gray: np.ndarray):
        kps, desc = self._sift.detectAndCompute(gray, None)
        if desc is None or not kps:
            return np.zeros((0, 2)), np.zeros((0, 128), np.float32)
        desc = desc / np.maximum(desc.sum(1, keepdims=True), 1e-9)
        return np.array([k.pt for k in kps], float), np.sqrt(desc).astype(np.float32)

    def match(self, desc_a: np.ndarray, desc_b: np.ndarray, with_ratio: bool = False,
              allowed: Optional[np.ndarray] = None):
        """``[M, 2]`` index pairs (a, b): mutual nearest neighbours (L2) passing the ratio test
        (with ``with_ratio``: also ``[M]`` their distance ratios, lower is more distinctive).
        ``allowed``: optional ``[Na, Nb]`` bool, the only candidate pairs (e.g. those that
        agree with a known epipolar geometry: guided matching, where a repeated texture no
        longer fails the ratio test against its copies elsewhere in the image).

        Brute force as one matrix product (torch, multi-threaded): ~10x faster than OpenCV's
        brute-force matcher for 2,000 x 2,000 descriptors, same neighbours. With ``allowed``,
        only the rows and columns that have a candidate enter the product: a keypoint without
        any allowed partner can neither match nor be any keypoint's nearest or second-nearest
        allowed neighbour, so the result is that of the whole matrix (guided matching of two
        cameras that barely overlap keeps a few per cent of the rows)."""
        empty = np.zeros((0, 2), int)
        if len(desc_a) < 2 or len(desc_b) < 2:
            return (empty, np.zeros(0)) if with_ratio else empty
        if allowed is None:
            return self._nearest(desc_a, desc_b, None, with_ratio)
        allowed = np.asarray(allowed, bool)
        rows, cols = _with_two(allowed.any(1)), _with_two(allowed.any(0))
        if rows is None:
            return (empty, np.zeros(0)) if with_ratio else empty
        out = self._nearest(desc_a[rows], desc_b[cols], allowed[np.ix_(rows, cols)], with_ratio)
        pairs = out[0] if with_ratio else out
        pairs = np.stack([rows[pairs[:, 0]], cols[pairs[:, 1]]], 1).reshape(-1, 2)
        return (pairs, out[1]) if with_ratio else pairs

    def match_each(self, descs_a: Sequence[np.ndarray], desc_b: np.ndarray) -> List[np.ndarray]:
        """``[match(desc_a, desc_b) for desc_a in descs_a]`` with one matrix product for all
        (several frames' points looked for in one image); the same pairs."""
        sizes = [len(d) for d in descs_a]
        out = [np.zeros((0, 2), int) for _ in descs_a]
        used = [k for k, n in enumerate(sizes) if n >= 2]
        if len(desc_b) < 2 or not used:
            return out
        d2 = self._distances(np.concatenate([descs_a[k] for k in used]), desc_b)
        best, nearest = torch.topk(d2, 2, dim=1, largest=False)
        start = 0
        for k in used:
            block = slice(start, start + sizes[k])
            start += sizes[k]
            out[k] = self._keep(d2[block], best[block], nearest[block], False)
        return out

    @staticmethod
    def _distances(desc_a: np.ndarray, desc_b: np.ndarray) -> torch.Tensor:
        """``[Na, Nb]`` squared L2 distances (one matrix product)."""
        a = torch.from_numpy(np.ascontiguousarray(desc_a, np.float32))
        b = torch.from_numpy(np.ascontiguousarray(desc_b, np.float32))
        return torch.addmm((a * a).sum(1, keepdim=True) + (b * b).sum(1), a, b.T,
                           beta=1.0, alpha=-2.0).clamp_(min=0.0)

    def _nearest(self, desc_a: np.ndarray, desc_b: np.ndarray, allowed: Optional[np.ndarray],
                 with_ratio: bool):
        """:meth:`match` on whole descriptor sets (at least two each)."""
        d2 = self._distances(desc_a, desc_b)
        if allowed is not None:
            d2.masked_fill_(~torch.from_numpy(allowed), NOT_ALLOWED)
        best, nearest = torch.topk(d2, 2, dim=1, largest=False)
        return self._keep(d2, best, nearest, with_ratio)

    def _keep(self, d2: torch.Tensor, best: torch.Tensor, nearest: torch.Tensor,
              with_ratio: bool):
        """The mutual nearest neighbours of ``d2`` (rows a, columns b) passing the ratio test,
        from each row's two nearest (``best`` distances, ``nearest`` columns)."""
        mutual = d2.argmin(0)[nearest[:, 0]] == torch.arange(len(d2))
        dist = best.sqrt().numpy()
        ratio = dist[:, 0] / np.maximum(dist[:, 1], 1e-9)
        keep = np.flatnonzero((dist[:, 0] < self.ratio * dist[:, 1]) & mutual.numpy()
                              & (best[:, 0].numpy() < NOT_ALLOWED))
        pairs = np.stack([keep, nearest[:, 0].numpy()[keep]], 1).astype(int).reshape(-1, 2)
        return (pairs, ratio[keep].astype(float)) if with_ratio else pairs


def _with_two(used: np.ndarray) -> Optional[np.ndarray]:
    """Indices of the ``used`` entries, topped up to two with unused ones (a keypoint without
    allowed partners changes nothing: its distances are all NOT_ALLOWED); None if none is
    used."""
    idx = np.flatnonzero(used)
    if not len(idx):
        return None
    if len(idx) < 2:
        idx = np.sort(np.concatenate([idx, np.flatnonzero(~used)[:2 - len(idx)]]))
    return idx


def per_frame_intrinsics(intrinsics, n: int) -> np.ndarray:
    k = np.asarray(intrinsics, float)
    return np.broadcast_to(k, (n, 3, 3)) if k.ndim == 2 else k
