"""Encode a group once, reuse its backbone features: an in-memory LRU plus .safetensors files.

The backbone is frozen (ARCHITECTURE §2), so a group's features depend only on its content and
on the backbone. Map keyframe windows are encoded many times during relocalisation; the cache
encodes them once.

Keys. A content key is a BLAKE2b digest over the backbone identity, the autocast state, and the
dtype, shape and bytes of the group's images, intrinsics and camera-to-anchor poses. The
backbone identity (:func:`g2g_model.backbones.identity.backbone_identity`, the one
implementation of an encoder's identity) is its registry name, its configuration and, by
default, a digest of its weights, so two differently trained backbones of the same configuration
never share entries. Hashing the weights reads every parameter once at construction
(milliseconds for ``compact``, a few seconds for ViT-L); pass ``fingerprint_weights=False`` to
skip it and take responsibility for not mixing weights.

Files. :meth:`FeatureCache.save` writes one tensor per key to a .safetensors file with the
backbone identity in its metadata; :meth:`FeatureCache.load` refuses (``ValueError`` naming the
field) a file written by another backbone, configuration or weights.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from g2g_model.backbones.identity import backbone_identity, weights_digest

__all__ = ["FeatureCache", "backbone_identity", "check_identity", "content_key",
           "read_feature_file", "weights_digest", "write_feature_file"]
logger = logging.getLogger(__name__)

FILE_FORMAT = "g2g_feature_cache"
FILE_FORMAT_VERSION = "1"
IDENTITY_FIELDS = ("backbone_name", "backbone_config", "weights_fingerprint")


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes()


def _autocast_tag(device_type: str) -> str:
    if torch.is_autocast_enabled(device_type):
        return f"autocast:{torch.get_autocast_dtype(device_type)}"
    return "autocast:off"


def content_key(
    images: torch.Tensor,
    intrinsics: torch.Tensor,
    cam_to_anchor: torch.Tensor,
    identity: Dict[str, str],
    autocast_tag: str = "autocast:off",
) -> str:
    """40-hex-char key of ONE group: ``images [N,3,H,W]``, ``intrinsics [N,3,3]``, ``[N,4,4]``."""
    digest = hashlib.blake2b(digest_size=20)
    for field in IDENTITY_FIELDS:
        digest.update(f"{field}={identity[field]};".encode())
    digest.update(autocast_tag.encode())
    for label, tensor in (("images", images), ("K", intrinsics), ("T", cam_to_anchor)):
        digest.update(f"|{label}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(_tensor_bytes(tensor))
    return digest.hexdigest()


def _config_differences(file_json: str, current_json: str) -> str:
    try:
        file_cfg, current_cfg = json.loads(file_json), json.loads(current_json)
    except json.JSONDecodeError:
        return f"file {file_json!r}, current {current_json!r}"
    if not isinstance(file_cfg, dict) or not isinstance(current_cfg, dict):
        return f"file {file_cfg!r}, current {current_cfg!r}"
    missing = object()
    parts = []
    for field in sorted(set(file_cfg) | set(current_cfg)):
        a, b = file_cfg.get(field, missing), current_cfg.get(field, missing)
        if a != b:
            a = "<absent>" if a is missing else a
            b = "<absent>" if b is missing else b
            parts.append(f"{field} (file {a}, current {b})")
    return ", ".join(parts)


def check_identity(file_identity: Dict[str, str], expected: Dict[str, str], source: str) -> None:
    """Raise ``ValueError`` naming the first identity field that differs."""
    if file_identity["backbone_name"] != expected["backbone_name"]:
        raise ValueError(
            f"{source}: features were written by backbone {file_identity['backbone_name']!r}, "
            f"but the current backbone is {expected['backbone_name']!r}"
        )
    if file_identity["backbone_config"] != expected["backbone_config"]:
        diff = _config_differences(file_identity["backbone_config"], expected["backbone_config"])
        raise ValueError(f"{source}: backbone_config of {expected['backbone_name']!r} differs: "
                         f"{diff}")
    if file_identity["weights_fingerprint"] != expected["weights_fingerprint"]:
        raise ValueError(
            f"{source}: weights_fingerprint differs (file {file_identity['weights_fingerprint']!r}"
            f", current {expected['weights_fingerprint']!r}): same configuration, other weights"
        )


def write_feature_file(path: Union[str, Path], features: Dict[str, torch.Tensor],
                       identity: Dict[str, str]) -> None:
    """Write ``{key: [N, P, D]}`` tensors and the backbone identity to a .safetensors file."""
    metadata = {"format": FILE_FORMAT, "format_version": FILE_FORMAT_VERSION}
    metadata.update({field: identity[field] for field in IDENTITY_FIELDS})
    tensors = {key: value.detach().cpu().contiguous() for key, value in features.items()}
    save_file(tensors, str(path), metadata=metadata)


def read_feature_file(path: Union[str, Path]) -> Tuple[Dict[str, torch.Tensor], Dict[str, str]]:
    """Read a file written by :func:`write_feature_file`: ``(features, identity)``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"feature cache file {path} does not exist")
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        if metadata.get("format") != FILE_FORMAT:
            raise ValueError(f"{path} is not a G2G feature cache (format "
                             f"{metadata.get('format')!r}, expected {FILE_FORMAT!r})")
        if metadata.get("format_version") != FILE_FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported format_version "
                             f"{metadata.get('format_version')!r}, expected {FILE_FORMAT_VERSION}")
        missing = [field for field in IDENTITY_FIELDS if field not in metadata]
        if missing:
            raise ValueError(f"{path}: metadata lacks {missing}")
        features = {key: handle.get_tensor(key) for key in handle.keys()}
    return features, {field: metadata[field] for field in IDENTITY_FIELDS}


