"""Build the modules of a training run from its config: backbone (+ weights), G2G modules,
stage-1 heads, and the combined module whose backbone is frozen by name."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

import torch
from torch import nn

from g2g_model.backbones.base import Backbone
from g2g_model.backbones.base import build_backbone as registry_build
from g2g_model.model.checkpoint import HEADER_KEY, load_checkpoint, load_checkpoint_into
from g2g_model.model.config import G2GConfig, preset
from g2g_model.model.g2g import G2GModel
from g2g_model.model.official import load_state_dict_strictly
from g2g_model.training.config import ModelConfig

logger = logging.getLogger(__name__)


def backbone_config_dict(config: ModelConfig) -> Optional[Dict[str, Any]]:
    """The backbone's JSON-able configuration (compact: the preset with its overrides)."""
    if config.backbone == "compact":
        from g2g_model.backbones.compact_config import compact_config

        return compact_config(config.backbone_preset, **config.backbone_overrides).to_dict()
    return dict(config.backbone_overrides) or None


def _is_g2g_checkpoint(path: str) -> bool:
    from safetensors import safe_open

    with safe_open(path, framework="pt") as handle:
        return HEADER_KEY in (handle.metadata() or {})


def load_backbone_weights(backbone: Backbone, path: str) -> None:
    """Weights from a compact stage-1 checkpoint, a G2G checkpoint with ``backbone.*`` tensors,
    or (external backbones) the backbone's own loader; always strict."""
    if not Path(path).is_file():
        raise ValueError(f"backbone weights {path!r} do not exist")
    if backbone.name == "compact":
        if _is_g2g_checkpoint(path):
            loaded = load_checkpoint(path)
            info = loaded.header.get("backbone") or {}
            if info.get("config") != backbone.config.to_dict():
                raise ValueError(f"{path}: backbone config in the checkpoint differs from the "
                                 f"configured one")
            if not loaded.backbone_state_dict:
                raise ValueError(f"{path}: checkpoint has no backbone weights")
            load_state_dict_strictly(backbone, loaded.backbone_state_dict, f"backbone of {path}")
            return
        from g2g_model.backbones.compact_checkpoint import load_compact_checkpoint

        # A stage-1 file trained at another input size is used at the configured one (its
        # patch position table resampled, logged); any other difference is refused.
        trained = load_compact_checkpoint(path, expected_config=backbone.config,
                                          allow_image_size=True)
        backbone.load_state_dict(trained.state_dict(), strict=True)
        return
    backbone.load_weights(path)


def build_backbone(config: ModelConfig) -> Backbone:
    backbone = registry_build(config.backbone, backbone_config_dict(config))
    if config.backbone_weights:
        load_backbone_weights(backbone, config.backbone_weights)
        logger.info("backbone weights from %s", config.backbone_weights)
    return backbone


def g2g_config(config: ModelConfig, feature_dim: int) -> G2GConfig:
    return preset(config.g2g_preset, **{"input_dim": feature_dim, **config.g2g_overrides})


class G2GWithBackbone(nn.Module):
    """``backbone`` + ``g2g`` in one module, so that freezing works by name (``backbone``)."""

    def __init__(self, backbone: Backbone, g2g: G2GModel) -> None:
        super().__init__()
        self.backbone = backbone
        self.g2g = g2g


def build_g2g(config: ModelConfig, backbone: Backbone) -> G2GModel:
    """The G2G modules; ``init_from`` loads a checkpoint of the same configuration strictly."""
    model = G2GModel(g2g_config(config, backbone.feature_dim))
    if config.init_from:
        header = load_checkpoint_into(model, config.init_from)
        logger.info("G2G modules initialised from %s (%s)", config.init_from,
                    header.get("training", {}).get("task"))
    return model


def check_checkpoint_matches(path: str, config: ModelConfig, feature_dim: int) -> None:
    """``ValueError`` naming every differing field when a checkpoint's config is another one."""
    expected = g2g_config(config, feature_dim)
    load_checkpoint(path, expected_config=expected, expected_backbone=config.backbone)


def trainable_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def strip_ddp(module: nn.Module) -> nn.Module:
    return module.module if hasattr(module, "module") else module


def state_to_cpu(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in state.items()}
