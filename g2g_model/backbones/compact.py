"""The ``compact`` backbone: a small geometry-conditioned multi-view transformer (CPU default).

Per frame: a non-overlapping strided patch stem on ImageNet-normalised RGB, a learned patch
position table, a ray embedding from ``s x s`` ray samples per patch (camera frame and rotated
into the anchor frame), a pose embedding from ``[q_xyzw, t / s, log s]`` (group-normalised
translation and its log metric scale, as MapAnything encodes them) broadcast to the frame's
patches, and a learned anchor embedding on frame 0. The sum is layer-normed and goes through an
alternating frame/group attention transformer with a final LayerNorm.

Frames whose pose is unknown (``pose_known`` False; used by the first-stage pretraining, see
:mod:`g2g_model.training.compact_pretrain`) get a learned "unknown pose" embedding instead of the
pose embedding and zeroed anchor-frame rays; their camera-frame rays are still used.

With ``stem="mobilenetv2"`` the patch tokens come from a frozen, ImageNet-pretrained MobileNetV2
trunk (:mod:`g2g_model.backbones.mobilenet_v2`) under a trainable projection; the geometry
embeddings and the transformer on top are trained. Either way, train the backbone with the
single-group geometry objective first, then freeze it (ARCHITECTURE §2).
"""

from __future__ import annotations

import logging
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from g2g_model.backbones.base import Backbone, register_backbone
from g2g_model.backbones.compact_blocks import AlternatingAttention
from g2g_model.backbones.compact_config import DEFAULT_PRESET, CompactConfig, compact_config
from g2g_model.backbones.compact_geometry import (
    anchor_rays,
    check_group_poses,
    default_pose_known,
    patch_ray_samples,
    pose_vectors,
)
from g2g_model.backbones.compact_stem import PatchStem
from g2g_model.backbones.mobilenet_v2 import PretrainedPatchStem

logger = logging.getLogger(__name__)

POSE_VECTOR_DIM = 8  # q_xyzw (4) + normalised t (3) + log scale (1)


def _mlp(in_dim: int, hidden: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))


def _patch_stem(config: CompactConfig) -> nn.Module:
    """``[M, 3, H, W]`` in [0, 1] -> ``[M, P, D]``."""
    if config.stem == "mobilenetv2":
        # Frozen ImageNet features (stride 16) under a trainable projection.
        return PretrainedPatchStem(config.dim)
    if config.stem == "aliked_t16":
        from g2g_model.backbones.aliked import AlikedPatchStem

        return AlikedPatchStem(config.dim, "t16")
    if config.stem == "linear":
        return PatchStem((config.patch_size,), (config.dim,), config.image_mean, config.image_std)
    # Non-overlapping 4x4 -> 2x2 -> 2x2 blocks: a 16-pixel patch with two nonlinearities for
    # about the cost of one linear patchify (most FLOPs stay in the transformer).
    return PatchStem((4, 2, 2), (*config.stem_channels, config.dim), config.image_mean,
                     config.image_std)