class FeatureCache:
    """LRU cache of per-group backbone features in front of a (frozen) backbone.

    Args:
        backbone: the encoder; called as ``backbone(images, intrinsics, cam_to_anchor)`` under
            ``torch.no_grad`` (not inference mode, so cached tensors can feed trainable modules).
        max_entries: groups kept in memory; the least recently used is evicted first.
        fingerprint_weights: include a hash of the weights in every key (see module docstring).
    """

    def __init__(self, backbone: nn.Module, max_entries: int = 64,
                 fingerprint_weights: bool = True) -> None:
        if max_entries <= 0:
            raise ValueError(f"max_entries must be positive, got {max_entries}")
        self.backbone = backbone
        self.max_entries = max_entries
        self.identity = backbone_identity(backbone, fingerprint_weights)
        self._entries: "OrderedDict[str, torch.Tensor]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def keys(self) -> List[str]:
        """Keys from least to most recently used."""
        return list(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def group_key(self, images: torch.Tensor, intrinsics: torch.Tensor,
                  cam_to_anchor: torch.Tensor) -> str:
        """Key of one group (``[N,3,H,W]``, ``[N,3,3]``, ``[N,4,4]``) in the current autocast."""
        return content_key(images, intrinsics, cam_to_anchor, self.identity,
                           _autocast_tag(images.device.type))

    def get(self, key: str) -> Optional[torch.Tensor]:
        """Cached ``[N, P, D]`` or None; a hit marks the entry most recently used."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: str, features: torch.Tensor) -> None:
        self._entries[key] = features.detach()
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            evicted, _ = self._entries.popitem(last=False)
            logger.debug("feature cache full (%d), evicted %s", self.max_entries, evicted)

    def encode(self, images: torch.Tensor, intrinsics: torch.Tensor,
               cam_to_anchor: torch.Tensor) -> torch.Tensor:
        """Features ``[B, N, P, D]`` for groups ``[B, N, ...]``; only cache misses are encoded.

        Misses are encoded together in one backbone call. Hits and misses are counted per group.
        """
        if images.dim() != 5:
            raise ValueError(f"images must be [B, N, 3, H, W], got {tuple(images.shape)}")
        keys = [self.group_key(images[b], intrinsics[b], cam_to_anchor[b])
                for b in range(images.shape[0])]
        found = {}
        for b, key in enumerate(keys):
            value = self.get(key)
            if value is not None:
                found[b] = value
        self.hits += len(found)
        missing = [b for b in range(len(keys)) if b not in found]
        self.misses += len(missing)
        if missing:
            index = torch.tensor(missing, device=images.device)
            with torch.no_grad():
                encoded = self.backbone(images.index_select(0, index),
                                        intrinsics.index_select(0, index),
                                        cam_to_anchor.index_select(0, index))
            for row, b in enumerate(missing):
                found[b] = encoded[row].detach()
                self.put(keys[b], found[b])
        return torch.stack([found[b] for b in range(len(keys))])

    def save(self, path: Union[str, Path], keys: Optional[Iterable[str]] = None) -> int:
        """Write the cached entries (or only ``keys``) to a .safetensors file; return the count."""
        selected = list(self._entries) if keys is None else list(keys)
        unknown = [key for key in selected if key not in self._entries]
        if unknown:
            raise ValueError(f"keys not in the cache: {unknown[:5]}")
        write_feature_file(path, {key: self._entries[key] for key in selected}, self.identity)
        logger.info("saved %d cached feature groups to %s", len(selected), path)
        return len(selected)

    def load(self, path: Union[str, Path], device: Optional[torch.device] = None) -> int:
        """Add the entries of a file written for this backbone; returns how many were added.

        Raises:
            ValueError: the file is not a feature cache, or its backbone name, configuration or
                weights fingerprint differs from this cache's backbone (the message names it).
        """
        features, file_identity = read_feature_file(path)
        check_identity(file_identity, self.identity, str(path))
        for key, value in features.items():
            self.put(key, value if device is None else value.to(device))
        logger.info("loaded %d cached feature groups from %s", len(features), path)
        return len(features)
