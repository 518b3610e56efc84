"""ALIKED keypoints and descriptors for geometric verification (``verify_feature: aliked``).

RootSIFT finds few repeatable keypoints on plain surfaces; ALIKED (the frozen, shipped t16
network of :mod:`g2g_model.backbones.aliked`) was trained to match across viewpoint and
lighting and finds several times more matches that agree with the true geometry on a real scene
with little texture, at about ten times SIFT's cost per image; but the poses verified on them
were about twice as far off, with false fixes (docs/VERIFICATION.md, "Learned local features"):
RootSIFT stays the default.

Keypoints are the strongest local maxima of the score map (:meth:`ALIKED.detect`), each moved to
the soft-argmax of the scores in its window (sub-pixel, :func:`soft_argmax`), and described by
the network's SDDH head. Descriptors are unit vectors: :class:`LocalFeatures` matches them as
RootSIFT's (L2, mutual nearest neighbours, ratio test).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

#: The shipped variant (``g2g_model/assets/aliked_t16.safetensors``).
VARIANT = "t16"
#: Non-maximum suppression window (2 RADIUS + 1 pixels) and soft-argmax window.
RADIUS = 2
#: Temperature of the soft-argmax over a window's scores (scores are in (0, 1)).
TEMPERATURE = 0.1


def soft_argmax(scores: torch.Tensor, xy: torch.Tensor, radius: int = RADIUS,
                temperature: float = TEMPERATURE) -> torch.Tensor:
    """``xy`` ``[N, 2]`` integer pixels (x, y) of local maxima of ``scores`` ``[H, W]``, moved to
    the softmax-weighted mean position of the ``2 radius + 1`` window around each (float).
    Maxima come from :meth:`ALIKED.detect`, which keeps them ``radius`` from the border."""
    h, w = scores.shape
    d = torch.arange(-radius, radius + 1, device=xy.device)
    dy, dx = torch.meshgrid(d, d, indexing="ij")
    rows = (xy[:, 1, None] + dy.reshape(1, -1)).clamp(0, h - 1)
    cols = (xy[:, 0, None] + dx.reshape(1, -1)).clamp(0, w - 1)
    window = scores[rows, cols]                                       # [N, (2r+1)^2]
    weights = F.softmax((window - window.max(1, keepdim=True).values) / temperature, dim=1)
    offset = torch.stack([(weights * dx.reshape(1, -1)).sum(1),
                          (weights * dy.reshape(1, -1)).sum(1)], 1)
    return xy.to(scores.dtype) + offset


class AlikedKeypoints:
    """``(keypoints [N, 2] float64 pixels, descriptors [N, D] float32)`` of an RGB (or grey)
    ``uint8`` image: at most ``max_features`` keypoints. The network is loaded on first use
    (``path``: other converted weights, e.g. in tests)."""

    def __init__(self, max_features: int = 2000, variant: str = VARIANT,
                 path: Optional[str] = None) -> None:
        self.max_features = int(max_features)
        self.variant, self.path = variant, path
        self._net = None

    @property
    def net(self):
        if self._net is None:
            from g2g_model.backbones.aliked import ALIKED

            self._net = ALIKED(self.variant, path=self.path)
        return self._net

    @property
    def dim(self) -> int:
        from g2g_model.backbones.aliked import VARIANTS

        return VARIANTS[self.variant][4]

    @torch.inference_mode()
    def __call__(self, image: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        rgb = np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image
        x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)[None].float() / 255.0
        feats, scores = self.net(x)
        h, w = scores.shape[-2:]
        top = min(self.max_features, max(0, (h - 2 * RADIUS) * (w - 2 * RADIUS)))
        if top == 0:
            return np.zeros((0, 2)), np.zeros((0, self.dim), np.float32)
        xy, value = self.net.detect(scores, top, RADIUS)
        xy = xy[0][value[0] > 0]  # a flat score map has fewer maxima than asked for
        if not len(xy):
            return np.zeros((0, 2)), np.zeros((0, self.dim), np.float32)
        points = soft_argmax(scores[0, 0], xy)
        desc = self.net.describe(feats, points[None])[0]
        return points.double().numpy(), desc.float().numpy()
