"""Hyper-parameters of the trainable G2G modules (resampler, bridge, pose head) and named presets.

The presets are selected by name (``preset("paper", max_frames=4)``). ``paper`` is the released
configuration of the official code (ARCHITECTURE §2): with ``max_frames`` W = 4 / 5 / 8 it has
exactly 32,108,297 / 32,110,601 / 32,117,513 trainable parameters. ``small`` is the CPU default
that sits on the ``compact`` backbone; ``tiny`` has the sizes of the golden fixtures in
``fixtures/g2g_official`` and is meant for tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping

# Loss forms for the rotation term (ARCHITECTURE §2, "Loss"). The config carries the choice so
# that a checkpoint records how it was trained; the loss itself lives with the training code.
ROTATION_LOSSES = ("chordal_l1", "frobenius_sq")


def _check_known(values: Mapping[str, Any]) -> None:
    known = {f.name for f in dataclasses.fields(G2GConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown G2GConfig field(s) {unknown}; known fields: {sorted(known)}")


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class G2GConfig:
    """Everything needed to build :class:`g2g_model.model.g2g.G2GModel`.

    Attributes:
        hidden_dim: C, the token width of every trainable module.
        num_heads: attention heads (C must be divisible by it).
        mlp_ratio: FFN hidden width = int(C * mlp_ratio) in resampler and bridge blocks.
        num_latents: L, learned latent queries per frame in the perceiver resampler.
        resampler_layers: cross-attention blocks in the resampler.
        bridge_layers: merged (A and B together) self-attention blocks in the bridge.
        pose_head_hidden_dim: width H of the rotation / translation MLPs of the pose head.
        pose_head_layers: official ``pose_head_layers``; each MLP has (pose_head_layers - 1)
            Linear-LayerNorm-GELU blocks followed by one output Linear.
        max_frames: W, the most frames a group may hold. Sizes the frame embeddings [W] and the
            target identity embeddings [2W - 1].
        input_dim: D_in, the backbone feature width. A Linear D_in -> C is built only when
            D_in != C (official ``embed_proj``).
        layernorm_eps: epsilon of every LayerNorm.
        dropout: dropout in attention and MLPs (0 in the released models).
        use_anchor_embed: add the anchor embedding to the A0 tokens (official default True).
        reinject_anchor_after_merge: add a second anchor embedding to the A0 tokens after the
            groups are merged (official default True; needs ``use_anchor_embed``).
        cross_group_attention: False gives the no-cross-group ablation: the bridge's merged
            self-attention gets a block-diagonal mask so A tokens only see A and B only B.
        rotation_loss: ``chordal_l1`` (mean |R_hat^T R - I|) or ``frobenius_sq`` (/9).
        feature_norm_patches: P > 0 standardises the backbone features per patch and channel
            with fixed statistics (buffers ``feature_mean`` / ``feature_scale`` ``[P, D_in]``,
            set from training features, saved in the checkpoint) before the input projection.
            Our addition, for backbones whose tokens carry the image in a small part of a large
            constant (the CPU-trained compact default); 0 (off) in the paper's models.
    """

    hidden_dim: int = 768
    num_heads: int = 8
    mlp_ratio: float = 4.0
    num_latents: int = 64
    resampler_layers: int = 2
    bridge_layers: int = 2
    pose_head_hidden_dim: int = 512
    pose_head_layers: int = 3
    max_frames: int = 5
    input_dim: int = 768
    layernorm_eps: float = 1e-5
    dropout: float = 0.0
    use_anchor_embed: bool = True
    reinject_anchor_after_merge: bool = True
    cross_group_attention: bool = True
    rotation_loss: str = "chordal_l1"
    feature_norm_patches: int = 0

    def __post_init__(self) -> None:
        for name in ("hidden_dim", "num_heads", "num_latents", "pose_head_hidden_dim",
                     "max_frames", "input_dim"):
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("resampler_layers", "bridge_layers", "feature_norm_patches"):
            _check_int(name, getattr(self, name), minimum=0)
        # One hidden block at least: with zero blocks the official output Linear would read an
        # H-wide feature that does not exist.
        _check_int("pose_head_layers", self.pose_head_layers, minimum=2)
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim={self.hidden_dim} is not divisible by num_heads={self.num_heads}"
            )
        for name in ("mlp_ratio", "layernorm_eps", "dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if self.mlp_ratio <= 0 or int(self.hidden_dim * self.mlp_ratio) < 1:
            raise ValueError(f"mlp_ratio must be positive, got {self.mlp_ratio!r}")
        if self.layernorm_eps <= 0:
            raise ValueError(f"layernorm_eps must be positive, got {self.layernorm_eps!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        for name in ("use_anchor_embed", "reinject_anchor_after_merge", "cross_group_attention"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.rotation_loss not in ROTATION_LOSSES:
            raise ValueError(
                f"rotation_loss must be one of {ROTATION_LOSSES}, got {self.rotation_loss!r}"
            )

    @property
    def head_dim(self) -> int:
        return self.hidden_dim // self.num_heads

    @property
    def ffn_dim(self) -> int:
        return int(self.hidden_dim * self.mlp_ratio)

    @property
    def num_identity_embeddings(self) -> int:
        """2W - 1: one per possible target (A1..A_{W-1}, B0..B_{W-1})."""
        return 2 * self.max_frames - 1

    @property
    def has_input_projection(self) -> bool:
        return self.input_dim != self.hidden_dim

    @property
    def has_anchor_merge(self) -> bool:
        return self.use_anchor_embed and self.reinject_anchor_after_merge

    def replace(self, **changes: Any) -> "G2GConfig":
        """A copy with some fields changed; unknown field names raise ``ValueError``."""
        _check_known(changes)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "G2GConfig":
        """Inverse of :meth:`to_dict`. Unknown keys raise; absent keys take the defaults."""
        _check_known(values)
        return cls(**dict(values))

    def differences(self, other: "G2GConfig") -> Dict[str, tuple]:
        """``{field: (self value, other value)}`` for every field that differs."""
        mine, theirs = self.to_dict(), other.to_dict()
        return {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}


PRESETS: Dict[str, G2GConfig] = {
    # Released official configuration (MapAnything features, D_in = 768 -> no projection).
    "paper": G2GConfig(),
    # CPU default on the compact backbone: 3,706,633 trainable parameters for W = 5.
    "small": G2GConfig(hidden_dim=256, num_heads=4, num_latents=32, pose_head_hidden_dim=256,
                       input_dim=256),
    # Sizes of the golden fixtures (fixtures/g2g_official/tiny_config.json); for tests.
    "tiny": G2GConfig(hidden_dim=64, num_heads=4, num_latents=8, pose_head_hidden_dim=32,
                      max_frames=3, input_dim=64),
}


def preset(name: str, **overrides: Any) -> G2GConfig:
    """The named preset, with optional field overrides (e.g. ``max_frames=4``)."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown G2G preset {name!r}; presets: {sorted(PRESETS)}") from None
    return base.replace(**overrides) if overrides else base


def preset_name_of(config: G2GConfig) -> str | None:
    """Name of the preset equal to ``config`` up to ``max_frames`` / ``input_dim``, else None."""
    for name, base in PRESETS.items():
        if base.replace(max_frames=config.max_frames, input_dim=config.input_dim) == config:
            return name
    return None
