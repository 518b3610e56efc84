"""The trainable module of each ``g2g-train`` task, with its loss, and the per-step generator.

``PairTrainModule``: the G2G modules on frozen features (tasks ``reloc`` and ``rig``);
``PretrainModule``: the compact backbone with its stage-1 heads (task ``pretrain``).
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import torch
from torch import nn

from g2g_model.training.losses import g2g_loss
from g2g_model.training.sampler import CurriculumSampler


def step_generator(seed: int, rank: int, step: int) -> torch.Generator:
    """The generator of one step on one rank (stateless: resume needs no RNG state)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + rank * 7_919 + step) % (2 ** 62))


class PairTrainModule(nn.Module):
    """Trainable G2G modules + loss: ``forward(features_a, features_b, gt_a, gt_b)``."""

    def __init__(self, g2g: nn.Module, loss_config) -> None:
        super().__init__()
        self.g2g = g2g
        self.loss_config = loss_config

    def forward(self, features_a, features_b, gt_a, gt_b) -> Dict[str, torch.Tensor]:
        out = self.g2g(features_a, features_b)
        return g2g_loss(out["rotation_matrices_a"], out["translations_a"],
                        out["rotation_matrices_b"], out["translations_b"], gt_a, gt_b,
                        self.loss_config)


class PretrainModule(nn.Module):
    """Compact backbone + stage-1 heads: ``forward(batch, generator)`` -> losses."""

    def __init__(self, backbone: nn.Module, heads: nn.Module, pretrain_config) -> None:
        super().__init__()
        self.backbone = backbone
        self.heads = heads
        self.pretrain_config = pretrain_config

    def forward(self, batch, generator) -> Dict[str, torch.Tensor]:
        from g2g_model.training.compact_pretrain import pretrain_step

        losses = pretrain_step(self.backbone, self.heads, batch, self.pretrain_config, generator)
        losses["loss"] = losses.pop("total")
        return losses


def pretrain_task(cfg, backbone: nn.Module, store, rank: int, world_size: int
                  ) -> Tuple["PretrainModule", object, Dict[str, CurriculumSampler]]:
    """Task ``pretrain``: the module (compact backbone + stage-1 heads), the group dataset and
    one sampler per group kind (``win``, ``rig``) that has groups."""
    from g2g_model.training.compact_pretrain import CompactPretrainHeads, PretrainConfig
    from g2g_model.training.pretrain_dataset import PretrainDataset

    if cfg.model.backbone != "compact":
        raise ValueError(f"task pretrain trains the compact backbone, not "
                         f"{cfg.model.backbone!r}")
    heads = CompactPretrainHeads.for_backbone(backbone)
    module = PretrainModule(backbone, heads, PretrainConfig())
    dataset = PretrainDataset(store, cfg.data.group_size, cfg.data.frame_stride)
    samplers = {k: CurriculumSampler(np.ones(n), cfg.optim.batch_size, rank, world_size,
                                     cfg.seed + i)
                for i, (k, n) in enumerate(dataset.sizes().items()) if n}
    return module, dataset, samplers
