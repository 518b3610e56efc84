"""How the ``mapanything_upstream`` adapter builds Meta's upstream ``MapAnything`` offline.

``mapanything`` and ``uniception`` are imported only when an adapter is built
(:func:`import_upstream`); without them the :class:`ImportError` says what to install. The
DINOv2 ViT comes from a *local* checkout of facebookresearch/dinov2 (:func:`resolve_dinov2_repo`),
registered in uniception's encoder table (:func:`register_local_dinov2_encoder`), never from
GitHub through ``torch.hub``; :func:`upstream_init_kwargs` gives the upstream constructor's
arguments for a V1 configuration.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch

from .config import DINOV2_DEPTHS, DINOV2_HEADS, DINOV2_WIDTHS, MapAnythingV1Config

logger = logging.getLogger(__name__)

TESTED_MAPANYTHING_COMMIT = "f7ebafb4d8349776705aaa686cf928988d1bd7f4"
TESTED_UNICEPTION_VERSION = "0.1.7"
DINOV2_REPO_ENV = "G2G_DINOV2_REPO"
DINOV2_HUB_CACHE_NAME = "facebookresearch_dinov2_main"  # what torch.hub names its GitHub copy
LOCAL_DINOV2_ENCODER = "g2g_local_dinov2"  # our key in uniception's encoder table

INSTALL_HINT = (
    "the 'mapanything_upstream' backbone needs the upstream MapAnything package: install "
    f"facebookresearch/map-anything (tested at commit {TESTED_MAPANYTHING_COMMIT[:7]}, "
    "e.g. pip install 'mapanything @ git+https://github.com/facebookresearch/map-anything@"
    f"{TESTED_MAPANYTHING_COMMIT}'), which brings uniception=={TESTED_UNICEPTION_VERSION}; "
    "or use the built-in 'mapanything_v1' backbone, which loads the same checkpoints without it"
)

# MapAnything V1's prediction heads (configs/model/mapanything_v1.yaml: pred_head dpt_pose_scale
# with the raydirs+depth+pose+confidence+mask+scale adaptors), as its constructor takes them.
# The adapter never runs the heads, but the upstream constructor cannot build a model without.
_INF = float("inf")
V1_PRED_HEAD_CONFIG: Dict[str, Any] = {
    "type": "dpt+pose",
    "feature_head": {"feature_dim": 256, "hooks": [0, 1, 2, 3], "checkpoint_gradient": False},
    "regressor_head": {"output_dim": 6, "checkpoint_gradient": False},
    "pose_head": {"num_resconv_block": 2, "rot_representation_dim": 4},
    "scale_head": {"output_dim": 1},
    "adaptor_type": "raydirs+depth+pose+confidence+mask",
    "dpt_adaptor": {
        "name": "raydirs+depth+pose+confidence+mask+scale",
        "ray_directions_mode": "linear",
        "ray_directions_normalize_to_unit_sphere": True,
        "ray_directions_normalize_to_unit_image_plane": False,
        "ray_directions_vmin": -_INF,
        "ray_directions_vmax": _INF,
        "ray_directions_clamp_min_of_z_dir": False,
        "ray_directions_z_dir_min": -_INF,
        "depth_mode": "exp",
        "depth_vmin": 0,
        "depth_vmax": _INF,
        "confidence_type": "exp",
        "confidence_vmin": 1,
        "confidence_vmax": _INF,
    },
    "pose_adaptor": {
        "name": "raydirs+depth+pose+confidence+mask+scale",
        "cam_trans_mode": "linear",
        "cam_trans_vmin": -_INF,
        "cam_trans_vmax": _INF,
        "quaternions_mode": "linear",
        "quaternions_normalize": True,
        "quaternions_vmin": -_INF,
        "quaternions_vmax": _INF,
    },
    "scale_adaptor": {
        "name": "raydirs+depth+pose+confidence+mask+scale",
        "mode": "exp",
        "vmin": 1e-08,
        "vmax": _INF,
    },
    "gradient_checkpointing": False,
}


def import_upstream() -> Dict[str, Any]:
    """Import the upstream pieces the adapter uses.

    Returns:
        ``{"MapAnything", "preprocess", "validate", "normalizations", "encoder_table",
        "DINOv2Encoder", "ViTEncoderBase"}``.

    Raises:
        ImportError: ``mapanything`` or ``uniception`` is not installed (the message says what
            to install), or one of their dependencies is missing or does not load.
    """
    try:
        from mapanything.models.mapanything.model import MapAnything
        from mapanything.utils.inference import (
            preprocess_input_views_for_inference,
            validate_input_views_for_inference,
        )
        from uniception.models.encoders import ENCODER_CONFIGS
        from uniception.models.encoders.base import UniCeptionViTEncoderBase
        from uniception.models.encoders.dinov2 import DINOv2Encoder
        from uniception.models.encoders.image_normalizations import IMAGE_NORMALIZATION_DICT
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("mapanything", "uniception"):
            raise ImportError(f"{INSTALL_HINT} (import failed: {exc})", name=exc.name) from exc
        raise ImportError(
            f"the upstream 'mapanything' package is installed but its dependency {exc.name!r} "
            f"is missing ({exc}); install the package with its dependencies", name=exc.name,
        ) from exc
    except RuntimeError as exc:
        # Typically torchvision (imported by timm, which uniception imports) built for another
        # torch: its operators fail to register at import time.
        raise ImportError(
            f"the upstream 'mapanything' package is installed but failed to import with torch "
            f"{torch.__version__}: {exc}. Its dependencies (uniception, timm, torchvision) must "
            "match this torch build"
        ) from exc
    return {
        "MapAnything": MapAnything,
        "preprocess": preprocess_input_views_for_inference,
        "validate": validate_input_views_for_inference,
        "normalizations": IMAGE_NORMALIZATION_DICT,
        "encoder_table": ENCODER_CONFIGS,
        "DINOv2Encoder": DINOv2Encoder,
        "ViTEncoderBase": UniCeptionViTEncoderBase,
    }


def resolve_dinov2_repo(dinov2_repo: Union[str, os.PathLike, None] = None) -> Path:
    """The local facebookresearch/dinov2 checkout to build the image encoder from.

    Args:
        dinov2_repo: explicit directory; ``None`` tries ``$G2G_DINOV2_REPO``, then the torch hub
            cache (``<torch.hub.get_dir()>/facebookresearch_dinov2_main``).

    Raises:
        FileNotFoundError: no directory with a ``hubconf.py`` was found (nothing is downloaded).
    """
    if dinov2_repo is not None:
        candidates = [("dinov2_repo", Path(dinov2_repo).expanduser())]
    else:
        candidates = []
        if os.environ.get(DINOV2_REPO_ENV):
            candidates.append((f"${DINOV2_REPO_ENV}", Path(os.environ[DINOV2_REPO_ENV])))
        candidates.append(("torch hub cache", Path(torch.hub.get_dir()) / DINOV2_HUB_CACHE_NAME))
    for _, path in candidates:
        if (path / "hubconf.py").is_file():
            return path
    tried = ", ".join(f"{label} {path}" for label, path in candidates)
    raise FileNotFoundError(
        f"no local facebookresearch/dinov2 checkout (a directory with hubconf.py) found; tried "
        f"{tried}. The adapter never downloads: clone the dinov2 repository and pass "
        f"dinov2_repo=<dir> or set {DINOV2_REPO_ENV}"
    )


def _standard_dinov2_size(config: MapAnythingV1Config) -> Optional[str]:
    """The DINOv2 hub size name whose ViT equals ``config``'s encoder, or None (custom sizes)."""
    hub_defaults = (config.patch_size == 14 and config.encoder_pos_grid == 37
                    and config.encoder_interpolate_offset == 0.1 and config.encoder_layerscale
                    and config.encoder_mlp_ratio == 4.0)
    for size, width in DINOV2_WIDTHS.items():
        if hub_defaults and (config.encoder_dim, config.encoder_depth, config.encoder_heads) == (
                width, DINOV2_DEPTHS[size], DINOV2_HEADS[size]):
            return size
    return None


