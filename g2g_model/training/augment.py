"""Extrinsic-noise augmentation of the INPUT poses (ARCHITECTURE §2, "Training recipe").

Each non-anchor input pose ``T_{G0<-Gi}`` (i >= 1) of both groups is right-multiplied by a random
SE(3) perturbation ``dT = [R(axis, angle) | dt]``: the axis is uniform on the sphere, the angle
~ N(0, rot_std_deg), ``dt`` ~ N(0, trans_std_m) per axis. Right multiplication perturbs the camera
in its own frame, as the released code does. Frame 0 (the anchor) stays exactly the identity, and
the training targets are never touched: callers keep the clean poses for the loss.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Tuple

import torch


@dataclasses.dataclass(frozen=True)
class ExtrinsicNoiseConfig:
    """Noise magnitudes; zero disables that component."""

    rot_std_deg: float = 1.5
    trans_std_m: float = 0.1

    def __post_init__(self):
        if self.rot_std_deg < 0:
            raise ValueError(f"rot_std_deg must be >= 0, got {self.rot_std_deg}")
        if self.trans_std_m < 0:
            raise ValueError(f"trans_std_m must be >= 0, got {self.trans_std_m}")


NOISE_PRESETS: Dict[str, ExtrinsicNoiseConfig] = {
    "g2g": ExtrinsicNoiseConfig(),
    "none": ExtrinsicNoiseConfig(0.0, 0.0),
}


def axis_angle_matrix(axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rodrigues: unit axes ``[..., 3]`` and angles ``[...]`` (radians) -> ``[..., 3, 3]``."""
    x, y, z = axis.unbind(-1)
    zero = torch.zeros_like(x)
    skew = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], -1).reshape(axis.shape + (3,))
    a = angle[..., None, None]
    eye = torch.eye(3, dtype=axis.dtype, device=axis.device)
    return eye + torch.sin(a) * skew + (1.0 - torch.cos(a)) * (skew @ skew)


def sample_se3_noise(
    shape: Tuple[int, ...],
    config: ExtrinsicNoiseConfig = ExtrinsicNoiseConfig(),
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
    device: Optional[torch.device] = None,
) -> torch.Tensor:
    """Random perturbations ``[*shape, 4, 4]`` (no anchor handling; see :func:`perturb_poses`)."""
    n = int(torch.Size(shape).numel())
    axis = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    axis = axis / axis.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    angle = torch.randn(n, generator=generator, dtype=torch.float64)
    angle = angle * math.radians(config.rot_std_deg)
    trans = torch.randn(n, 3, generator=generator, dtype=torch.float64) * config.trans_std_m
    noise = torch.zeros(n, 4, 4, dtype=torch.float64)
    noise[:, :3, :3] = axis_angle_matrix(axis, angle)
    noise[:, :3, 3] = trans
    noise[:, 3, 3] = 1.0
    return noise.reshape(tuple(shape) + (4, 4)).to(dtype=dtype, device=device)


def perturb_poses(
    poses: torch.Tensor,
    config: ExtrinsicNoiseConfig = ExtrinsicNoiseConfig(),
    generator: Optional[torch.Generator] = None,
    model: str = "se3_right",
) -> torch.Tensor:
    """Noisy copy of one group's input poses; frame 0 is returned unchanged.

    Two noise models (``model``):

    - ``"se3_right"`` (G2G training): ``T <- T @ dT`` (module docstring), float64 sampling, only
      frames >= 1 draw noise.
    - ``"rotation_left"`` (stage-1 pretraining of the compact backbone): ``R <- R_noise R`` and
      ``t <- t + n`` on ``[B, N, 4, 4]``; every frame draws (float32), frame 0's draw is
      discarded, so the generator advances the same way whatever the noise magnitudes.

    Args:
        poses: ``[..., N, 4, 4]`` anchor-relative poses ``T_{G0<-Gi}``, frame 0 = identity
            (``[B, N, 4, 4]`` for ``"rotation_left"``).
        generator: seeded ``torch.Generator`` (CPU) for reproducibility.
    Returns:
        ``[..., N, 4, 4]`` new tensor; the input is not modified.
    """
    if poses.ndim < 3 or poses.shape[-2:] != (4, 4):
        raise ValueError(f"poses must be [..., N, 4, 4], got {tuple(poses.shape)}")
    if model == "rotation_left":
        return _perturb_rotation_left(poses, config, generator)
    if model != "se3_right":
        raise ValueError(f"noise model must be 'se3_right' or 'rotation_left', got {model!r}")
    out = poses.clone()
    n = poses.shape[-3]
    if n < 2 or (config.rot_std_deg == 0 and config.trans_std_m == 0):
        return out
    noise = sample_se3_noise(poses.shape[:-3] + (n - 1,), config, generator,
                             dtype=poses.dtype, device=poses.device)
    out[..., 1:, :, :] = poses[..., 1:, :, :] @ noise
    return out


def _perturb_rotation_left(cam_to_anchor: torch.Tensor, config: ExtrinsicNoiseConfig,
                           generator: Optional[torch.Generator]) -> torch.Tensor:
    """The ``"rotation_left"`` model of :func:`perturb_poses` on ``[B, N, 4, 4]``."""
    if cam_to_anchor.ndim != 4:
        raise ValueError(f"the rotation_left model takes [B, N, 4, 4], "
                         f"got {tuple(cam_to_anchor.shape)}")
    batch, frames = cam_to_anchor.shape[:2]
    axis = torch.nn.functional.normalize(torch.randn(batch, frames, 3, generator=generator),
                                         dim=-1)
    angle = torch.randn(batch, frames, 1, generator=generator) * math.radians(config.rot_std_deg)
    shift = torch.randn(batch, frames, 3, generator=generator) * config.trans_std_m
    noise = axis_angle_matrix(axis, angle[..., 0])
    noise[:, 0] = torch.eye(3)
    shift[:, 0] = 0
    poses = cam_to_anchor.clone()
    dtype, device = poses.dtype, poses.device
    poses[..., :3, :3] = noise.to(device, dtype) @ poses[..., :3, :3]
    poses[..., :3, 3] = poses[..., :3, 3] + shift.to(device, dtype)
    return poses


def perturb_group_poses(
    poses_a: torch.Tensor,
    poses_b: torch.Tensor,
    config: ExtrinsicNoiseConfig = ExtrinsicNoiseConfig(),
    generator: Optional[torch.Generator] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Apply :func:`perturb_poses` to both groups' input poses (A first, then B, one generator).

    Targets (``T_{A0<-Bj}`` and the clean ``T_{A0<-Ai}``) must be taken from the clean poses.
    """
    return (perturb_poses(poses_a, config, generator),
            perturb_poses(poses_b, config, generator))
