"""Sizes of the MapAnything V1 feature path, as a dataclass with named presets.

The feature path is: DINOv2 image encoder -> geometric encoders (rays, rotation, translation,
translation scale) summed onto the image tokens -> fusion LayerNorm -> scale token ->
alternating-attention transformer ("info sharing") -> final LayerNorm.

Presets:
    ``full``: the released MapAnything V1 sizes (ViT-L/14 encoder, width-768 info sharing).
Other configurations are built with :meth:`MapAnythingV1Config.from_dict` (our own flat field
names), :meth:`MapAnythingV1Config.from_fixture_config` (the golden fixture's tiny_config.json)
or :meth:`MapAnythingV1Config.from_init_kwargs` (the ``config.json`` written next to a
MapAnything checkpoint, i.e. its ``MapAnything(...)`` constructor arguments).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

# Embedding width of each DINOv2 size name used in MapAnything's encoder_config["size"].
DINOV2_WIDTHS = {"small": 384, "base": 768, "large": 1024, "giant": 1536}
DINOV2_DEPTHS = {"small": 12, "base": 12, "large": 24, "giant": 40}
DINOV2_HEADS = {"small": 6, "base": 12, "large": 16, "giant": 24}

# MapAnything V1.1 (and the non-V1 "mapanything" configs) use a ViT-g encoder and a width-1536
# info-sharing transformer with register tokens and SwiGLU: a different feature path.
V1_1_WIDTH = 1536


def giant_refusal(what: str) -> str:
    """The message that refuses a giant (width-1536, V1.1+) MapAnything checkpoint or config."""
    return (
        f"{what}: this is the giant MapAnything (DINOv2-giant / {V1_1_WIDTH}-dim, MapAnything "
        "V1.1 and later, today's default Hugging Face weights facebook/map-anything), which the "
        "mapanything_v1 backbone does not implement (register tokens, SwiGLU). The released G2G "
        "weights were trained on MapAnything v1.0.1 (DINOv2-large / 1024-dim) and do not fit "
        "it: use the backbone of the G2G release (its map-anything-model/ folder; g2g-weights "
        "downloads it) or facebook/map-anything-v1 / map-anything-apache-v1"
    )


@dataclass(frozen=True)
class MapAnythingV1Config:
    """Hyper-parameters of the MapAnything V1 feature path.

    Attributes:
        image_size: (H, W) the backbone expects; both multiples of ``patch_size``.
        patch_size: pixels per patch side (DINOv2 /14).
        encoder_dim / encoder_depth / encoder_heads / encoder_mlp_ratio: DINOv2 ViT sizes.
        encoder_pos_grid: side of the stored square position-embedding grid (518 / 14 = 37).
        encoder_interpolate_offset: DINOv2's offset added to the target grid before computing the
            bicubic scale factor of the position embedding.
        encoder_layerscale: whether the DINOv2 blocks have LayerScale (V1: yes).
        ray_intermediate_dims: channel widths of the ray-direction dense encoder.
        global_intermediate_dims: hidden widths of the rotation/translation/scale MLP encoders.
        info_dim / info_depth / info_heads / info_mlp_ratio: alternating-attention transformer.
        norm_eps: epsilon of every LayerNorm of the feature path.
        image_mean / image_std: per-channel RGB normalisation applied to [0, 1] images.
    """

    image_size: Tuple[int, int] = (224, 224)
    patch_size: int = 14
    encoder_dim: int = 1024
    encoder_depth: int = 24
    encoder_heads: int = 16
    encoder_mlp_ratio: float = 4.0
    encoder_pos_grid: int = 37
    encoder_interpolate_offset: float = 0.1
    encoder_layerscale: bool = True
    ray_intermediate_dims: Tuple[int, ...] = (588, 768, 1024)
    global_intermediate_dims: Tuple[int, ...] = (128, 256, 512)
    info_dim: int = 768
    info_depth: int = 24
    info_heads: int = 12
    info_mlp_ratio: float = 4.0
    norm_eps: float = 1e-6
    image_mean: Tuple[float, float, float] = (0.485, 0.456, 0.406)
    image_std: Tuple[float, float, float] = (0.229, 0.224, 0.225)
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if V1_1_WIDTH in (self.encoder_dim, self.info_dim):
            raise ValueError(giant_refusal(
                f"encoder_dim={self.encoder_dim}, info_dim={self.info_dim}"))
        if len(self.image_size) != 2:
            raise ValueError(f"image_size must be (H, W), got {self.image_size!r}")
        for name in ("patch_size", "encoder_dim", "encoder_depth", "encoder_heads", "info_dim",
                     "info_depth", "info_heads", "encoder_pos_grid"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for side in self.image_size:
            if side <= 0 or side % self.patch_size:
                raise ValueError(
                    f"image_size={self.image_size!r} must be positive multiples of "
                    f"patch_size={self.patch_size}"
                )
        if self.encoder_dim % self.encoder_heads:
            raise ValueError(
                f"encoder_dim={self.encoder_dim} is not divisible by "
                f"encoder_heads={self.encoder_heads}"
            )
        if self.info_dim % self.info_heads:
            raise ValueError(
                f"info_dim={self.info_dim} is not divisible by info_heads={self.info_heads}"
            )
        if self.info_depth % 2:
            # Layers alternate global / per-view attention and always come in pairs.
            raise ValueError(f"info_depth must be even, got {self.info_depth}")
        if not self.ray_intermediate_dims or not self.global_intermediate_dims:
            raise ValueError(
                "ray_intermediate_dims and global_intermediate_dims must be non-empty")

    @property
    def tokens_per_view(self) -> int:
        """P, the number of patch tokens per view at ``image_size``."""
        return (self.image_size[0] // self.patch_size) * (self.image_size[1] // self.patch_size)

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "MapAnythingV1Config":
        """Build from our own flat field names; unknown names raise ``ValueError``."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(
                f"unknown MapAnythingV1Config fields {unknown}; known: {sorted(names)}")
        kwargs = dict(values)
        for name in ("image_size", "ray_intermediate_dims", "global_intermediate_dims",
                     "image_mean", "image_std"):
            if name in kwargs:
                kwargs[name] = tuple(kwargs[name])
        return cls(**kwargs)

    def to_dict(self) -> Dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("extra")
        return out

    @classmethod
    def from_fixture_config(cls, fixture: Dict[str, Any]) -> "MapAnythingV1Config":
        """Build from the golden fixture's ``tiny_config.json`` (explicit sizes of every part)."""
        try:
            geometry = fixture["geometry"]
            enc = fixture["image_encoder"]
            hub = enc["dinov2_kwargs"]
            info = fixture["info_sharing"]
            ray = fixture["ray_dirs_encoder"]
            global_dims = fixture["mapanything_init_kwargs"]["geometric_input_config"][
                "cam_rot_encoder_config"]["intermediate_dims"]
        except KeyError as exc:
            raise ValueError(f"fixture config lacks the field {exc.args[0]!r}") from None
        if int(hub.get("num_register_tokens", 0)) != 0:
            raise ValueError(
                f"num_register_tokens={hub['num_register_tokens']}: V1 has no register tokens"
            )
        return cls(
            image_size=(int(geometry["height"]), int(geometry["width"])),
            patch_size=int(hub["patch_size"]),
            encoder_dim=int(hub["embed_dim"]),
            encoder_depth=int(hub["depth"]),
            encoder_heads=int(hub["num_heads"]),
            encoder_mlp_ratio=float(hub["mlp_ratio"]),
            encoder_pos_grid=int(hub["img_size"]) // int(hub["patch_size"]),
            encoder_interpolate_offset=float(hub["interpolate_offset"]),
            encoder_layerscale=hub.get("init_values") is not None,
            ray_intermediate_dims=tuple(int(d) for d in ray["intermediate_dims"]),
            global_intermediate_dims=tuple(int(d) for d in global_dims),
            info_dim=int(info["dim"]),
            info_depth=int(info["depth"]),
            info_heads=int(info["num_heads"]),
            info_mlp_ratio=float(info["mlp_ratio"]),
            image_mean=tuple(float(v) for v in enc["image_normalization"]["mean"]),
            image_std=tuple(float(v) for v in enc["image_normalization"]["std"]),
        )

    @classmethod
    def from_init_kwargs(cls, kwargs: Dict[str, Any]) -> "MapAnythingV1Config":
        """Build from MapAnything's constructor arguments (a checkpoint's ``config.json``).

        Only the fields that decide the feature-path shapes are read; the rest (heads, training
        probabilities) is kept in ``extra`` for reference. Sizes not written there (encoder
        width/depth/heads) follow the DINOv2 size name in ``encoder_config["size"]``.
        """
        try:
            enc = kwargs["encoder_config"]
            info = kwargs["info_sharing_config"]
            geo = kwargs["geometric_input_config"]
        except KeyError as exc:
            raise ValueError(f"checkpoint config lacks the field {exc.args[0]!r}") from None
        if enc.get("encoder_str", "dinov2") != "dinov2":
            raise ValueError(
                f"encoder_config.encoder_str={enc['encoder_str']!r}: V1 uses a DINOv2 encoder"
            )
        size = enc.get("size", "large")
        if size not in DINOV2_WIDTHS:
            raise ValueError(
                f"encoder_config.size={size!r} unknown; expected one of {sorted(DINOV2_WIDTHS)}"
            )
        if size == "giant":
            raise ValueError(giant_refusal('encoder_config.size="giant"'))
        if enc.get("with_registers") or kwargs.get("use_register_tokens_from_encoder"):
            raise ValueError(giant_refusal(
                "encoder_config.with_registers / use_register_tokens_from_encoder is set"))
        if kwargs.get("info_sharing_mlp_layer_str", "mlp") != "mlp":
            raise ValueError(giant_refusal(
                f"info_sharing_mlp_layer_str={kwargs['info_sharing_mlp_layer_str']!r} (V1 "
                "uses 'mlp')"))
        if info.get("model_type", "alternating_attention") != "alternating_attention":
            raise ValueError(
                f"info_sharing_config.model_type={info['model_type']!r}: V1 uses "
                "'alternating_attention'"
            )
        module = info.get("module_args", {})
        if not module.get("distinguish_ref_and_non_ref_views", True):
            raise ValueError(
                "info_sharing_config.module_args.distinguish_ref_and_non_ref_views is False: V1 "
                "adds a reference-view embedding"
            )
        defaults = cls()
        return cls(
            encoder_dim=DINOV2_WIDTHS[size],
            encoder_depth=DINOV2_DEPTHS[size],
            encoder_heads=DINOV2_HEADS[size],
            ray_intermediate_dims=tuple(
                geo.get("ray_dirs_encoder_config", {}).get(
                    "intermediate_dims", defaults.ray_intermediate_dims)),
            global_intermediate_dims=tuple(
                geo.get("cam_rot_encoder_config", {}).get(
                    "intermediate_dims", defaults.global_intermediate_dims)),
            info_dim=int(module.get("dim", defaults.info_dim)),
            info_depth=int(module.get("depth", defaults.info_depth)),
            info_heads=int(module.get("num_heads", defaults.info_heads)),
            info_mlp_ratio=float(module.get("mlp_ratio", defaults.info_mlp_ratio)),
            extra={k: v for k, v in kwargs.items()},
        )


PRESETS: Dict[str, MapAnythingV1Config] = {
    "full": MapAnythingV1Config(),
}


def preset(name: str) -> MapAnythingV1Config:
    """Return a named preset; unknown names raise ``ValueError`` listing the choices."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown MapAnything V1 preset {name!r}; choices: {sorted(PRESETS)}") \
            from None
