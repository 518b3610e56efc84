"""MapAnything's "info sharing" transformer: alternating global / per-view attention.

Layer 0, 2, 4, ... attend over every token of a sample (all views + the scale token);
layer 1, 3, 5, ... attend inside each view separately while the scale token skips the block.
A reference-view embedding is added to the tokens of view 0 only; there is no spatial
positional encoding. Names follow UniCeption's MultiViewAlternatingAttentionTransformer
(``proj_embed``, ``view_pos_table``, ``self_attention_blocks.i``, ``norm``).
"""

from __future__ import annotations

import torch
from torch import nn

from .transformer_block import TransformerBlock


def reference_view_row(dim: int) -> torch.Tensor:
    """Row 0 of a sinusoid table, ``sin(0), cos(0), ...`` = ``[0, 1, 0, 1, ...]``: ``[1, dim]``."""
    row = torch.zeros(1, dim)
    row[:, 1::2] = 1.0
    return row


class AlternatingAttentionTransformer(nn.Module):
    """Multi-view token mixing.

    Args:
        in_dim: width of the incoming tokens (the image encoder width).
        dim, depth, num_heads, mlp_ratio: transformer sizes (depth even).
        norm_eps: LayerNorm epsilon.
    """

    def __init__(
        self,
        in_dim: int,
        dim: int,
        depth: int,
        num_heads: int,
        mlp_ratio: float,
        norm_eps: float,
    ) -> None:
        super().__init__()
        # UniCeption only creates proj_embed when the widths differ; V1 has 1024 -> 768.
        self.proj_embed = nn.Linear(in_dim, dim) if in_dim != dim else nn.Identity()
        self.register_buffer("view_pos_table", reference_view_row(dim), persistent=True)
        self.self_attention_blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, mlp_ratio, layerscale=False, norm_eps=norm_eps)
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim, eps=norm_eps)

    def forward(self, view_tokens: torch.Tensor, extra_token: torch.Tensor) -> tuple:
        """Mix tokens across views.

        Args:
            view_tokens: ``[B, N, P, in_dim]`` per-view tokens, view 0 is the reference.
            extra_token: ``[B, in_dim]`` the scale token, appended after all view tokens.

        Returns:
            ``([B, N, P, dim], [B, dim])`` final-normed view tokens and scale-token output.
        """
        batch, views, tokens, _ = view_tokens.shape
        x = self.proj_embed(view_tokens)
        scale = self.proj_embed(extra_token)
        dim = x.shape[-1]
        ref = torch.zeros(1, views, 1, dim, dtype=x.dtype, device=x.device)
        ref[:, 0] = self.view_pos_table.to(x.dtype)
        x = x + ref
        sequence = torch.cat((x.reshape(batch, views * tokens, dim), scale[:, None]), dim=1)
        for index, block in enumerate(self.self_attention_blocks):
            if index % 2 == 0:
                sequence = block(sequence)
            else:
                per_view = sequence[:, :-1].reshape(batch * views, tokens, dim)
                per_view = block(per_view).reshape(batch, views * tokens, dim)
                sequence = torch.cat((per_view, sequence[:, -1:]), dim=1)
        sequence = self.norm(sequence)
        return sequence[:, :-1].reshape(batch, views, tokens, dim), sequence[:, -1]
