"""Perceiver resampler: compress each frame's P patch features into L latent tokens.

One set of weights serves both groups and every frame; no positional embedding is added (the
official forward passes none). Each block is pre-LayerNorm cross-attention (queries = latents,
keys/values = the frame's patches, re-normalised by the block's own ``norm_context``; the patch
features themselves are never updated) followed by an FFN; the resampler ends with a LayerNorm.
"""

from __future__ import annotations

import torch
from torch import nn

from g2g_model.model.config import G2GConfig
from g2g_model.model.layers import attention, feed_forward, init_embedding_, new_embedding


class ResamplerBlock(nn.Module):
    """latents += MHA(norm1(latents), norm_context(ctx)); latents += FFN(norm2(latents))."""

    def __init__(self, config: G2GConfig):
        super().__init__()
        dim, eps = config.hidden_dim, config.layernorm_eps
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.norm_context = nn.LayerNorm(dim, eps=eps)
        self.cross_attn = attention(dim, config.num_heads, config.dropout)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.ffn = feed_forward(dim, config.ffn_dim, config.dropout)

    def forward(self, latents: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """``latents [S, L, C]``, ``context [S, P, C]`` -> ``[S, L, C]``."""
        ctx = self.norm_context(context)
        query = self.norm1(latents)
        latents = latents + self.cross_attn(query, ctx, ctx, need_weights=False)[0]
        return latents + self.ffn(self.norm2(latents))


class PerceiverResampler(nn.Module):
    """Frame-wise perceiver resampler, ``[B, N, P, C] -> [B, N, L, C]``."""

    def __init__(self, config: G2GConfig):
        super().__init__()
        self.latents = new_embedding(config.num_latents, config.hidden_dim)
        self.layers = nn.ModuleList(
            ResamplerBlock(config) for _ in range(config.resampler_layers)
        )
        self.out_norm = nn.LayerNorm(config.hidden_dim, eps=config.layernorm_eps)
        init_embedding_(self.latents)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Resample every frame independently.

        Args:
            features: ``[B, N, P, C]`` patch features (already projected to C).

        Returns:
            ``[B, N, L, C]`` latent tokens after the final LayerNorm.
        """
        batch, frames, patches, dim = features.shape
        context = features.reshape(batch * frames, patches, dim)
        latents = self.latents.unsqueeze(0).expand(batch * frames, -1, -1)
        for layer in self.layers:
            latents = layer(latents, context)
        latents = self.out_norm(latents)
        return latents.reshape(batch, frames, -1, dim)