@register_backbone("compact")
class CompactBackbone(Backbone):
    """Geometry-conditioned alternating-attention encoder of one group of frames.

    Args:
        config: a :class:`CompactConfig` or a preset name from ``COMPACT_PRESETS``
            (default ``compact_s``).
    """

    def __init__(self, config: Union[CompactConfig, str] = DEFAULT_PRESET) -> None:
        super().__init__()
        if isinstance(config, str):
            config = compact_config(config)
        if not isinstance(config, CompactConfig):
            raise ValueError(f"config must be a CompactConfig or preset name, got {type(config)}")
        self.config = config
        self.feature_dim = config.dim
        self.patch_size = config.patch_size
        self.image_size = tuple(config.image_size)
        dim = config.dim
        ray_in = 2 * 3 * config.ray_samples ** 2 + 1  # camera rays, anchor rays, known flag

        self.stem = _patch_stem(config)
        grid_h, grid_w = config.grid_size
        self.pos_embed = nn.Parameter(torch.zeros(1, dim, grid_h, grid_w))
        self.ray_encoder = _mlp(ray_in, config.geometry_hidden, dim)
        self.pose_encoder = _mlp(POSE_VECTOR_DIM, config.geometry_hidden, dim)
        self.unknown_pose = nn.Parameter(torch.zeros(dim))
        self.anchor_embed = nn.Parameter(torch.zeros(dim))
        self.fusion_norm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.transformer = AlternatingAttention(
            dim, config.depth, config.num_heads, config.mlp_ratio, config.layer_norm_eps
        )
        self.reset_parameters()

    @classmethod
    def from_preset(cls, name: str = DEFAULT_PRESET, **overrides) -> "CompactBackbone":
        return cls(compact_config(name, **overrides))

    @classmethod
    def from_config_dict(cls, config: Optional[dict]) -> "CompactBackbone":
        """Build from :meth:`CompactConfig.to_dict` output (None: the default preset); used by
        checkpoints that store the backbone configuration in their header."""
        return cls(CompactConfig.from_dict(config) if config else compact_config())

    def reset_parameters(self) -> None:
        """Truncated-normal (std 0.02) weights, zero biases, unit LayerNorms.

        The ray and pose encoders use LeCun-normal weights instead, so that at initialisation the
        geometric embeddings are as large as the image tokens and the features depend on the
        poses from the first step (std 0.02 would make them about 100x smaller).
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        for encoder in (self.ray_encoder, self.pose_encoder):
            for layer in encoder:
                if isinstance(layer, nn.Linear):
                    nn.init.normal_(layer.weight, std=layer.in_features ** -0.5)
        for param in (self.pos_embed, self.unknown_pose, self.anchor_embed):
            nn.init.trunc_normal_(param, std=0.02)

    def _check_inputs(self, images, intrinsics, cam_to_anchor) -> None:
        if images.dim() != 5 or images.shape[2] != 3:
            raise ValueError(f"images must be [B, N, 3, H, W], got {tuple(images.shape)}")
        batch, frames, _, height, width = images.shape
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f"image size {(height, width)} must be divisible by patch_size "
                             f"{self.patch_size}")
        if tuple(intrinsics.shape) != (batch, frames, 3, 3):
            raise ValueError(f"intrinsics must be [B, N, 3, 3] = {(batch, frames, 3, 3)}, got "
                             f"{tuple(intrinsics.shape)}")
        if tuple(cam_to_anchor.shape) != (batch, frames, 4, 4):
            raise ValueError(f"cam_to_anchor must be [B, N, 4, 4] = {(batch, frames, 4, 4)}, got "
                             f"{tuple(cam_to_anchor.shape)}")
        focal = intrinsics[..., [0, 1], [0, 1]]
        if not bool(torch.isfinite(intrinsics).all()) or not bool((focal > 0).all()):
            raise ValueError("intrinsics must be finite with positive fx, fy")

    def position_grid(self, grid_h: int, grid_w: int) -> torch.Tensor:
        """``[1, D, grid_h, grid_w]`` learned patch positions, bicubically resized for other
        grid sizes (also used to move a checkpoint to another input size)."""
        table = self.pos_embed
        if table.shape[-2:] != (grid_h, grid_w):
            table = F.interpolate(table, size=(grid_h, grid_w), mode="bicubic",
                                  align_corners=False)
        return table

    def _position_table(self, grid_h: int, grid_w: int) -> torch.Tensor:
        """``[1, P, D]`` learned patch positions (:meth:`position_grid`, flattened)."""
        return self.position_grid(grid_h, grid_w).flatten(2).transpose(1, 2)

    def embed(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        pose_known: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Fused, layer-normed input tokens ``[B, N, P, D]`` (before the transformer)."""
        self._check_inputs(images, intrinsics, cam_to_anchor)
        pose_known = default_pose_known(cam_to_anchor, pose_known)
        # Unknown poses are replaced by the identity so that nothing of them leaks in (and
        # garbage there does not fail the rigidity check).
        eye = torch.eye(4, device=cam_to_anchor.device, dtype=cam_to_anchor.dtype)
        cam_to_anchor = torch.where(pose_known[..., None, None], cam_to_anchor, eye)
        check_group_poses(cam_to_anchor)
        batch, frames, _, height, width = images.shape
        grid = (height // self.patch_size, width // self.patch_size)
        patches = grid[0] * grid[1]

        tokens = self.stem(images.reshape(batch * frames, 3, height, width))  # [B*N, P, D]
        tokens = tokens + self._position_table(*grid)
        tokens = tokens.reshape(batch, frames, patches, self.feature_dim)

        # Geometry in float32 even under autocast: ray rotations and quaternions are cheap and
        # bf16 would quantise directions to about 0.5 degree.
        with torch.autocast(images.device.type, enabled=False):
            known = pose_known.float()
            rays = patch_ray_samples(intrinsics, grid, self.patch_size, self.config.ray_samples)
            rays_anchor = anchor_rays(rays, cam_to_anchor) * known[:, :, None, None, None]
            flag = known[:, :, None, None].expand(batch, frames, patches, 1)
            ray_input = torch.cat((rays.flatten(3), rays_anchor.flatten(3), flag), dim=-1)
            pose_input = pose_vectors(cam_to_anchor, pose_known, self.config.min_translation_scale)
        ray_tokens = self.ray_encoder(ray_input)  # [B, N, P, D]
        pose_tokens = torch.where(
            pose_known[..., None], self.pose_encoder(pose_input), self.unknown_pose
        )  # [B, N, D]
        anchor = torch.zeros(frames, 1, device=images.device, dtype=self.anchor_embed.dtype)
        anchor[0] = 1.0
        frame_tokens = pose_tokens + anchor * self.anchor_embed  # [B, N, D]
        fused = tokens + ray_tokens + frame_tokens[:, :, None, :]
        return self.fusion_norm(fused)

    def forward(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        pose_known: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Encode groups of frames.

        Args:
            images: ``[B, N, 3, H, W]`` RGB in [0, 1]; H, W divisible by ``patch_size``.
            intrinsics: ``[B, N, 3, 3]`` pinhole K in pixels of the given H x W.
            cam_to_anchor: ``[B, N, 4, 4]`` T_{X0<-Xi}; frame 0 must be the identity (else
                ``ValueError``; the backbone never re-anchors silently).
            pose_known: optional ``[B, N]`` bool, default all True; frame 0 must be True.
                Poses of False frames are ignored (pretraining with dropped poses).

        Returns:
            ``[B, N, P, D]`` features, P = (H/p) * (W/p), D = ``feature_dim``.
        """
        return self.transformer(self.embed(images, intrinsics, cam_to_anchor, pose_known))
