"""Multi-frame pose head: T_{A0<-X} for every target frame X in one batched pass.

Targets, in order: A1 .. A_{N_A-1}, then B0 .. B_{N_B-1}. For target X the key/value set is
``[Z'_{A0} ; Z'_X + e_id[k(X)]]`` (A0 first, 2L tokens); the two learned queries (row 0 rotation,
row 1 translation) are shared by all targets, as are all weights. Targets never attend to each
other: they are batched as independent sequences.

Identity-embedding indexing. The table has 2W - 1 rows. Target A_i uses row ``i - 1`` and target
B_j uses row ``W - 1 + j``. With N_A = N_B = W this is exactly the official layout (A1..A_{W-1}
-> 0..W-2, B0..B_{W-1} -> W-1..2W-2). For smaller groups the rows stay tied to the frame's role
(B0 always gets row W-1), whereas the official code, which never runs that case, would number
the targets consecutively and give B0 the row of an A frame.
"""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn

from g2g_model.model.config import G2GConfig
from g2g_model.model.layers import attention, init_embedding_, new_embedding
from g2g_model.model.rotation import IDENTITY_6D


def _mlp(in_dim: int, hidden: int, blocks: int, eps: float, dropout: float) -> nn.Sequential:
    """[Linear, LayerNorm, GELU, Dropout] x blocks (official keys .0, .1, .4, .5 for 2 blocks)."""
    layers = []
    for i in range(blocks):
        layers += [
            nn.Linear(in_dim if i == 0 else hidden, hidden),
            nn.LayerNorm(hidden, eps=eps),
            nn.GELU(),
            nn.Dropout(dropout),
        ]
    return nn.Sequential(*layers)


class MultiFramePoseHead(nn.Module):
    """``tokens_a [B, N_A, L, C], tokens_b [B, N_B, L, C]`` -> 6D rotations and translations."""

    def __init__(self, config: G2GConfig):
        super().__init__()
        dim, eps, hidden = config.hidden_dim, config.layernorm_eps, config.pose_head_hidden_dim
        self.max_frames = config.max_frames
        # Construction order mirrors the official module (matters only for seeded init).
        self.pose_queries = new_embedding(2, dim)
        self.cross_attn = attention(dim, config.num_heads, config.dropout)
        self.norm_query = nn.LayerNorm(dim, eps=eps)
        self.norm_kv = nn.LayerNorm(dim, eps=eps)
        self.norm_after_attn = nn.LayerNorm(dim, eps=eps)
        blocks = config.pose_head_layers - 1
        self.rot_mlp = _mlp(dim, hidden, blocks, eps, config.dropout)
        self.trans_mlp = _mlp(dim, hidden, blocks, eps, config.dropout)
        self.rotation_head = nn.Linear(hidden, 6)
        self.translation_head = nn.Linear(hidden, 3)
        self.frame_identity_embed = new_embedding(config.num_identity_embeddings, 1, dim)
        self._init_weights()

    def _init_weights(self) -> None:
        init_embedding_(self.pose_queries)
        init_embedding_(self.frame_identity_embed)
        # Every Linear of the head (the attention's out_proj included, its packed in_proj not)
        # is re-drawn xavier-uniform with zero bias; the two output layers get a second draw.
        linears = [m for m in self.modules() if isinstance(m, nn.Linear)]
        for linear in linears:
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)
        nn.init.xavier_uniform_(self.rotation_head.weight)
        nn.init.xavier_uniform_(self.translation_head.weight)
        with torch.no_grad():
            # Identity rotation at initialisation.
            self.rotation_head.bias.copy_(torch.tensor(IDENTITY_6D))
        nn.init.zeros_(self.translation_head.bias)

    def identity_indices(self, frames_a: int, frames_b: int, device=None) -> torch.Tensor:
        """Rows of ``frame_identity_embed`` for the targets A1..A_{N_A-1}, B0..B_{N_B-1}."""
        return torch.cat([
            torch.arange(frames_a - 1, device=device),
            torch.arange(frames_b, device=device) + (self.max_frames - 1),
        ])

    def forward(
        self,
        tokens_a: torch.Tensor,
        tokens_b: torch.Tensor,
        return_intermediates: bool = False,
    ) -> Dict[str, torch.Tensor]:
        """Predict every target's pose relative to A0.

        Args:
            tokens_a: ``[B, N_A, L, C]`` bridge output for group A (frame 0 = A0, the reference).
            tokens_b: ``[B, N_B, L, C]`` bridge output for group B.
            return_intermediates: add ``pose_kv [B, T, 2L, C]`` (before norm_kv),
                ``pose_attended [B, T, 2, C]``, ``pose_rot_feat`` / ``pose_trans_feat [B, T, H]``.

        Returns:
            ``rotations_6d [B, T, 6]`` and ``translations [B, T, 3]`` with T = N_A - 1 + N_B.
        """
        batch, frames_a, latents, dim = tokens_a.shape
        frames_b = tokens_b.shape[1]
        targets = torch.cat([tokens_a[:, 1:], tokens_b], dim=1)  # [B, T, L, C]
        num_targets = targets.shape[1]
        ids = self.identity_indices(frames_a, frames_b, device=targets.device)
        targets = targets + self.frame_identity_embed[ids].unsqueeze(0)
        ref = tokens_a[:, :1].expand(-1, num_targets, -1, -1)
        kv = torch.cat([ref, targets], dim=2).reshape(batch * num_targets, 2 * latents, dim)
        kv_normed = self.norm_kv(kv)

        queries = self.pose_queries.unsqueeze(0).expand(batch * num_targets, -1, -1)
        attended = self.cross_attn(self.norm_query(queries), kv_normed, kv_normed,
                                   need_weights=False)[0]
        # The residual uses the un-normalised queries (official).
        attended = self.norm_after_attn(queries + attended)
        rot_feat = self.rot_mlp(attended[:, 0])
        trans_feat = self.trans_mlp(attended[:, 1])
        out = {
            "rotations_6d": self.rotation_head(rot_feat).reshape(batch, num_targets, 6),
            "translations": self.translation_head(trans_feat).reshape(batch, num_targets, 3),
        }
        if return_intermediates:
            out["pose_kv"] = kv.reshape(batch, num_targets, 2 * latents, dim)
            out["pose_attended"] = attended.reshape(batch, num_targets, 2, dim)
            out["pose_rot_feat"] = rot_feat.reshape(batch, num_targets, -1)
            out["pose_trans_feat"] = trans_feat.reshape(batch, num_targets, -1)
        return out
