"""Small building pieces shared by the resampler, the bridge and the pose head.

Module types and their construction order follow the official code, so that parameter names
match the released state dicts (``ffn.0``/``ffn.3``, ``in_proj_weight`` ...) and, after
``torch.manual_seed``, the random initialisation consumes the generator in the same order.
"""

from __future__ import annotations

import torch
from torch import nn

# Learned embeddings: drawn as randn * 0.02 (consuming RNG, as the official code does), then
# overwritten with a truncated normal of std 0.02 and absolute bounds +-2 (never truncates).
EMBED_STD = 0.02


def new_embedding(*shape: int) -> nn.Parameter:
    """A learned embedding tensor; call :func:`init_embedding_` on it after the sub-modules."""
    return nn.Parameter(torch.randn(*shape) * EMBED_STD)


def init_embedding_(param: torch.Tensor) -> None:
    nn.init.trunc_normal_(param, mean=0.0, std=EMBED_STD, a=-2.0, b=2.0)


def feed_forward(dim: int, hidden: int, dropout: float) -> nn.Sequential:
    """Linear(dim, hidden) -> exact GELU -> Dropout -> Linear(hidden, dim) -> Dropout.

    The Sequential indices give the official keys ``ffn.0.*`` and ``ffn.3.*``.
    """
    return nn.Sequential(
        nn.Linear(dim, hidden),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, dim),
        nn.Dropout(dropout),
    )


class BatchFirstAttention(nn.MultiheadAttention):
    """``nn.MultiheadAttention`` on batch-first tensors whose memory is laid out sequence first.

    Outside torch's fused inference kernel (under autocast, or with gradients) the module
    transposes batch-first inputs to sequence-first views, and its packed in-projection of such
    a view runs as a batched product over a copy of the weight expanded once per token: for the
    perceiver resampler's 49 patch tokens the largest item of the G2G modules' time on a CPU
    (their pass both ways 14.0 -> 10.7 ms without it, 2026-11-30). Handing it
    inputs that are sequence-first in memory (a tensor seen twice, e.g. key and value, stays one
    tensor) makes the same products plain matrix products. Same parameters; the same results up
    to the rounding of the reordered sums.
    """

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **kwargs):
        laid_out: dict = {}

        def sequence_first(x: torch.Tensor) -> torch.Tensor:
            if id(x) not in laid_out:
                laid_out[id(x)] = x.transpose(0, 1).contiguous().transpose(0, 1)
            return laid_out[id(x)]

        return super().forward(sequence_first(query), sequence_first(key),
                               sequence_first(value), **kwargs)


def attention(dim: int, num_heads: int, dropout: float) -> nn.MultiheadAttention:
    """Standard multi-head attention with a packed in-projection, biases, batch-first tensors
    (:class:`BatchFirstAttention`).

    At construction torch draws ``out_proj`` with the nn.Linear default, xavier-uniform over the
    whole packed ``in_proj_weight`` [3C, C] and zero biases, which is the official init.
    """
    return BatchFirstAttention(dim, num_heads, dropout=dropout, batch_first=True)
