"""The ``mapanything_v1`` backbone: MapAnything V1's feature path, checkpoint-compatible.

Pipeline for one group of N frames (frame 0 = the group's anchor, identity pose):
    1. images in [0, 1] -> ImageNet normalisation -> DINOv2 ViT-L/14 -> normalised patch tokens.
    2. rays from K -> ray encoder (per patch); relative quaternion (x, y, z, w), normalised
       translation and log metric scale -> MLP encoders (per view, broadcast to its patches).
    3. image + rays + rotation + translation + scale, summed in that order -> fusion LayerNorm.
    4. a learned scale token appended after all view tokens -> 24 alternating global / per-view
       attention layers (global first), reference-view embedding on view 0 -> final LayerNorm.
Depth inputs are never given (their encoders' contribution would be multiplied by zero), so the
depth encoders are not built; their checkpoint keys are skipped by name when loading.

Usage::

    backbone = load_mapanything_v1("/path/to/map-anything-apache-v1")  # offline, strict
    backbone = MapAnythingV1Backbone(preset("full"), autocast_dtype=torch.bfloat16)  # bf16 CPU
    feats = backbone(images, intrinsics, cam_to_anchor)  # [B, N, 256, 768] at 224x224
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from g2g_model.precision import autocast

from .base import Backbone, register_backbone
from .mapanything.alternating_attention import AlternatingAttentionTransformer
from .mapanything.checkpoint import load_mapanything_v1
from .mapanything.config import MapAnythingV1Config, preset
from .mapanything.dinov2 import DinoV2ViT, ImageEncoder
from .mapanything.geometric_encoders import (
    DenseRepresentationEncoder,
    GlobalRepresentationEncoder,
)
from .mapanything.geometric_inputs import (
    normalize_translations,
    ray_directions,
    relative_pose_inputs,
)

__all__ = ["MapAnythingV1Backbone", "MapAnythingV1Output", "load_mapanything_v1"]


@dataclass
class MapAnythingV1Output:
    """``features [B, N, P, D]`` (info-sharing view tokens) and ``scale_token [B, D]``."""

    features: torch.Tensor
    scale_token: torch.Tensor


@register_backbone("mapanything_v1")
class MapAnythingV1Backbone(Backbone):
    """MapAnything V1 feature path behind the G2G :class:`Backbone` interface.

    Args:
        config: sizes; a :class:`MapAnythingV1Config` or a preset name (default ``"full"``).
        autocast_dtype: ``None`` for float32, or e.g. ``torch.bfloat16`` to run the image
            encoder and the info-sharing transformer under autocast (works on CPU). As in
            MapAnything, the geometric encoders and the fusion always run in float32.
    """

    def __init__(
        self,
        config: Union[MapAnythingV1Config, str] = "full",
        autocast_dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if isinstance(config, str):
            config = preset(config)
        if autocast_dtype not in (None, torch.float32, torch.bfloat16, torch.float16):
            raise ValueError(f"autocast_dtype={autocast_dtype!r}: use None, bfloat16 or float16")
        self.config = config
        self.autocast_dtype = None if autocast_dtype == torch.float32 else autocast_dtype
        self.feature_dim = config.info_dim
        self.patch_size = config.patch_size
        self.image_size = tuple(config.image_size)
        width = config.encoder_dim
        eps = config.norm_eps

        self.encoder = ImageEncoder(DinoV2ViT(
            dim=width, depth=config.encoder_depth, num_heads=config.encoder_heads,
            mlp_ratio=config.encoder_mlp_ratio, patch_size=config.patch_size,
            pos_grid=config.encoder_pos_grid,
            interpolate_offset=config.encoder_interpolate_offset,
            layerscale=config.encoder_layerscale, norm_eps=eps,
        ))
        self.ray_dirs_encoder = DenseRepresentationEncoder(
            3, config.patch_size, config.ray_intermediate_dims, width, eps)
        self.cam_rot_encoder = GlobalRepresentationEncoder(
            4, config.global_intermediate_dims, width, eps)
        self.cam_trans_encoder = GlobalRepresentationEncoder(
            3, config.global_intermediate_dims, width, eps)
        self.cam_trans_scale_encoder = GlobalRepresentationEncoder(
            1, config.global_intermediate_dims, width, eps)
        self.fusion_norm_layer = nn.LayerNorm(width, eps=eps)
        self.scale_token = nn.Parameter(torch.zeros(width))
        self.info_sharing = AlternatingAttentionTransformer(
            width, config.info_dim, config.info_depth, config.info_heads, config.info_mlp_ratio,
            eps)
        self.register_buffer("image_mean", torch.tensor(config.image_mean).view(3, 1, 1),
                             persistent=False)
        self.register_buffer("image_std", torch.tensor(config.image_std).view(3, 1, 1),
                             persistent=False)

    @classmethod
    def from_config_dict(cls, config: Optional[dict]) -> "MapAnythingV1Backbone":
        """Build from a config dict (None = the full V1 size); weights are NOT loaded."""
        return cls(preset("full") if config is None else MapAnythingV1Config.from_dict(config))

    @classmethod
    def from_weights(cls, path: str, config: Optional[dict] = None) -> "MapAnythingV1Backbone":
        """Load a local checkpoint (folder or file) strictly, built on the meta device first so
        that nothing is allocated twice. ``config`` None: the sizes of the folder's
        ``config.json`` (the released layout), else the full V1 size."""
        return load_mapanything_v1(
            path, config=MapAnythingV1Config.from_dict(config) if config else None)

    def load_weights(self, path: str) -> None:
        """Load a local MapAnything V1 checkpoint strictly into this module (see the loader)."""
        loaded = load_mapanything_v1(path, config=self.config)
        self.load_state_dict(loaded.state_dict(), strict=True)

    # ----------------------------------------------------------------------------------------
    def normalize_images(self, images: torch.Tensor) -> torch.Tensor:
        """``[..., 3, H, W]`` RGB in [0, 1] -> ImageNet-normalised float32 (subtract, divide)."""
        return (images.float() - self.image_mean) / self.image_std

    def _check_inputs(self, images, intrinsics, cam_to_anchor) -> None:
        if images.dim() != 5 or images.shape[2] != 3:
            raise ValueError(f"images must be [B, N, 3, H, W], got {tuple(images.shape)}")
        batch, views, _, height, width = images.shape
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(
                f"image size {height}x{width} is not a multiple of patch_size={self.patch_size}"
            )
        if tuple(intrinsics.shape) != (batch, views, 3, 3):
            raise ValueError(
                f"intrinsics must be [B, N, 3, 3] = {[batch, views, 3, 3]}, "
                f"got {list(intrinsics.shape)}"
            )
        if tuple(cam_to_anchor.shape) != (batch, views, 4, 4):
            raise ValueError(
                f"cam_to_anchor must be [B, N, 4, 4] = {[batch, views, 4, 4]}, "
                f"got {list(cam_to_anchor.shape)}"
            )

    def encode_geometry(
        self,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        height: int,
        width: int,
        is_metric_scale: torch.Tensor,
    ) -> tuple:
        """Float32 geometric features to add onto the image tokens (C = encoder width).

        Returns:
            ``(rays [B, N, P, C], rotation [B, N, C], translation [B, N, C], scale [B, N, C])``;
            the scale features are zeroed where ``is_metric_scale`` is False.
        """
        batch, views = intrinsics.shape[:2]
        rays = ray_directions(intrinsics, height, width)  # [B, N, H, W, 3]
        rays = rays.reshape(batch * views, height, width, 3).permute(0, 3, 1, 2)
        ray_features = self.ray_dirs_encoder(rays)
        ray_features = ray_features.reshape(batch, views, -1, ray_features.shape[-1])

        quats, trans = relative_pose_inputs(cam_to_anchor.float())
        trans, factor = normalize_translations(trans)
        log_scale = torch.log(factor + 1e-8)[:, None, None].expand(batch, views, 1)
        rot = self.cam_rot_encoder(quats)
        tra = self.cam_trans_encoder(trans)
        scale = self.cam_trans_scale_encoder(log_scale) * is_metric_scale[..., None].float()
        return ray_features, rot, tra, scale

    def forward_features(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        is_metric_scale: Optional[torch.Tensor] = None,
    ) -> MapAnythingV1Output:
        """Encode groups of frames; see :meth:`forward` for the arguments.

        Returns:
            :class:`MapAnythingV1Output` with float32 ``features [B, N, P, D]`` and
            ``scale_token [B, D]``.
        """
        self._check_inputs(images, intrinsics, cam_to_anchor)
        batch, views, _, height, width = images.shape
        if is_metric_scale is None:
            is_metric_scale = torch.ones(batch, views, dtype=torch.bool, device=images.device)
        elif tuple(is_metric_scale.shape) != (batch, views):
            raise ValueError(
                f"is_metric_scale must be [B, N] = {[batch, views]}, "
                f"got {list(is_metric_scale.shape)}"
            )
        pixels = self.normalize_images(images).reshape(batch * views, 3, height, width)
        with autocast(images.device, self.autocast_dtype, inherit=True):
            image_tokens = self.encoder(pixels)
        image_tokens = image_tokens.float().reshape(batch, views, -1, image_tokens.shape[-1])

        # MapAnything runs the geometric branch in float32 even under autocast (the LayerNorm of
        # the dense encoder is sensitive); do the same.
        with torch.autocast(images.device.type, enabled=False):
            rays, rot, tra, scale = self.encode_geometry(
                intrinsics, cam_to_anchor, height, width, is_metric_scale)
            fused = image_tokens + rays
            fused = fused + rot[:, :, None]
            fused = fused + tra[:, :, None]
            fused = fused + scale[:, :, None]
            fused = self.fusion_norm_layer(fused)

        scale_token = self.scale_token.float()[None].expand(batch, -1)
        with autocast(images.device, self.autocast_dtype, inherit=True):
            features, scale_out = self.info_sharing(fused, scale_token)
        return MapAnythingV1Output(features.float(), scale_out.float())

    def forward(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        is_metric_scale: Optional[torch.Tensor] = None,
        return_scale_token: bool = False,
    ):
        """Encode groups of frames in their own anchor frame.

        Args:
            images: ``[B, N, 3, H, W]`` RGB in [0, 1]; H, W multiples of 14.
            intrinsics: ``[B, N, 3, 3]`` pinhole K in pixels of H x W.
            cam_to_anchor: ``[B, N, 4, 4]`` T_{X0<-Xi} (frame 0 identity), metres, OpenCV axes.
            is_metric_scale: optional ``[B, N]`` bool; default all True (G2G poses are metric).
            return_scale_token: also return the ``[B, D]`` scale-token output.

        Returns:
            ``[B, N, P, D]`` float32 features (P = 256, D = 768 at 224x224 for V1), or
            ``(features, scale_token)`` when ``return_scale_token``.
        """
        out = self.forward_features(images, intrinsics, cam_to_anchor, is_metric_scale)
        if return_scale_token:
            return out.features, out.scale_token
        return out.features
