"""Encoders of MapAnything's geometric inputs (UniCeption 0.1.7 layouts and key names).

* :class:`DenseRepresentationEncoder`: a per-pixel map (ray directions, 3 channels) ->
  one vector per patch token. ``PixelUnshuffle(patch)`` -> 3x3 conv -> residual blocks ->
  1x1 conv -> LayerNorm.
* :class:`GlobalRepresentationEncoder`: a per-view vector (quaternion, translation, log scale)
  -> one vector per view. MLP with GELU -> LayerNorm.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn


class ResidualConvBlock(nn.Module):
    """``GELU(conv2(GELU(conv1(x))) + shortcut(x))``, 3x3 convs, 1x1 shortcut if widths differ."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_dim, out_dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(out_dim, out_dim, kernel_size=3, padding=1)
        self.shortcut = nn.Conv2d(in_dim, out_dim, kernel_size=1) if in_dim != out_dim \
            else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv2(F.gelu(self.conv1(x))) + self.shortcut(x))


class DenseRepresentationEncoder(nn.Module):
    """Dense map ``[B, C, H, W]`` -> per-patch features ``[B, (H/p)*(W/p), out_dim]``.

    Args:
        in_chans: C (3 for ray directions).
        patch_size: p; the map is space-to-depth'ed to ``C*p*p`` channels on the patch grid.
        intermediate_dims: widths after ``conv_in`` and after each residual block.
        out_dim: output width (the image encoder's width).
        norm_eps: LayerNorm epsilon.
    """

    def __init__(
        self,
        in_chans: int,
        patch_size: int,
        intermediate_dims: Sequence[int],
        out_dim: int,
        norm_eps: float,
    ) -> None:
        super().__init__()
        dims = [int(d) for d in intermediate_dims]
        self.unshuffle = nn.PixelUnshuffle(patch_size)
        self.conv_in = nn.Conv2d(in_chans * patch_size * patch_size, dims[0], 3, padding=1)
        layers = [ResidualConvBlock(a, b) for a, b in zip(dims[:-1], dims[1:])]
        layers.append(nn.Conv2d(dims[-1], out_dim, kernel_size=1))
        self.encoder = nn.Sequential(*layers)
        self.norm_layer = nn.LayerNorm(out_dim, eps=norm_eps)

    def forward(self, dense: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.conv_in(self.unshuffle(dense)))
        return self.norm_layer(x.flatten(2).transpose(1, 2))  # row-major tokens


def _nested_mlp(in_dim: int, hidden_dims: Sequence[int], out_dim: int) -> nn.Sequential:
    """``Linear-GELU-...-Linear-GELU-Linear`` nested the way UniCeption nests it.

    UniCeption wraps the stack one ``Sequential`` per hidden layer, so the Linear layers of a
    3-hidden-layer MLP are named ``0.0.0.0``, ``0.0.1``, ``0.1`` and ``1``. Building the same
    nesting keeps checkpoint names loadable without a key map.
    """
    dims = [int(d) for d in hidden_dims]
    stack = nn.Sequential(nn.Linear(in_dim, dims[0]), nn.GELU())
    for prev, width in zip(dims[:-1], dims[1:]):
        stack = nn.Sequential(stack, nn.Linear(prev, width), nn.GELU())
    return nn.Sequential(stack, nn.Linear(dims[-1], out_dim))


class GlobalRepresentationEncoder(nn.Module):
    """Per-view vector ``[B, in_chans]`` -> ``[B, out_dim]`` (MLP, then LayerNorm)."""

    def __init__(
        self,
        in_chans: int,
        intermediate_dims: Sequence[int],
        out_dim: int,
        norm_eps: float,
    ) -> None:
        super().__init__()
        self.encoder = _nested_mlp(in_chans, intermediate_dims, out_dim)
        self.norm_layer = nn.LayerNorm(out_dim, eps=norm_eps)

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return self.norm_layer(self.encoder(values))
