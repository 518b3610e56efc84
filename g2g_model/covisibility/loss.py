"""Covisibility training loss: symmetric dense BCE + regression of the two ratios.

::

    L = dense_weight * 0.5 * (BCE(dense_a, y_a) + BCE(dense_b, y_b))
        + scalar_weight * 0.5 * (l(r_ab, y_ab) + l(r_ba, y_ba))

with ``l`` the L1 or squared error. Dense labels may be soft (fraction of a cell covisible) and
at a finer resolution than the head; they are then area-averaged to the head's grid.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

import torch
import torch.nn.functional as F

SCALAR_LOSSES = ("l1", "mse")


@dataclasses.dataclass(frozen=True)
class CovisibilityLossConfig:
    dense_weight: float = 1.0
    scalar_weight: float = 1.0
    scalar_loss: str = "l1"

    def __post_init__(self):
        if self.scalar_loss not in SCALAR_LOSSES:
            raise ValueError(f"scalar_loss must be one of {SCALAR_LOSSES}, got "
                             f"{self.scalar_loss!r}")
        for name in ("dense_weight", "scalar_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def match_dense_labels(labels: torch.Tensor, dense_hw: Tuple[int, int]) -> torch.Tensor:
    """Bring ``labels [B, h, w]`` to the head's ``dense_hw`` (area average when finer).

    Raises ``ValueError`` when the labels are coarser than the head or not an integer multiple.
    """
    h, w = labels.shape[-2:]
    hd, wd = dense_hw
    if (h, w) == (hd, wd):
        return labels
    if h % hd or w % wd:
        raise ValueError(
            f"dense labels are {h} x {w}, which is not an integer multiple of the dense head's "
            f"{hd} x {wd} grid"
        )
    return F.avg_pool2d(labels[:, None].float(), (h // hd, w // wd))[:, 0]


def covisibility_loss(
    out: Dict[str, torch.Tensor], batch: Dict[str, torch.Tensor],
    config: CovisibilityLossConfig = CovisibilityLossConfig(),
) -> Tuple[torch.Tensor, Dict[str, float]]:
    """Loss of one batch.

    Args:
        out: decoder output with ``dense_a/dense_b [B, Hd, Wd]`` logits and ``r_ab/r_ba [B]``.
        batch: ``dense_a/dense_b [B, h, w]`` labels in [0, 1], ``r_ab/r_ba [B]``.
    Returns:
        total loss (scalar tensor) and its parts as floats (``dense``, ``scalar``).
    """
    hw = tuple(out["dense_a"].shape[-2:])
    dense = 0.5 * sum(
        F.binary_cross_entropy_with_logits(out[k].float(), match_dense_labels(batch[k], hw))
        for k in ("dense_a", "dense_b")
    )
    reg = F.l1_loss if config.scalar_loss == "l1" else F.mse_loss
    scalar = 0.5 * (reg(out["r_ab"].float(), batch["r_ab"]) +
                    reg(out["r_ba"].float(), batch["r_ba"]))
    total = config.dense_weight * dense + config.scalar_weight * scalar
    return total, {"dense": float(dense.detach()), "scalar": float(scalar.detach())}
