"""DINOv2 ViT image encoder as MapAnything V1 uses it (patch tokens after the final norm).

V1 uses ViT-L/14 without register tokens; the class token is computed but not returned.
State-dict names match the torch.hub DINOv2 model wrapped by UniCeption (``encoder.model.*``);
UniCeption deletes DINOv2's unused ``mask_token``, so there is none here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .transformer_block import TransformerBlock


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch x patch`` convolution: ``[B, 3, H, W] -> [B, h*w, dim]``."""

    def __init__(self, patch_size: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(images).flatten(2).transpose(1, 2)  # row-major tokens


class DinoV2ViT(nn.Module):
    """The DINOv2 vision transformer (no registers, LayerScale, final LayerNorm).

    Args:
        dim, depth, num_heads, mlp_ratio: transformer sizes.
        patch_size: patch side in pixels.
        pos_grid: side of the stored square position-embedding grid (DINOv2: 518 / 14 = 37).
        interpolate_offset: DINOv2 computes the bicubic resize factor of the position embedding
            as ``(target + offset) / pos_grid`` (passed as a scale factor, not as a size).
        layerscale: LayerScale in every block.
        norm_eps: LayerNorm epsilon.
    """

    def __init__(
        self,
        dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float,
        patch_size: int,
        pos_grid: int,
        interpolate_offset: float,
        layerscale: bool,
        norm_eps: float,
    ) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.pos_grid = pos_grid
        self.interpolate_offset = interpolate_offset
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + pos_grid * pos_grid, dim))
        self.patch_embed = PatchEmbed(patch_size, dim)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, mlp_ratio, layerscale, norm_eps) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim, eps=norm_eps)

    def position_embedding(self, rows: int, cols: int) -> torch.Tensor:
        """Position embedding for a ``rows x cols`` patch grid: ``[1, 1 + rows*cols, dim]``.

        The stored grid is used unchanged when it already matches (square, same size);
        otherwise its patch part is resized bicubically in float32 (no antialiasing) with DINOv2's
        scale factors, which at 224x224 are 16.1/37 per axis rather than exactly 16/37.
        """
        if rows == cols == self.pos_grid:
            return self.pos_embed
        pos = self.pos_embed.float()
        dim = pos.shape[-1]
        grid = pos[:, 1:].reshape(1, self.pos_grid, self.pos_grid, dim).permute(0, 3, 1, 2)
        scale = (
            (rows + self.interpolate_offset) / self.pos_grid,
            (cols + self.interpolate_offset) / self.pos_grid,
        )
        grid = F.interpolate(grid, scale_factor=scale, mode="bicubic", align_corners=False,
                             antialias=False)
        if tuple(grid.shape[-2:]) != (rows, cols):
            raise ValueError(
                f"position-embedding resize gave a {tuple(grid.shape[-2:])} grid, "
                f"expected {(rows, cols)}"
            )
        grid = grid.permute(0, 2, 3, 1).reshape(1, rows * cols, dim)
        return torch.cat((pos[:, :1], grid), dim=1).to(self.pos_embed.dtype)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Normalised images ``[B, 3, H, W]`` -> normalised patch tokens ``[B, h*w, dim]``."""
        rows = images.shape[-2] // self.patch_size
        cols = images.shape[-1] // self.patch_size
        patches = self.patch_embed(images)
        cls = self.cls_token.expand(patches.shape[0], -1, -1).to(patches.dtype)
        x = torch.cat((cls, patches), dim=1)
        x = x + self.position_embedding(rows, cols).to(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)[:, 1:]


class ImageEncoder(nn.Module):
    """Holder that reproduces UniCeption's ``encoder.model`` key prefix around the ViT."""

    def __init__(self, model: DinoV2ViT) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)
