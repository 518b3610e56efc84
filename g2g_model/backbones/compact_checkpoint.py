"""Save and load compact backbone weights (.safetensors with the configuration in metadata).

Build, then load strictly: the model is built from the configuration stored in the file, and any
missing, unexpected or mis-shaped tensor is listed in a ``ValueError``. Nothing is downloaded.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Dict, Optional, Union

from safetensors.torch import save_file

from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.compact_config import CompactConfig
from g2g_model.tagged_safetensors import (
    SafetensorsReadError, read_safetensors, read_safetensors_metadata,
)

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "g2g_compact_backbone"
CHECKPOINT_VERSION = "1"


def save_compact_checkpoint(model: CompactBackbone, path: Union[str, Path],
                            extra_metadata: Optional[Dict[str, str]] = None) -> None:
    """Write ``model.state_dict()`` and its config (JSON) to ``path``."""
    metadata = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION,
                "backbone": "compact", "config": json.dumps(model.config.to_dict())}
    for key, value in (extra_metadata or {}).items():
        if key in metadata:
            raise ValueError(f"extra_metadata may not override {key!r}")
        metadata[key] = str(value)
    tensors = {key: value.detach().cpu().contiguous() for key, value in model.state_dict().items()}
    save_file(tensors, str(path), metadata=metadata)


def read_checkpoint_config(path: Union[str, Path]) -> CompactConfig:
    """The :class:`CompactConfig` stored in a checkpoint's metadata."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"compact checkpoint {path} does not exist")
    try:  # plain reads, no memory map (see g2g_model.tagged_safetensors)
        metadata = read_safetensors_metadata(path)
    except SafetensorsReadError as exc:
        raise ValueError(f"compact checkpoint {path} is corrupt or truncated ({exc})") from None
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a compact backbone checkpoint (format "
                         f"{metadata.get('format')!r}, expected {CHECKPOINT_FORMAT!r})")
    if metadata.get("format_version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unsupported format_version {metadata.get('format_version')!r}")
    return CompactConfig.from_dict(json.loads(metadata["config"]))


def load_compact_checkpoint(path: Union[str, Path],
                            expected_config: Optional[CompactConfig] = None,
                            allow_image_size: bool = False) -> CompactBackbone:
    """Build a :class:`CompactBackbone` from the file's config and load its weights strictly.

    Args:
        path: a file written by :func:`save_compact_checkpoint`.
        expected_config: if given, the stored config must equal it (``ValueError`` naming the
            differing fields otherwise).
        allow_image_size: accept an ``expected_config`` that differs in ``image_size`` only:
            the weights are loaded at the file's size, then the patch position table is
            resampled to the expected grid, as the forward pass does for other input sizes
            (logged; e.g. a stage-1 backbone trained at 112 px used at 224 px).
    """
    config = read_checkpoint_config(path)
    resize = False
    if expected_config is not None and expected_config != config:
        stored, wanted = config.to_dict(), expected_config.to_dict()
        keys = [key for key in sorted(stored) if stored[key] != wanted[key]]
        resize = allow_image_size and keys == ["image_size"]
        if not resize:
            diff = [f"{key} (file {stored[key]}, expected {wanted[key]})" for key in keys]
            raise ValueError(f"{path}: config differs: {', '.join(diff)}")
    model = CompactBackbone(config)
    try:
        _, state = read_safetensors(path)
    except (OSError, SafetensorsReadError) as exc:
        raise ValueError(f"compact checkpoint {path} is corrupt or truncated ({exc})") from None
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    mis_shaped = sorted(f"{key} (file {tuple(state[key].shape)}, model {tuple(own[key].shape)})"
                        for key in set(own) & set(state) if state[key].shape != own[key].shape)
    if missing or unexpected or mis_shaped:
        raise ValueError(f"{path}: checkpoint does not match the model: missing {missing}, "
                         f"unexpected {unexpected}, mis-shaped {mis_shaped}")
    model.load_state_dict(state, strict=True)
    logger.info("loaded compact backbone (%s) from %s", config.fingerprint(), path)
    if resize:
        resized = CompactBackbone(expected_config)
        state = dict(model.state_dict(), pos_embed=model.position_grid(
            *expected_config.grid_size).detach())
        resized.load_state_dict(state, strict=True)
        logger.info("%s: trained at %s px, patch positions resampled %s -> %s for %s px", path,
                    list(config.image_size), list(config.grid_size),
                    list(expected_config.grid_size), list(expected_config.image_size))
        return resized
    return model