def _dinov2_vit_kwargs(config: MapAnythingV1Config) -> Dict[str, Any]:
    """``DinoVisionTransformer`` arguments for a non-standard encoder size (e.g. test models)."""
    return {
        "img_size": config.encoder_pos_grid * config.patch_size,
        "patch_size": config.patch_size,
        "embed_dim": config.encoder_dim,
        "depth": config.encoder_depth,
        "num_heads": config.encoder_heads,
        "mlp_ratio": config.encoder_mlp_ratio,
        "init_values": 1.0 if config.encoder_layerscale else None,
        "ffn_layer": "mlp",
        "block_chunks": 0,
        "num_register_tokens": 0,
        "interpolate_antialias": False,
        "interpolate_offset": config.encoder_interpolate_offset,
    }


def upstream_init_kwargs(config: MapAnythingV1Config) -> Dict[str, Any]:
    """``MapAnything(...)`` constructor arguments for a V1 feature path of ``config``'s sizes.

    The image encoder entry names our local-DINOv2 encoder (see the module docstring); the
    intermediate-feature indices (used only by the heads) follow V1's 11 and 17 of 24 layers.
    """
    size = _standard_dinov2_size(config)
    depth = config.info_depth
    return {
        "name": "mapanything",
        "encoder_config": {
            "encoder_str": LOCAL_DINOV2_ENCODER,
            "name": f"dinov2_{size or 'custom'}",
            "data_norm_type": "dinov2",
            "patch_size": config.patch_size,
            "size": size or "large",
            "with_registers": False,
            "uses_torch_hub": False,
            "gradient_checkpointing": False,
            "vit_kwargs": None if size else _dinov2_vit_kwargs(config),
        },
        "info_sharing_config": {
            "model_type": "alternating_attention",
            "model_return_type": "intermediate_features",
            "custom_positional_encoding": None,
            "module_args": {
                "name": f"aat_{depth}_layers_ifr",
                "indices": [depth // 2 - 1, (3 * depth) // 4 - 1],
                "norm_intermediate": True,
                "depth": depth,
                "dim": config.info_dim,
                "num_heads": config.info_heads,
                "mlp_ratio": config.info_mlp_ratio,
                "distinguish_ref_and_non_ref_views": True,
                "gradient_checkpointing": False,
            },
        },
        "pred_head_config": copy.deepcopy(V1_PRED_HEAD_CONFIG),
        "geometric_input_config": _geometric_input_config(config),
        "pretrained_checkpoint_path": None,
        "use_register_tokens_from_encoder": False,
        "info_sharing_mlp_layer_str": "mlp",
    }


def _geometric_input_config(config: MapAnythingV1Config) -> Dict[str, Any]:
    def dense(name: str, channels: int) -> Dict[str, Any]:
        return {"name": name, "in_chans": channels, "encoder_str": "dense_rep_encoder",
                "apply_pe": False, "intermediate_dims": list(config.ray_intermediate_dims)}

    def global_rep(name: str, channels: int) -> Dict[str, Any]:
        return {"name": name, "in_chans": channels, "encoder_str": "global_rep_encoder",
                "intermediate_dims": list(config.global_intermediate_dims)}

    # The probabilities are the "images only" task's; the adapter switches the geometric inputs
    # on deterministically after construction, as MapAnything.infer does.
    return {
        "ray_dirs_encoder_config": dense("ray_dirs_encoder", 3),
        "depth_encoder_config": dense("depth_encoder", 1),
        "cam_rot_encoder_config": global_rep("cam_rot_quats_encoder", 4),
        "cam_trans_encoder_config": global_rep("cam_trans_encoder", 3),
        "scale_encoder_config": global_rep("scale_encoder", 1),
        "overall_prob": 0, "dropout_prob": 1, "ray_dirs_prob": 0, "depth_prob": 0,
        "cam_prob": 0, "sparse_depth_prob": 0, "sparsification_removal_percent": 0,
        "depth_scale_norm_all_prob": 0, "pose_scale_norm_all_prob": 0,
    }


def build_local_dinov2(repo: Path, size: str, vit_kwargs: Optional[Dict[str, Any]]):
    """A DINOv2 ViT from a local dinov2 checkout, randomly initialised (no download).

    Args:
        repo: the checkout (see :func:`resolve_dinov2_repo`).
        size: hub size name (``small`` ... ``giant``), used when ``vit_kwargs`` is None.
        vit_kwargs: explicit ``DinoVisionTransformer`` arguments for sizes the hub has no entry
            for; the model class and its block/attention classes are taken from the checkout.
    """
    hub_names = {"small": "dinov2_vits14", "base": "dinov2_vitb14", "large": "dinov2_vitl14",
                 "giant": "dinov2_vitg14"}
    if vit_kwargs is None:
        if size not in hub_names:
            raise ValueError(f"size={size!r}: expected one of {sorted(hub_names)}")
        return torch.hub.load(str(repo), hub_names[size], source="local", pretrained=False)
    with torch.device("meta"):  # only its classes are needed: allocate nothing
        reference = torch.hub.load(str(repo), "dinov2_vits14", source="local", pretrained=False)
    block = reference.blocks[0]
    block_fn = functools.partial(type(block), attn_class=type(block.attn))
    return type(reference)(block_fn=block_fn, **vit_kwargs)


@functools.lru_cache(maxsize=None)
def register_local_dinov2_encoder() -> type:
    """Define our DINOv2 encoder on top of uniception's and add it to its encoder table.

    It is uniception's ``DINOv2Encoder`` (same attributes, state-dict names and forward,
    including the SDPA attention it switches to) except that the ViT comes from
    :func:`build_local_dinov2` instead of ``torch.hub`` over the network, and that its width is
    read from the built ViT, so test-sized encoders work too.
    """
    upstream = import_upstream()
    dinov2_encoder = upstream["DINOv2Encoder"]
    vit_encoder_base = upstream["ViTEncoderBase"]

    class LocalDINOv2Encoder(dinov2_encoder):
        def __init__(self, name: str, dinov2_repo: str, data_norm_type: str = "dinov2",
                     patch_size: int = 14, size: str = "large", with_registers: bool = False,
                     gradient_checkpointing: bool = False,
                     vit_kwargs: Optional[Dict[str, Any]] = None) -> None:
            if with_registers or gradient_checkpointing:
                raise ValueError("the local DINOv2 encoder supports the V1 encoder only "
                                 "(with_registers=False, gradient_checkpointing=False)")
            # Skip DINOv2Encoder.__init__ (it calls torch.hub over the network) and set up the
            # same state it does: base attributes, the ViT as .model, no mask token, SDPA.
            vit_encoder_base.__init__(self, name=name, data_norm_type=data_norm_type,
                                      patch_size=patch_size, gradient_checkpointing=False)
            self.version = size
            self.with_registers = False
            self.norm_returned_features = True
            self.model = build_local_dinov2(Path(dinov2_repo), size, vit_kwargs)
            self.enc_embed_dim = self.model.embed_dim
            del self.model.mask_token  # unused for patch features (as upstream)
            self.enable_pytorch_native_sdpa()

    upstream["encoder_table"].setdefault(LOCAL_DINOV2_ENCODER, {
        "class": LocalDINOv2Encoder,
        "supported_models": ["DINOv2 from a local facebookresearch/dinov2 checkout (G2G)"],
    })
    return LocalDINOv2Encoder
