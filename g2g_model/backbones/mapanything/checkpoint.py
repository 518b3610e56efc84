"""Load MapAnything V1 weights from a local checkpoint into our feature-path module, strictly.

Accepted layouts (all offline; nothing is downloaded):
    * a directory with ``model.safetensors`` and, optionally, ``config.json`` (the Hugging Face
      layout of ``map-anything-v1`` / ``map-anything-apache-v1``: the MapAnything constructor
      arguments);
    * a single ``.safetensors`` file;
    * a single ``.pth`` / ``.pt`` / ``.bin`` file (a state dict, possibly under ``"model"`` or
      ``"state_dict"``), read with ``torch.load(weights_only=True)``.

Strictness: every feature-path key must be present with its exact shape. The checkpoint may
also hold keys we deliberately do not use, skipped *by name*: the depth and depth-scale
encoders (with no depth input their contribution is multiplied by zero; their exact key names
are derived from the config) and the prediction heads (``dense_head``, ``dpt_feature_head``,
``dpt_regressor_head``, ``pose_head``, ``scale_head``). Anything else is an error that lists
the offending keys.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import torch

from .config import V1_1_WIDTH, MapAnythingV1Config, giant_refusal, preset
from .geometric_encoders import DenseRepresentationEncoder, GlobalRepresentationEncoder

logger = logging.getLogger(__name__)

HEAD_PREFIXES = ("dense_head.", "dpt_feature_head.", "dpt_regressor_head.", "pose_head.",
                 "scale_head.")
WEIGHT_FILE_NAMES = ("model.safetensors", "pytorch_model.bin", "model.pth")
TORCH_SUFFIXES = (".pth", ".pt", ".bin")


def depth_input_keys(config: MapAnythingV1Config) -> List[str]:
    """Exact state-dict names of the depth and depth-scale encoders for ``config``.

    They have the ray encoder's layout with one input channel and the global-encoder layout with
    one input, so the names are read off those modules built on the meta device.
    """
    with torch.device("meta"):
        depth = DenseRepresentationEncoder(1, config.patch_size, config.ray_intermediate_dims,
                                           config.encoder_dim, config.norm_eps)
        depth_scale = GlobalRepresentationEncoder(1, config.global_intermediate_dims,
                                                  config.encoder_dim, config.norm_eps)
    return ([f"depth_encoder.{k}" for k in depth.state_dict()]
            + [f"depth_scale_encoder.{k}" for k in depth_scale.state_dict()])


def resolve_checkpoint(path: Union[str, os.PathLike]) -> Tuple[Path, Optional[Path]]:
    """Return ``(weights_file, config_json_or_None)`` for a checkpoint path.

    Raises:
        FileNotFoundError: the path or the weights file inside the directory does not exist.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"MapAnything V1 checkpoint not found: {path}")
    if path.is_dir():
        for name in WEIGHT_FILE_NAMES:
            if (path / name).is_file():
                config = path / "config.json"
                return path / name, (config if config.is_file() else None)
        raise FileNotFoundError(
            f"no weights file in checkpoint directory {path}; expected one of {WEIGHT_FILE_NAMES}"
        )
    return path, None


