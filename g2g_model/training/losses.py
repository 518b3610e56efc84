"""G2G multi-frame pose loss (ARCHITECTURE §2, "Loss").

Per target X (A1..A_{NA-1}, B0..B_{NB-1}), with prediction ``T_hat_{A0<-X}`` and ground truth
``T_{A0<-X}``::

    l_X = rot_weight * d_R(R_hat, R) + trans_weight * ||t_hat - t||_1

with ``rot_weight = 5``, ``trans_weight = 1/3`` (so the translation term is the mean absolute
error over x, y, z) and ``d_R`` the chordal distance ``mean(|R_hat^T R - I|)`` over the 9 entries
(``"chordal_l1"``, default) or ``||R_hat^T R - I||_F^2 / 9`` (``"chordal_frobenius"``; unlike
the L1 form it grows monotonically over 0..180 deg). The total is::

    L = weight_a * mean_{i, batch} l_{A_i} + weight_b * mean_{j, batch} l_{B_j}

With ``length_weight > 0`` each B target adds ``length_weight * |log(|t_hat| + f) - log(|t| +
f)|`` (``f`` = :data:`LENGTH_FLOOR_M`): an error in the length of the translation on its own,
relative to the length. The L1 term's optimum for a model unsure of the direction of travel is
a short translation (each axis's median); this term is indifferent to the direction.

The total is clamped at ``clamp_max`` (10) so that one degenerate prediction cannot blow up a
step (the gradient is zero above the clamp). The B0 rotation and translation terms are also
returned on their own: the curriculum gate watches them.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import torch

ROTATION_DISTANCES = ("chordal_l1", "chordal_frobenius")
# Lengths below this (m) count as about equal: standing still does not make the log term blow up.
LENGTH_FLOOR_M = 0.05


@dataclasses.dataclass(frozen=True)
class LossConfig:
    """Loss weights. ``clamp_max <= 0`` or ``None`` disables the clamp."""

    rot_weight: float = 5.0
    trans_weight: float = 1.0 / 3.0
    weight_a: float = 0.5
    weight_b: float = 1.0
    rotation_distance: str = "chordal_l1"
    clamp_max: Optional[float] = 10.0
    length_weight: float = 0.0

    def __post_init__(self):
        if self.rotation_distance not in ROTATION_DISTANCES:
            raise ValueError(
                f"rotation_distance must be one of {ROTATION_DISTANCES}, "
                f"got {self.rotation_distance!r}"
            )
        for name in ("rot_weight", "trans_weight", "weight_a", "weight_b", "length_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


LOSS_PRESETS: Dict[str, LossConfig] = {
    # ARCHITECTURE §2.
    "g2g": LossConfig(),
    # The released code's default intra-group weight (0.3) and ||.||_1 mean translation term.
    "g2g_official": LossConfig(weight_a=0.3),
    "g2g_frobenius": LossConfig(rotation_distance="chordal_frobenius"),
    # The length of B's translations weighed on its own (module docstring).
    "g2g_length": LossConfig(length_weight=1.0),
}


def rotation_distance(
    r_hat: torch.Tensor, r: torch.Tensor, kind: str = "chordal_l1"
) -> torch.Tensor:
    """Chordal rotation distance per matrix.

    Args:
        r_hat, r: ``[..., 3, 3]`` rotation matrices.
        kind: ``"chordal_l1"`` (``mean |R_hat^T R - I|``) or ``"chordal_frobenius"``
            (``||R_hat^T R - I||_F^2 / 9``).
    Returns:
        ``[...]`` distances (0 for equal rotations; the L1 form is 4/9 at 90 deg about an axis).
    """
    if kind not in ROTATION_DISTANCES:
        raise ValueError(f"kind must be one of {ROTATION_DISTANCES}, got {kind!r}")
    eye = torch.eye(3, dtype=r_hat.dtype, device=r_hat.device)
    diff = r_hat.transpose(-1, -2) @ r - eye
    if kind == "chordal_l1":
        return diff.abs().mean(dim=(-1, -2))
    return diff.pow(2).mean(dim=(-1, -2))


def translation_distance(t_hat: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``||t_hat - t||_1`` per vector: ``[..., 3] -> [...]``."""
    return (t_hat - t).abs().sum(dim=-1)


