"""Configuration and named presets of the ``compact`` backbone.

The compact backbone is the embedded CPU default (ARCHITECTURE §2). Its size is chosen by preset
name; ``compact_s`` is the default and ``compact_xs`` is a tiny model for tests. Measured
latencies for the presets are in ``benchmarks/RESULTS_compact.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, Tuple


STEMS = ("conv", "linear", "mobilenetv2", "aliked_t16")


@dataclass(frozen=True)
class CompactConfig:
    """Hyper-parameters of :class:`g2g_model.backbones.compact.CompactBackbone`.

    Attributes:
        image_size: (H, W) the model is built for; other sizes divisible by ``patch_size`` work,
            with the patch position table interpolated.
        patch_size: pixels per patch side (P = H/p * W/p, 196 for 224x224 and p=16).
        stem: "conv" (three non-overlapping strided convolutions 4x4, 2x2, 2x2 with GELU, run
            as GEMMs, see :mod:`compact_stem`), "linear" (one p x p patchify projection) or
            "mobilenetv2" (frozen ImageNet MobileNetV2 features at stride 16 under a trainable
            projection, :mod:`mobilenet_v2`) or "aliked_t16" (frozen ALIKED-t16 SDDH descriptors
            per 16-pixel cell under a trainable projection, :mod:`aliked`). All but "linear"
            need ``patch_size == 16``.
        stem_channels: channels after the first and second conv of the conv stem.
        dim: token width D (the feature dimension returned).
        depth: number of transformer blocks; even blocks attend within a frame, odd blocks attend
            across all frames of the group (alternating attention, as in MapAnything).
        num_heads: attention heads (dim must be divisible by it).
        mlp_ratio: hidden width of the block MLP as a multiple of ``dim``.
        ray_samples: s; ray directions are sampled on an s x s grid inside every patch (in the
            camera frame and rotated into the anchor frame) and embedded per patch.
        geometry_hidden: hidden width of the ray and pose encoder MLPs.
        min_translation_scale: lower clamp (metres) of the group's mean translation norm before
            its log is taken, so that single-frame or co-located groups stay well conditioned.
        layer_norm_eps: epsilon of every LayerNorm.
        image_mean / image_std: RGB normalisation applied to inputs in [0, 1].
    """

    image_size: Tuple[int, int] = (224, 224)
    patch_size: int = 16
    stem: str = "conv"
    stem_channels: Tuple[int, int] = (48, 96)
    dim: int = 192
    depth: int = 4
    num_heads: int = 3
    mlp_ratio: float = 3.0
    ray_samples: int = 2
    geometry_hidden: int = 64
    min_translation_scale: float = 1e-3
    layer_norm_eps: float = 1e-6
    image_mean: Tuple[float, float, float] = (0.485, 0.456, 0.406)
    image_std: Tuple[float, float, float] = (0.229, 0.224, 0.225)

    def __post_init__(self) -> None:
        h, w = self.image_size
        if self.patch_size <= 0 or h % self.patch_size or w % self.patch_size:
            raise ValueError(
                f"image_size {self.image_size} must be divisible by patch_size {self.patch_size}"
            )
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {self.stem!r}")
        if self.stem != "linear" and self.patch_size != 16:
            raise ValueError(f"stem {self.stem!r} needs patch_size 16, got {self.patch_size}")
        if self.dim <= 0 or self.num_heads <= 0 or self.dim % self.num_heads:
            raise ValueError(f"dim {self.dim} must be a positive multiple of num_heads "
                             f"{self.num_heads}")
        if self.depth <= 0:
            raise ValueError(f"depth must be positive, got {self.depth}")
        if self.ray_samples <= 0 or self.patch_size % self.ray_samples:
            raise ValueError(f"ray_samples {self.ray_samples} must divide patch_size "
                             f"{self.patch_size}")
        if self.min_translation_scale <= 0:
            raise ValueError(f"min_translation_scale must be > 0, got "
                             f"{self.min_translation_scale}")

    @property
    def grid_size(self) -> Tuple[int, int]:
        return (self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size)

    def to_dict(self) -> Dict[str, Any]:
        """Plain JSON-serialisable dict (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "CompactConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise ``ValueError`` naming them."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown CompactConfig keys {unknown}; known: {sorted(known)}")
        kwargs = {}
        for key, value in values.items():
            kwargs[key] = tuple(value) if isinstance(value, list) else value
        return cls(**kwargs)

    def fingerprint(self) -> str:
        """Short stable hash of the configuration (used by the feature cache)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


COMPACT_PRESETS: Dict[str, CompactConfig] = {
    # Embedded default: 5+5 frames at 224x224 in about 100 ms on 2 AVX2 cores in float32
    # (about 10 GFLOP; see benchmarks/RESULTS_compact.md), leaving room for the G2G modules.
    "compact_s": CompactConfig(),
    # Wider and deeper (about 24 GFLOP for 5+5 frames): for CPUs with native bf16 (AVX-512 BF16
    # / AMX) or a GPU, where it fits the same latency budget.
    "compact_m": CompactConfig(dim=256, depth=6, num_heads=4),
    # compact_s on frozen ImageNet MobileNetV2 features (issue: default models that use their
    # images); the trunk adds about 0.56 M frozen parameters.
    "compact_mnv2": CompactConfig(stem="mobilenetv2"),
    # compact_s on frozen ALIKED-t16 descriptors (0.19 M frozen parameters): the encoder that
    # matched best across seasons in the encoder probe; not trained into a default yet.
    "compact_aliked": CompactConfig(stem="aliked_t16"),
    # Tiny model for unit tests (fast on any CPU; not meant to be trained for real).
    "compact_xs": CompactConfig(
        image_size=(64, 64), stem="linear", stem_channels=(8, 16), dim=32, depth=2,
        num_heads=2, mlp_ratio=2.0, ray_samples=2, geometry_hidden=16,
    ),
}

DEFAULT_PRESET = "compact_s"


def compact_config(name: str = DEFAULT_PRESET, **overrides: Any) -> CompactConfig:
    """Preset ``name`` with field ``overrides`` applied; unknown names raise ``ValueError``."""
    if name not in COMPACT_PRESETS:
        raise ValueError(f"unknown compact preset {name!r}; choices: {sorted(COMPACT_PRESETS)}")
    if not overrides:
        return COMPACT_PRESETS[name]
    values = COMPACT_PRESETS[name].to_dict()
    values.update(overrides)
    return CompactConfig.from_dict(values)