def read_state_dict(weights: Path) -> Dict[str, torch.Tensor]:
    """Read a safetensors or torch weights file onto the CPU.

    Raises:
        ValueError: the file is truncated, corrupt or of an unknown type (the message names it).
    """
    if weights.suffix == ".safetensors":
        from g2g_model.tagged_safetensors import SafetensorsReadError, read_safetensors

        try:  # read into memory, never memory-mapped: a truncated mapped file gives SIGBUS
            return read_safetensors(weights)[1]
        except (SafetensorsReadError, OSError, RuntimeError) as exc:
            raise ValueError(
                f"cannot read safetensors checkpoint {weights} (truncated or corrupt?): {exc}"
            ) from exc
    if weights.suffix in TORCH_SUFFIXES:
        try:
            loaded = torch.load(str(weights), map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises several unrelated types for a bad archive
            raise ValueError(
                f"cannot read torch checkpoint {weights} (truncated or corrupt?): {exc}"
            ) from exc
        for wrapper in ("model", "state_dict"):
            if isinstance(loaded, dict) and isinstance(loaded.get(wrapper), dict):
                loaded = loaded[wrapper]
        if not isinstance(loaded, dict) or not all(
                isinstance(v, torch.Tensor) for v in loaded.values()):
            raise ValueError(f"{weights} does not hold a state dict of tensors")
        return loaded
    raise ValueError(
        f"unknown checkpoint file type {weights.suffix!r} for {weights}; expected .safetensors "
        f"or one of {TORCH_SUFFIXES}"
    )


def read_config(config_json: Path) -> MapAnythingV1Config:
    """Parse a checkpoint's ``config.json`` (MapAnything constructor arguments or our fields)."""
    try:
        values = json.loads(config_json.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot parse checkpoint config {config_json}: {exc}") from exc
    if not isinstance(values, dict):
        raise ValueError(f"checkpoint config {config_json} is not a JSON object")
    if "encoder_config" in values:
        return MapAnythingV1Config.from_init_kwargs(values)
    return MapAnythingV1Config.from_dict(values)


def check_width(state_dict: Dict[str, torch.Tensor], source: str) -> None:
    """Reject a V1.1 (width-1536) checkpoint before building anything."""
    for key, axis in (("encoder.model.cls_token", -1), ("info_sharing.proj_embed.weight", 0),
                      ("info_sharing.norm.weight", 0)):
        tensor = state_dict.get(key)
        if tensor is not None and tensor.dim() and tensor.shape[axis] == V1_1_WIDTH:
            raise ValueError(giant_refusal(f"{source}: {key} has width {V1_1_WIDTH}"))


# MapAnything.forward draws, per sample, which geometric inputs it uses, with the
# probabilities of the checkpoint's geometric_input_config (its training values unless
# MapAnything.infer() set them). mapanything_v1 always uses rays, poses and the metric scale:
# the draws with these values.
ALWAYS_GEOMETRY = {"overall_prob": 1.0, "dropout_prob": 0.0, "ray_dirs_prob": 1.0,
                   "cam_prob": 1.0, "pose_scale_norm_all_prob": 0.0}


def geometric_input_note(config: MapAnythingV1Config, source: str) -> Optional[str]:
    """A warning when the checkpoint's ``config.json`` would make ``MapAnything.forward`` (which
    the official G2G code calls directly) drop geometric inputs at random, or always; None
    when it agrees with mapanything_v1, which always feeds rays, poses and the metric scale."""
    geometry = config.extra.get("geometric_input_config") or {}
    differing = {k: geometry[k] for k, v in ALWAYS_GEOMETRY.items()
                 if k in geometry and float(geometry[k]) != v}
    if not differing:
        return None
    return (f"{source}: geometric_input_config {differing} differs from {ALWAYS_GEOMETRY}: "
            "MapAnything.forward (which the official G2G code calls) then uses rays and poses "
            "only in some draws or never; mapanything_v1 always uses them (docs/"
            "PAPER_MODEL.md, 'Feature path')")


def select_feature_path(
    expected: Dict[str, Tuple[int, ...]],
    state_dict: Dict[str, torch.Tensor],
    config: MapAnythingV1Config,
    source: str = "checkpoint",
) -> Dict[str, torch.Tensor]:
    """Keep the feature-path tensors of ``state_dict``, check them against ``expected``.

    Args:
        expected: our module's ``{key: shape}``.
        state_dict: the checkpoint's tensors (may be on the meta device).
        config: decides the exact names of the skipped depth-encoder keys.
        source: name used in messages.

    Raises:
        ValueError: listing missing keys, unexpected keys, and shape mismatches.
    """
    ignored_names = set(depth_input_keys(config))
    ignored = [k for k in state_dict if k in ignored_names or k.startswith(HEAD_PREFIXES)]
    unexpected = sorted(k for k in state_dict if k not in expected and k not in ignored)
    missing = sorted(k for k in expected if k not in state_dict)
    mismatched = sorted(
        f"{k}: checkpoint {list(state_dict[k].shape)} vs model {list(shape)}"
        for k, shape in expected.items()
        if k in state_dict and tuple(state_dict[k].shape) != tuple(shape)
    )
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing keys: {missing}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected keys: {unexpected}")
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatches: {mismatched}")
    if problems:
        raise ValueError(f"{source} does not match the MapAnything V1 feature path: "
                         + "; ".join(problems))
    if ignored:
        logger.info("%s: skipped %d depth-encoder/head keys by name", source, len(ignored))
    return {k: state_dict[k] for k in expected}


def load_mapanything_v1(
    path: Union[str, os.PathLike],
    config: Union[MapAnythingV1Config, str, None] = None,
    autocast_dtype: Optional[torch.dtype] = None,
    dtype: torch.dtype = torch.float32,
):
    """Build the ``mapanything_v1`` backbone and load a local checkpoint strictly.

    Args:
        path: checkpoint directory or file (see the module docstring).
        config: sizes; default: the directory's ``config.json`` if any, else preset ``"full"``.
        autocast_dtype: passed to the backbone (e.g. ``torch.bfloat16`` for CPU autocast).
        dtype: parameter dtype after loading (float32 by default).

    Returns:
        A :class:`~g2g_model.backbones.mapanything_v1.MapAnythingV1Backbone` in eval mode with
        ``requires_grad`` off (the G2G backbone is frozen).

    Raises:
        FileNotFoundError: missing path or weights file.
        ValueError: truncated/corrupt file, V1.1 (width 1536) checkpoint, key or shape mismatch.
    """
    from ..mapanything_v1 import MapAnythingV1Backbone  # the backbone module imports this one

    weights, config_json = resolve_checkpoint(path)
    if isinstance(config, str):
        config = preset(config)
    elif config is None:
        config = read_config(config_json) if config_json is not None else preset("full")
    note = geometric_input_note(config, str(config_json or weights))
    if note:
        logger.warning(note)
    state_dict = read_state_dict(weights)
    check_width(state_dict, str(weights))
    # Build without allocating (the full model is 508M parameters), then adopt the checkpoint's
    # tensors; a strict key check first guarantees nothing is left on the meta device.
    with torch.device("meta"):
        model = MapAnythingV1Backbone(config, autocast_dtype=autocast_dtype)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    selected = select_feature_path(expected, state_dict, config, source=str(weights))
    selected = {k: v.to(dtype) for k, v in selected.items()}
    model.load_state_dict(selected, strict=True, assign=True)
    # Non-persistent buffers (image mean/std) are not in any checkpoint: re-create them.
    model.image_mean = torch.tensor(config.image_mean, dtype=torch.float32).view(3, 1, 1)
    model.image_std = torch.tensor(config.image_std, dtype=torch.float32).view(3, 1, 1)
    model.eval().requires_grad_(False)
    logger.info("loaded MapAnything V1 feature path from %s (%d tensors)", weights, len(selected))
    return model
