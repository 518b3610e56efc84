"""Covisibility decoder: how much of frame a is seen by frame b, from cached encoder tokens.

ARCHITECTURE §4. Each frame is encoded ONCE by the frozen image encoder; its patch tokens
``[P, D]`` (a ``gh x gw`` grid in raster order) are cached in the map. For a pair (a, b):

1. (optional) average-pool each frame's token grid by ``pool`` (the CPU presets attend over
   ``P / pool^2`` tokens per frame, which is what makes scoring thousands of pairs affordable);
2. project to width ``dim`` and add a learned positional embedding per (pooled) patch index;
   these two steps depend on one frame only and are cached by :meth:`embed`;
3. add a learned segment embedding (frame a / frame b), concatenate ``[a ; b]`` and run
   ``depth`` pre-LayerNorm joint self-attention blocks, then a final LayerNorm;
4. dense head: per token ``subdiv^2`` logits of "this part of the patch is covisible in the other
   frame", for both frames (used for training and inspection);
5. scalar head: mean of each frame's tokens -> MLP -> sigmoid, giving the directional ratios
   ``r_ab`` (fraction of a seen in b) and ``r_ba``; the symmetric score is
   ``o = min(r_ab, r_ba)``.

The segment embeddings make the decoder order-aware, so ``r_ab(a, b)`` and ``r_ba(b, a)`` agree
only as well as training made them; ``o`` is the min of the two directions of ONE pass.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, Tuple

import torch
import torch.nn.functional as F
from torch import nn

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CovisibilityConfig:
    """Decoder size.

    Attributes:
        in_dim: D, channel width of the encoder tokens.
        grid_hw: (gh, gw) token grid of the encoder; P = gh * gw.
        dim: decoder width d.
        depth: number of joint self-attention blocks.
        heads: attention heads (``dim`` must be divisible by it).
        mlp_ratio: MLP hidden width = ``mlp_ratio * dim``.
        pool: average-pool factor applied to the token grid first (1 = none); must divide
            both grid sides.
        dense_subdiv: the dense head predicts ``subdiv x subdiv`` cells per (pooled) token.
        scalar_hidden: hidden width of the scalar head MLP.
        input_norm: standardise the tokens per (patch, channel) with fixed statistics of the
            training tokens (buffers ``input_mean``/``input_std``, set by
            :meth:`CovisibilityDecoder.set_input_statistics`) before anything else; for
            encoders whose frame-to-frame variation is small next to a constant offset.
    """

    in_dim: int = 768
    grid_hw: Tuple[int, int] = (16, 16)
    dim: int = 256
    depth: int = 2
    heads: int = 8
    mlp_ratio: float = 4.0
    pool: int = 1
    dense_subdiv: int = 1
    scalar_hidden: int = 64
    input_norm: bool = False

    def __post_init__(self):
        object.__setattr__(self, "grid_hw", tuple(int(s) for s in self.grid_hw))
        for name in ("in_dim", "dim", "depth", "heads", "pool", "dense_subdiv",
                     "scalar_hidden"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if len(self.grid_hw) != 2 or min(self.grid_hw) < 1:
            raise ValueError(f"grid_hw must be two positive sides, got {self.grid_hw}")
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        if self.grid_hw[0] % self.pool or self.grid_hw[1] % self.pool:
            raise ValueError(f"pool ({self.pool}) must divide both grid sides {self.grid_hw}")

    @property
    def num_patches(self) -> int:
        """P, tokens per frame at the encoder output."""
        return self.grid_hw[0] * self.grid_hw[1]

    @property
    def pooled_hw(self) -> Tuple[int, int]:
        """Token grid the decoder attends over."""
        return (self.grid_hw[0] // self.pool, self.grid_hw[1] // self.pool)

    @property
    def dense_hw(self) -> Tuple[int, int]:
        """Resolution of the dense head output (and of the dense labels it is trained on)."""
        gh, gw = self.pooled_hw
        return (gh * self.dense_subdiv, gw * self.dense_subdiv)

    def to_dict(self) -> Dict:
        out = dataclasses.asdict(self)
        out["grid_hw"] = list(self.grid_hw)
        return out

    @classmethod
    def from_dict(cls, data: Dict) -> "CovisibilityConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown CovisibilityConfig fields {unknown}")
        return cls(**data)


COVISIBILITY_PRESETS: Dict[str, CovisibilityConfig] = {
    # ARCHITECTURE §4 / the paper: d=256, 2 blocks over the full 16x16 grid of a ViT-L/14
    # encoder at 224 px (D=768): 1,859,714 parameters (paper: 1.84M).
    "paper": CovisibilityConfig(),
    # The same decoder over the compact backbone's tokens (override in_dim / grid_hw to match
    # the encoder), attending over a 2x2-pooled grid: 4x fewer tokens, ~8x cheaper per pair.
    "compact": CovisibilityConfig(in_dim=256, grid_hw=(16, 16), pool=2, dense_subdiv=2),
    # Fastest CPU variant: 4x4 pooling and a narrower decoder, for maps of thousands of frames.
    "cpu_fast": CovisibilityConfig(in_dim=256, grid_hw=(16, 16), dim=128, heads=4, pool=4,
                                   dense_subdiv=4, scalar_hidden=32),
    # Unit tests and synthetic tasks.
    "tiny": CovisibilityConfig(in_dim=32, grid_hw=(4, 4), dim=64, heads=4, mlp_ratio=2.0,
                               scalar_hidden=32),
}


def covisibility_config(preset: str = "paper", **overrides) -> CovisibilityConfig:
    """A named preset with field overrides, e.g. ``covisibility_config("compact", in_dim=192)``."""
    if preset not in COVISIBILITY_PRESETS:
        raise ValueError(
            f"unknown covisibility preset {preset!r}; choose from {sorted(COVISIBILITY_PRESETS)}"
        )
    return dataclasses.replace(COVISIBILITY_PRESETS[preset], **overrides)


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: x + Attn(LN(x)); x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(round(mlp_ratio * dim))
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, S, dim] -> [B, S, dim]``."""
        b, s, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, heads, S, d_head]
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


