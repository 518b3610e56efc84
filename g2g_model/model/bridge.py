"""Cross-group bridge: joint self-attention over the latent tokens of both groups.

Token augmentation, in the order of the official code (fixtures/g2g_official/README.txt):

1. every frame i of either group: ``+ frame_embed[i]`` (shared by A and B);
   frame A0 only: ``+ anchor_embed`` (first anchor insertion point; B gets no anchor);
2. group A: ``+ group_embed[0]``, group B: ``+ group_embed[1]``; the groups are concatenated
   frame-major into ``[B, (N_A + N_B) * L, C]`` (token index = frame * L + latent, A first);
3. the A0 tokens (the first L) get ``+ anchor_embed_merge`` (second insertion point).

Net effect on A0: frame_embed[0] + anchor_embed + group_embed[0] + anchor_embed_merge. Then
``bridge_layers`` pre-LN self-attention blocks over all tokens, a final LayerNorm, and the tokens
are split back per group and frame. N_A and N_B may differ (each <= W).

With ``cross_group_attention=False`` (ablation) the self-attention gets a block-diagonal mask:
A tokens attend only to A tokens and B only to B; the pose head's [A0 ; target] key/value set is
then the only place where the groups meet.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import nn

from g2g_model.model.config import G2GConfig
from g2g_model.model.layers import attention, feed_forward, init_embedding_, new_embedding


class SelfAttentionBlock(nn.Module):
    """Pre-LN block: x += MHA(norm1(x)); x += FFN(norm2(x))."""

    def __init__(self, config: G2GConfig):
        super().__init__()
        dim, eps = config.hidden_dim, config.layernorm_eps
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.self_attn = attention(dim, config.num_heads, config.dropout)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.ffn = feed_forward(dim, config.ffn_dim, config.dropout)

    def forward(self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x [B, T, C]``; ``attn_mask [T, T]`` bool, True = may not attend."""
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))


class CrossGroupBridge(nn.Module):
    """``[B, N_A, L, C], [B, N_B, L, C] -> same shapes``, jointly attended."""

    def __init__(self, config: G2GConfig):
        super().__init__()
        dim = config.hidden_dim
        self.max_frames = config.max_frames
        self.cross_group_attention = config.cross_group_attention
        # Creation order matters only for seeded init; it mirrors the official module.
        self.frame_embed = new_embedding(config.max_frames, 1, dim)
        self.anchor_embed = new_embedding(1, 1, dim) if config.use_anchor_embed else None
        self.group_embed = new_embedding(2, 1, dim)
        self.anchor_embed_merge = new_embedding(1, 1, dim) if config.has_anchor_merge else None
        self.merged_layers = nn.ModuleList(
            SelfAttentionBlock(config) for _ in range(config.bridge_layers)
        )
        self.out_norm = nn.LayerNorm(dim, eps=config.layernorm_eps)
        for param in (self.frame_embed, self.anchor_embed, self.group_embed,
                      self.anchor_embed_merge):
            if param is not None:
                init_embedding_(param)

    def group_mask(self, frames_a: int, frames_b: int, latents: int,
                   device: torch.device) -> Optional[torch.Tensor]:
        """Block-diagonal bool mask ``[T, T]`` (True = blocked), or None with cross-group on."""
        if self.cross_group_attention:
            return None
        group = torch.cat([
            torch.zeros(frames_a * latents, dtype=torch.bool, device=device),
            torch.ones(frames_b * latents, dtype=torch.bool, device=device),
        ])
        return group[:, None] != group[None, :]

    def forward(
        self,
        latents_a: torch.Tensor,
        latents_b: torch.Tensor,
        return_intermediates: bool = False,
    ) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]:
        """Augment, merge, attend, split.

        Args:
            latents_a: ``[B, N_A, L, C]`` resampled tokens of group A (frame 0 = anchor A0).
            latents_b: ``[B, N_B, L, C]`` resampled tokens of group B.
            return_intermediates: also return ``bridge_merged_input`` (after all embeddings)
                and ``bridge_pre_out_norm`` (after the last block), both ``[B, T, C]``.

        Returns:
            ``(tokens_a [B, N_A, L, C], tokens_b [B, N_B, L, C], intermediates dict)``.
        """
        batch, frames_a, latents, dim = latents_a.shape
        frames_b = latents_b.shape[1]
        tokens_a = latents_a + self.frame_embed[:frames_a].unsqueeze(0)
        tokens_b = latents_b + self.frame_embed[:frames_b].unsqueeze(0)
        if self.anchor_embed is not None:
            tokens_a = torch.cat([tokens_a[:, :1] + self.anchor_embed, tokens_a[:, 1:]], dim=1)
        tokens_a = tokens_a + self.group_embed[0]
        tokens_b = tokens_b + self.group_embed[1]
        merged = torch.cat([
            tokens_a.reshape(batch, frames_a * latents, dim),
            tokens_b.reshape(batch, frames_b * latents, dim),
        ], dim=1)
        if self.anchor_embed_merge is not None:
            merged = torch.cat([merged[:, :latents] + self.anchor_embed_merge[0],
                                merged[:, latents:]], dim=1)
        intermediates = {}
        if return_intermediates:
            intermediates["bridge_merged_input"] = merged

        mask = self.group_mask(frames_a, frames_b, latents, merged.device)
        for layer in self.merged_layers:
            merged = layer(merged, attn_mask=mask)
        if return_intermediates:
            intermediates["bridge_pre_out_norm"] = merged
        merged = self.out_norm(merged)

        out_a = merged[:, :frames_a * latents].reshape(batch, frames_a, latents, dim)
        out_b = merged[:, frames_a * latents:].reshape(batch, frames_b, latents, dim)
        return out_a, out_b, intermediates