def length_distance(t_hat: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``|log(|t_hat| + f) - log(|t| + f)|`` per vector (``f`` = :data:`LENGTH_FLOOR_M`):
    ``[..., 3] -> [...]``."""
    return (torch.log(t_hat.norm(dim=-1) + LENGTH_FLOOR_M)
            - torch.log(t.norm(dim=-1) + LENGTH_FLOOR_M)).abs()


def g2g_loss(
    rot_a: torch.Tensor,
    trans_a: torch.Tensor,
    rot_b: torch.Tensor,
    trans_b: torch.Tensor,
    gt_a: torch.Tensor,
    gt_b: torch.Tensor,
    config: LossConfig = LossConfig(),
) -> Dict[str, torch.Tensor]:
    """Multi-frame pose loss with its components.

    Args:
        rot_a: ``[B, NA-1, 3, 3]`` predicted rotations of A1..; ``NA-1`` may be 0.
        trans_a: ``[B, NA-1, 3]``.
        rot_b: ``[B, NB, 3, 3]`` predicted rotations of B0.., ``NB >= 1``.
        trans_b: ``[B, NB, 3]``.
        gt_a: ``[B, NA, 4, 4]`` true ``T_{A0<-Ai}`` including A0 (dropped), or ``[B, NA-1, 4, 4]``.
        gt_b: ``[B, NB, 4, 4]`` true ``T_{A0<-Bj}``.
        config: weights (:data:`LOSS_PRESETS`).
    Returns:
        Scalars: ``loss`` (clamped total), ``loss_unclamped``, ``loss_a``, ``loss_b``
        (weighted per-group means before the group weights), ``rot_a``, ``trans_a``, ``rot_b``,
        ``trans_b``, ``rot_b0``, ``trans_b0`` (unweighted means of ``d_R`` and of
        ``||t_hat - t||_1 / 3``, i.e. mean absolute translation error per axis, in metres).
    """
    _check(rot_b, trans_b, gt_b, "b")
    if gt_a.shape[1] == rot_a.shape[1] + 1:
        gt_a = gt_a[:, 1:]
    _check(rot_a, trans_a, gt_a, "a", allow_empty=True)
    if rot_a.shape[0] != rot_b.shape[0]:
        raise ValueError(f"batch sizes differ: rot_a {rot_a.shape[0]}, rot_b {rot_b.shape[0]}")
    kind = config.rotation_distance

    d_rot_b = rotation_distance(rot_b, gt_b[..., :3, :3], kind)  # [B, NB]
    d_trans_b = translation_distance(trans_b, gt_b[..., :3, 3])  # [B, NB]
    per_b = config.rot_weight * d_rot_b + config.trans_weight * d_trans_b
    if config.length_weight > 0:
        per_b = per_b + config.length_weight * length_distance(trans_b, gt_b[..., :3, 3])
    loss_b = per_b.mean()
    zero = rot_b.new_zeros(())
    if rot_a.shape[1] > 0:
        d_rot_a = rotation_distance(rot_a, gt_a[..., :3, :3], kind)
        d_trans_a = translation_distance(trans_a, gt_a[..., :3, 3])
        loss_a = (config.rot_weight * d_rot_a + config.trans_weight * d_trans_a).mean()
        rot_a_mean, trans_a_mean = d_rot_a.mean(), d_trans_a.mean() / 3.0
    else:  # a one-frame group A has no intra-group targets
        loss_a, rot_a_mean, trans_a_mean = zero, zero, zero
    total = config.weight_a * loss_a + config.weight_b * loss_b
    clamped = total
    if config.clamp_max is not None and config.clamp_max > 0:
        clamped = torch.clamp(total, max=config.clamp_max)
    return {
        "loss": clamped,
        "loss_unclamped": total,
        "loss_a": loss_a,
        "loss_b": loss_b,
        "rot_a": rot_a_mean,
        "trans_a": trans_a_mean,
        "rot_b": d_rot_b.mean(),
        "trans_b": d_trans_b.mean() / 3.0,
        "rot_b0": d_rot_b[:, 0].mean(),
        "trans_b0": d_trans_b[:, 0].mean() / 3.0,
    }


def _check(rot, trans, gt, group, allow_empty=False):
    if rot.ndim != 4 or rot.shape[-2:] != (3, 3):
        raise ValueError(f"rot_{group} must be [B,N,3,3], got {tuple(rot.shape)}")
    if trans.shape != rot.shape[:2] + (3,):
        raise ValueError(f"trans_{group} must be {tuple(rot.shape[:2]) + (3,)}, "
                         f"got {tuple(trans.shape)}")
    if gt.shape != rot.shape[:2] + (4, 4):
        raise ValueError(f"gt_{group} must be {tuple(rot.shape[:2]) + (4, 4)}, "
                         f"got {tuple(gt.shape)}")
    if not allow_empty and rot.shape[1] == 0:
        raise ValueError(f"group {group} needs at least one target frame")