class CovisibilityDecoder(nn.Module):
    """Pairwise covisibility from cached encoder tokens (see the module docstring)."""

    def __init__(self, config: CovisibilityConfig):
        super().__init__()
        self.config = config
        c = config
        gh, gw = c.pooled_hw
        self.input_proj = nn.Linear(c.in_dim, c.dim)
        self.pos_embed = nn.Parameter(torch.zeros(gh * gw, c.dim))
        self.segment_embed = nn.Parameter(torch.zeros(2, c.dim))
        self.blocks = nn.ModuleList(_Block(c.dim, c.heads, c.mlp_ratio) for _ in range(c.depth))
        self.norm = nn.LayerNorm(c.dim)
        self.dense_head = nn.Linear(c.dim, c.dense_subdiv ** 2)
        self.scalar_head = nn.Sequential(
            nn.Linear(c.dim, c.scalar_hidden), nn.GELU(), nn.Linear(c.scalar_hidden, 1)
        )
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.segment_embed, std=0.02)
        if c.input_norm:
            self.register_buffer("input_mean", torch.zeros(c.num_patches, c.in_dim))
            self.register_buffer("input_std", torch.ones(c.num_patches, c.in_dim))

    @torch.no_grad()
    def set_input_statistics(self, tokens: torch.Tensor, min_std: float = 1e-3) -> None:
        """Set the input standardisation from training tokens ``[F, P, D]`` (mean and std over
        the F frames, std clamped to ``min_std``); requires ``config.input_norm``."""
        c = self.config
        if not c.input_norm:
            raise ValueError("set_input_statistics needs a config with input_norm=True")
        if tokens.dim() != 3 or tokens.shape[1:] != (c.num_patches, c.in_dim) or \
                tokens.shape[0] < 2:
            raise ValueError(f"tokens must be [F >= 2, {c.num_patches}, {c.in_dim}], got "
                             f"{list(tokens.shape)}")
        x = tokens.double()
        self.input_mean.copy_(x.mean(0))
        self.input_std.copy_(x.std(0).clamp(min=min_std))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Per-frame part of the decoder, cacheable: pool, project, add positions.

        Args:
            tokens: ``[T, P, D]`` encoder tokens (any float dtype), P = gh * gw in raster order.
        Returns:
            ``[T, P', dim]`` with ``P' = (gh / pool) * (gw / pool)``.
        """
        c = self.config
        if tokens.dim() != 3 or tokens.shape[1] != c.num_patches or tokens.shape[2] != c.in_dim:
            raise ValueError(
                f"tokens must be [T, {c.num_patches}, {c.in_dim}] (P = grid {c.grid_hw}, "
                f"D = in_dim), got {list(tokens.shape)}"
            )
        x = tokens.to(self.input_proj.weight.dtype)
        if c.input_norm:
            x = (x - self.input_mean) / self.input_std
        if c.pool > 1:
            t = x.shape[0]
            grid = x.transpose(1, 2).reshape(t, c.in_dim, *c.grid_hw)
            x = F.avg_pool2d(grid, c.pool).flatten(2).transpose(1, 2)
        return self.input_proj(x) + self.pos_embed

    def decode(self, emb_a: torch.Tensor, emb_b: torch.Tensor,
               dense: bool = True) -> Dict[str, torch.Tensor]:
        """Joint attention over embedded pairs.

        Args:
            emb_a, emb_b: ``[B, P', dim]`` from :meth:`embed`.
            dense: also compute the dense logits (training); scoring skips them.
        Returns:
            ``r_ab``, ``r_ba``, ``score``: ``[B]`` in [0, 1] (score = min of the two);
            with ``dense``: ``dense_a``, ``dense_b``: ``[B, Hd, Wd]`` logits on the
            ``config.dense_hw`` grid of each frame.
        """
        if emb_a.shape != emb_b.shape or emb_a.dim() != 3:
            raise ValueError(
                f"emb_a and emb_b must both be [B, P', dim], got {list(emb_a.shape)} and "
                f"{list(emb_b.shape)}"
            )
        n = emb_a.shape[1]
        x = torch.cat([emb_a + self.segment_embed[0], emb_b + self.segment_embed[1]], dim=1)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        pooled = torch.stack([x[:, :n].mean(1), x[:, n:].mean(1)], dim=1)  # [B, 2, dim]
        ratios = torch.sigmoid(self.scalar_head(pooled).squeeze(-1).float())  # [B, 2]
        out = {"r_ab": ratios[:, 0], "r_ba": ratios[:, 1], "score": ratios.min(dim=1).values}
        if dense:
            out["dense_a"] = self._dense(x[:, :n])
            out["dense_b"] = self._dense(x[:, n:])
        return out

    def _dense(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, P', dim] -> [B, gh*s, gw*s]`` logits (pixel-shuffle of the per-token cells)."""
        c = self.config
        gh, gw = c.pooled_hw
        s = c.dense_subdiv
        logits = self.dense_head(x).float().view(x.shape[0], gh, gw, s, s)
        return logits.permute(0, 1, 3, 2, 4).reshape(x.shape[0], gh * s, gw * s)

    def forward(self, tokens_a: torch.Tensor, tokens_b: torch.Tensor,
                dense: bool = True) -> Dict[str, torch.Tensor]:
        """Covisibility of pairs.

        Args:
            tokens_a, tokens_b: ``[B, P, D]`` encoder tokens of frames a and b.
            dense: see :meth:`decode`.
        Returns:
            the dict of :meth:`decode`.
        """
        if tokens_a.shape != tokens_b.shape:
            raise ValueError(
                f"tokens_a {list(tokens_a.shape)} and tokens_b {list(tokens_b.shape)} differ"
            )
        return self.decode(self.embed(tokens_a), self.embed(tokens_b), dense=dense)


def build_covisibility_model(preset: str = "paper", **overrides) -> CovisibilityDecoder:
    """Build a decoder from a named preset with field overrides (weights are NOT loaded)."""
    model = CovisibilityDecoder(covisibility_config(preset, **overrides))
    LOG.debug("covisibility decoder %s: %d parameters", preset, model.num_parameters())
    return model
