"""The identity of an encoder -- a backbone, its configuration and its weights -- in one place.

Tokens are comparable only between the same backbone, configuration AND weights: two trained
copies of one architecture give incompatible tokens. The identity is computed here once and has
two written forms:

* :func:`encoder_id` ``{"name", "config_hash"}``, stored in maps (``.g2gmap``) and in
  covisibility files (checkpoints, embeddings, samples) and compared with
  :func:`encoder_mismatch`; the hash covers the configuration and the weights' digest;
* :func:`backbone_identity` ``{backbone_name, backbone_config, weights_fingerprint}``, which
  keys the training feature cache (:mod:`g2g_model.training.cached_features`): the
  configuration is kept whole there.

Both use the same configuration (:func:`backbone_config`) and weights digest
(:func:`weights_digest`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Dict, Optional

from torch import nn


def backbone_config(backbone: nn.Module) -> dict:
    """The backbone's JSON-able configuration (``config_dict()``, else ``config.to_dict()``,
    else its sizes for modules that are not :class:`~g2g_model.backbones.base.Backbone`)."""
    if hasattr(backbone, "config_dict"):
        return backbone.config_dict()
    config = getattr(backbone, "config", None)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    return {"feature_dim": getattr(backbone, "feature_dim", None),
            "patch_size": getattr(backbone, "patch_size", None),
            "image_size": list(getattr(backbone, "image_size", ()) or ())}


def backbone_name(backbone: nn.Module) -> str:
    return str(getattr(backbone, "name", "") or type(backbone).__name__)


def weights_digest(module: nn.Module) -> str:
    """SHA-256 (hex) over the names and float32 values of ``state_dict()``, in name order."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def config_hash(config: Dict) -> str:
    """Stable short hash of a JSON-serialisable configuration."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def encoder_id(backbone: nn.Module) -> Dict[str, str]:
    """``{"name", "config_hash"}`` of a backbone (the form maps and covisibility files store)."""
    return {"name": backbone_name(backbone),
            "config_hash": config_hash({"config": backbone_config(backbone),
                                        "weights_sha256": weights_digest(backbone)})}


def encoder_mismatch(stored: Dict, expected: Dict) -> Optional[str]:
    """The first of ``name`` / ``config_hash`` on which two :func:`encoder_id` differ, or None
    when they are the same encoder."""
    return next((key for key in ("name", "config_hash")
                 if stored.get(key) != expected.get(key)), None)


def backbone_identity(backbone: nn.Module, fingerprint_weights: bool = True) -> Dict[str, str]:
    """``{backbone_name, backbone_config (canonical JSON), weights_fingerprint}`` of a backbone
    (the form the training feature cache hashes; ``fingerprint_weights=False``: no weights
    digest)."""
    return {"backbone_name": backbone_name(backbone),
            "backbone_config": json.dumps(backbone_config(backbone), sort_keys=True),
            "weights_fingerprint": weights_digest(backbone) if fingerprint_weights else ""}
