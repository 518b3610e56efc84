"""Patch stem of the compact backbone: RGB in [0, 1] to one token per p x p patch.

The stem is a stack of non-overlapping strided "convolutions" written as matrix products on a
re-arranged image: ``factors = (4, 2, 2)`` embeds every 4x4 pixel block (GELU), then every 2x2
group of those (GELU), then every 2x2 group again, giving one token per 16x16 patch. This is the
same function as three Conv2d layers with kernel = stride, but runs as large GEMMs, which CPUs
execute several times faster than convolutions with 3 input channels. ``factors = (p,)`` is the
plain linear patchify of a ViT.

ImageNet mean/std normalisation is folded into the first layer's weights at run time, which saves
two full passes over the images.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn


class PatchStem(nn.Module):
    """``[M, 3, H, W]`` in [0, 1] -> ``[M, (H/p) * (W/p), D]``, row-major patches.

    Args:
        factors: block sizes from finest to coarsest; their product is the patch size p.
        channels: output width of each level; the last one is D.
        mean, std: per-channel RGB normalisation applied to the input (folded into layer 1).
    """

    def __init__(self, factors: Sequence[int], channels: Sequence[int],
                 mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        if len(factors) != len(channels) or not factors:
            raise ValueError(f"factors {factors} and channels {channels} must have equal length")
        self.factors: Tuple[int, ...] = tuple(int(f) for f in factors)
        self.patch_size = 1
        for factor in self.factors:
            self.patch_size *= factor
        layers = []
        in_dim = 3 * self.factors[0] ** 2
        for index, out_dim in enumerate(channels):
            layers.append(nn.Linear(in_dim, out_dim))
            if index + 1 < len(channels):
                in_dim = out_dim * self.factors[index + 1] ** 2
        self.layers = nn.ModuleList(layers)
        fine = self.factors[0] ** 2
        self.register_buffer("input_scale", (1.0 / torch.tensor(std)).repeat_interleave(fine),
                             persistent=False)
        self.register_buffer("input_shift", torch.tensor(mean).repeat_interleave(fine),
                             persistent=False)

    def _blocks(self, images: torch.Tensor) -> torch.Tensor:
        """Re-arrange to ``[M, P, g_k, ..., g_2, 3 * f_1^2]`` (g_i = f_i^2 sub-blocks)."""
        num, _, height, width = images.shape
        grid_h, grid_w = height // self.patch_size, width // self.patch_size
        coarse_to_fine = self.factors[::-1]
        levels = len(self.factors)
        x = images.reshape(num, 3, grid_h, *coarse_to_fine, grid_w, *coarse_to_fine)
        rows = [3 + i for i in range(levels)]
        cols = [4 + levels + i for i in range(levels)]
        order = [0, 2, 3 + levels]
        for row, col in zip(rows[:-1], cols[:-1]):
            order += [row, col]
        order += [1, rows[-1], cols[-1]]
        groups = [f * f for f in coarse_to_fine[:-1]]
        return x.permute(order).reshape(num, grid_h * grid_w, *groups,
                                        3 * self.factors[0] ** 2)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self._blocks(images)
        first = self.layers[0]
        weight = first.weight * self.input_scale
        bias = first.bias - weight @ self.input_shift
        x = F.linear(x, weight, bias)
        for layer in self.layers[1:]:
            x = layer(F.gelu(x).flatten(-2))
        return x
