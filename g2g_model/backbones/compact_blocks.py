"""Alternating frame / global attention transformer used by the compact backbone.

Even blocks attend among the P patches of one frame, odd blocks among all N x P patches of the
group (the information-sharing pattern of MapAnything and VGGT). Blocks are pre-LayerNorm with
exact-erf GELU MLPs and use ``scaled_dot_product_attention`` so the fused CPU kernel is picked.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    """Multi-head self-attention over ``[B, T, D]`` tokens."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, dim // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, heads, T, Dh]
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))


class Block(nn.Module):
    """Pre-LN transformer block: ``x + attn(norm1(x))`` then ``x + mlp(norm2(x))``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, eps: float) -> None:
        super().__init__()
        hidden = int(round(dim * mlp_ratio))
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = SelfAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class AlternatingAttention(nn.Module):
    """``depth`` blocks alternating frame attention (even index) and group attention (odd)."""

    def __init__(self, dim: int, depth: int, num_heads: int, mlp_ratio: float,
                 eps: float) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, num_heads, mlp_ratio, eps) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[B, N, P, D]`` -> ``[B, N, P, D]`` (final LayerNorm applied)."""
        batch, frames, patches, dim = tokens.shape
        x = tokens.reshape(batch * frames, patches, dim)
        for index, block in enumerate(self.blocks):
            if index % 2 == 0:
                x = block(x)
            else:
                x = block(x.reshape(batch, frames * patches, dim))
                x = x.reshape(batch * frames, patches, dim)
        return self.norm(x).reshape(batch, frames, patches, dim)
