"""First-stage (single-group geometry) pretraining heads and loss of the compact backbone.

ARCHITECTURE §2: the compact backbone has no pretrained weights, so before it is frozen under
the G2G modules it is trained on one group at a time with simulator supervision: per-pixel depth
and intra-group relative poses.

Relative-pose targets vs pose inputs. Poses are inputs of the backbone, so predicting them from
features that were given the very same poses would be trivial. As MapAnything does when it
trains with partial inputs, every step draws a subset of the non-anchor frames whose pose input
is *dropped*: the backbone sees ``pose_known=False`` for them (a learned "unknown pose" token,
no anchor-frame rays; their images and intrinsics are still used) and the pose head must recover
``T_{0<-i}`` for exactly those frames. The remaining frames keep their poses, perturbed by the
same extrinsic noise the G2G stage applies (rotation about a random axis, angle ~ N(0, 1.5 deg),
translation ~ N(0, 0.1 m) per axis; never frame 0), so the backbone learns to tolerate noisy
odometry. Targets are always the clean poses.

Only the loss is computed here; the optimiser step, AMP and gradient clipping belong to the
training loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from g2g_model.training.augment import ExtrinsicNoiseConfig, perturb_poses
from g2g_model.model.rotation import rotation_6d_to_matrix


@dataclass(frozen=True)
class PretrainConfig:
    """Pose dropping, input noise and loss weights of the first stage.

    Attributes:
        pose_drop_prob: probability that a non-anchor frame's pose input is dropped; at least one
            frame per group is dropped when N > 1 so every step has pose supervision.
        drop_all_prob: probability that all non-anchor poses of a group are dropped (the
            images-and-intrinsics-only case).
        rotation_noise_deg / translation_noise_m: std of the noise on kept non-anchor poses.
        depth_weight / pose_weight: weights of the two terms in ``total``.
        shift_invariant_weight: weight of the per-frame shift-invariant log-depth term inside
            the depth loss (structure), next to the metric term (scale).
        rotation_weight / translation_weight: ``5 * d_R + (1/3) * ||t_hat - t||_1`` as in the
            G2G loss (ARCHITECTURE §2).
    """

    pose_drop_prob: float = 0.5
    drop_all_prob: float = 0.1
    rotation_noise_deg: float = 1.5
    translation_noise_m: float = 0.1
    depth_weight: float = 1.0
    pose_weight: float = 1.0
    shift_invariant_weight: float = 0.5
    rotation_weight: float = 5.0
    translation_weight: float = 1.0 / 3.0


class DepthHead(nn.Module):
    """Per-patch log-depth: LayerNorm -> Linear to ``c x c`` cells -> pixel shuffle -> upsample.

    Args:
        feature_dim: D.
        patch_size: p.
        cells: c, depth values per patch side (p must be divisible by c); the c x c map per patch
            is pixel-shuffled and bilinearly upsampled by p / c to full resolution.
    """

    def __init__(self, feature_dim: int, patch_size: int, cells: int = 4) -> None:
        super().__init__()
        if cells <= 0 or patch_size % cells:
            raise ValueError(f"cells {cells} must divide patch_size {patch_size}")
        self.cells = cells
        self.patch_size = patch_size
        self.norm = nn.LayerNorm(feature_dim)
        self.proj = nn.Linear(feature_dim, cells * cells)
        nn.init.zeros_(self.proj.bias)

    def forward(self, features: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """``[B, N, P, D]`` -> log depth ``[B, N, H, W]`` (float32)."""
        batch, frames, patches, _ = features.shape
        grid_h, grid_w = height // self.patch_size, width // self.patch_size
        if grid_h * grid_w != patches:
            raise ValueError(f"{patches} patches do not match image size {(height, width)}")
        cells = self.proj(self.norm(features)).float()  # [B, N, P, c*c]
        cells = cells.reshape(batch * frames, grid_h, grid_w, -1).permute(0, 3, 1, 2)
        coarse = F.pixel_shuffle(cells, self.cells)  # [B*N, 1, gh*c, gw*c]
        if self.cells != self.patch_size:
            coarse = F.interpolate(coarse, size=(height, width), mode="bilinear",
                                   align_corners=False)
        return coarse.reshape(batch, frames, height, width)


class RelativePoseHead(nn.Module):
    """Pose of every frame relative to frame 0 from mean-pooled tokens.

    Input per frame i: ``[pool(F_i), pool(F_0)]``; output a 6D rotation (initialised near the
    identity) and a metric translation.
    """

    def __init__(self, feature_dim: int, hidden: int = 256) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(2 * feature_dim)
        self.mlp = nn.Sequential(
            nn.Linear(2 * feature_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, 9),
        )
        last = self.mlp[-1]
        nn.init.normal_(last.weight, std=1e-3)
        nn.init.zeros_(last.bias)
        self.register_buffer("identity_6d", torch.tensor([1.0, 0, 0, 0, 1.0, 0]),
                             persistent=False)

    def forward(self, features: torch.Tensor) -> Dict[str, torch.Tensor]:
        """``[B, N, P, D]`` -> ``rotation [B, N, 3, 3]``, ``translation [B, N, 3]`` (float32)."""
        pooled = features.float().mean(dim=2)  # [B, N, D]
        pair = torch.cat((pooled, pooled[:, :1].expand_as(pooled)), dim=-1)
        out = self.mlp(self.norm(pair)).float()
        rotation = rotation_6d_to_matrix(out[..., :6] + self.identity_6d)
        return {"rotation": rotation, "translation": out[..., 6:]}


class CompactPretrainHeads(nn.Module):
    """The depth and relative-pose heads trained together with the backbone in stage one."""

    def __init__(self, feature_dim: int, patch_size: int, depth_cells: int = 4,
                 pose_hidden: int = 256) -> None:
        super().__init__()
        self.depth = DepthHead(feature_dim, patch_size, depth_cells)
        self.pose = RelativePoseHead(feature_dim, pose_hidden)

    @classmethod
    def for_backbone(cls, backbone: nn.Module, **kwargs) -> "CompactPretrainHeads":
        return cls(backbone.feature_dim, backbone.patch_size, **kwargs)


def sample_pose_known(
    batch: int, frames: int, config: PretrainConfig, generator: Optional[torch.Generator] = None
) -> torch.Tensor:
    """``[B, N]`` bool mask of kept pose inputs: frame 0 kept, >= 1 frame dropped when N > 1."""
    known = torch.rand(batch, frames, generator=generator) >= config.pose_drop_prob
    drop_all = torch.rand(batch, generator=generator) < config.drop_all_prob
    known[drop_all] = False
    if frames > 1:
        forced = torch.randint(1, frames, (batch,), generator=generator)
        none_dropped = known[:, 1:].all(dim=1)
        known[torch.arange(batch)[none_dropped], forced[none_dropped]] = False
    known[:, 0] = True
    return known


def depth_loss(log_depth: torch.Tensor, depth: torch.Tensor, valid: torch.Tensor,
               shift_invariant_weight: float) -> Dict[str, torch.Tensor]:
    """Scale-aware L1 on log depth over valid pixels.

    ``metric`` = mean |log d_hat - log d| (metric scale is observable: poses are metric);
    ``shift_invariant`` = the same after removing each frame's mean log-ratio (relative
    structure, robust to a global scale error early in training).

    Args:
        log_depth: ``[B, N, H, W]`` predicted log depth.
        depth: ``[B, N, H, W]`` ground-truth depth in metres.
        valid: ``[B, N, H, W]`` bool.
    """
    valid = valid & torch.isfinite(depth) & (depth > 0)
    weight = valid.float()
    count = weight.sum().clamp_min(1.0)
    diff = (log_depth - torch.log(torch.where(valid, depth, torch.ones_like(depth)))) * weight
    metric = diff.abs().sum() / count
    per_frame = weight.sum(dim=(-1, -2)).clamp_min(1.0)
    offset = diff.sum(dim=(-1, -2)) / per_frame  # [B, N]
    shift_invariant = ((diff - offset[..., None, None]) * weight).abs().sum() / count
    total = metric + shift_invariant_weight * shift_invariant
    return {"depth": total, "depth_metric": metric, "depth_shift_invariant": shift_invariant}


def pose_loss(rotation: torch.Tensor, translation: torch.Tensor, target: torch.Tensor,
              mask: torch.Tensor, config: PretrainConfig) -> Dict[str, torch.Tensor]:
    """Chordal-L1 rotation + L1 translation over the frames in ``mask`` (``[B, N]`` bool)."""
    rot_err = (rotation.transpose(-1, -2) @ target[..., :3, :3].float()
               - torch.eye(3, device=rotation.device)).abs().mean(dim=(-1, -2))
    trans_err = (translation - target[..., :3, 3].float()).abs().sum(-1)  # [B, N]
    weight = mask.float()
    count = weight.sum().clamp_min(1.0)
    rot = (rot_err * weight).sum() / count
    trans = (trans_err * weight).sum() / count
    total = config.rotation_weight * rot + config.translation_weight * trans
    return {"pose": total, "pose_rotation": rot, "pose_translation": trans}


def pretrain_step(
    model: nn.Module,
    heads: CompactPretrainHeads,
    batch: Dict[str, torch.Tensor],
    config: PretrainConfig = PretrainConfig(),
    generator: Optional[torch.Generator] = None,
) -> Dict[str, torch.Tensor]:
    """Losses of one first-stage step (the caller runs backward and the optimiser).

    Args:
        model: the compact backbone (any backbone accepting ``pose_known``).
        heads: :class:`CompactPretrainHeads`.
        batch: ``images [B, N, 3, H, W]`` in [0, 1], ``intrinsics [B, N, 3, 3]``,
            ``cam_to_anchor [B, N, 4, 4]`` (clean, frame 0 identity), ``depth [B, N, H, W]``
            metres (non-finite or <= 0 = invalid), optional ``depth_valid [B, N, H, W]`` bool.
        config: pose dropping, noise and loss weights.
        generator: CPU generator for the dropped-pose mask and the noise (reproducible steps).

    Returns:
        dict with ``total`` (differentiable) and its parts ``depth``, ``depth_metric``,
        ``depth_shift_invariant``, ``pose``, ``pose_rotation``, ``pose_translation``, and
        ``dropped`` (number of frames whose pose was predicted).
    """
    for key in ("images", "intrinsics", "cam_to_anchor", "depth"):
        if key not in batch:
            raise ValueError(f"pretrain batch is missing {key!r}; has {sorted(batch)}")
    images, poses = batch["images"], batch["cam_to_anchor"]
    num, frames, _, height, width = images.shape
    if tuple(batch["depth"].shape) != (num, frames, height, width):
        raise ValueError(f"depth must be [B, N, H, W] = {(num, frames, height, width)}, got "
                         f"{tuple(batch['depth'].shape)}")
    known = sample_pose_known(num, frames, config, generator).to(images.device)
    # float32 even under bf16 autocast: a bf16 matrix product leaves the noisy rotations
    # visibly non-orthogonal, which the backbone rightly refuses.
    with torch.autocast(images.device.type, enabled=False):
        noisy = perturb_poses(poses.float(), ExtrinsicNoiseConfig(config.rotation_noise_deg,
                                                                  config.translation_noise_m),
                              generator, model="rotation_left")
    features = model(images, batch["intrinsics"], noisy, pose_known=known)
    log_depth = heads.depth(features, height, width)
    valid = batch.get("depth_valid")
    if valid is None:
        valid = torch.ones_like(batch["depth"], dtype=torch.bool)
    losses = depth_loss(log_depth, batch["depth"].float(), valid.bool(),
                        config.shift_invariant_weight)
    pose_out = heads.pose(features)
    losses.update(pose_loss(pose_out["rotation"], pose_out["translation"], poses, ~known,
                            config))
    losses["total"] = config.depth_weight * losses["depth"] + config.pose_weight * losses["pose"]
    losses["dropped"] = (~known).sum()
    return losses
