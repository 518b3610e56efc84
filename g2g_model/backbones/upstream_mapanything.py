"""The ``mapanything_upstream`` backbone: MapAnything V1 features computed by the upstream package.

An optional adapter for users who have Meta's ``mapanything`` package (facebookresearch/
map-anything, with its dependency ``uniception``) installed. It builds the upstream
``MapAnything`` model for a V1 configuration, loads a local V1 checkpoint, and returns the same
``[B, N, P, D]`` features as our own :mod:`~g2g_model.backbones.mapanything_v1` (the final
info-sharing tokens, scale token excluded) for the same inputs. Nothing here needs the package
to be importable: ``mapanything`` and ``uniception`` are imported when an adapter is built, and
building one without them raises :class:`ImportError` saying what to install.

Offline, always (how: :mod:`g2g_model.backbones.mapanything.upstream_build`). Upstream's image
encoder wrapper fetches DINOv2 through ``torch.hub`` from GitHub, with ImageNet-pretrained
weights, in its constructor. The adapter never does: it builds the ViT from a *local* checkout of
facebookresearch/dinov2 (``torch.hub.load(..., source="local", pretrained=False)``; the
checkpoint supplies every weight) through a small encoder class registered in uniception's
encoder table. The checkout is, in this order: the ``dinov2_repo`` argument, the
``G2G_DINOV2_REPO`` environment variable, or the copy an earlier online run of upstream left in
the torch hub cache (``<torch.hub.get_dir()>/facebookresearch_dinov2_main``). Without one,
building fails with a message that says so.

Deterministic geometric inputs, as ``MapAnything.infer`` sets them: rays from K, camera poses,
metric scale on, no depth. Only the feature path runs: a forward hook stops upstream's
``forward`` once ``info_sharing`` has produced its output, so the prediction heads never run
(their weights may be absent from the checkpoint; they are still built, because upstream's
constructor always builds them). Tested against map-anything commit ``f7ebafb`` with
uniception 0.1.7 and dinov2 commit ``b8931f7``.

Usage::

    backbone = load_upstream_mapanything("/path/to/map-anything-apache-v1",
                                         dinov2_repo="/path/to/dinov2")
    feats = backbone(images, intrinsics, cam_to_anchor)  # [B, N, 256, 768] at 224x224
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Optional, Union

import torch

from g2g_model.precision import autocast

from .base import Backbone, register_backbone
from .mapanything.checkpoint import (
    HEAD_PREFIXES,
    check_width,
    read_config,
    read_state_dict,
    resolve_checkpoint,
)
from .mapanything.config import MapAnythingV1Config, preset
from .mapanything.upstream_build import (
    import_upstream,
    register_local_dinov2_encoder,
    resolve_dinov2_repo,
    upstream_init_kwargs,
)
from .mapanything_v1 import MapAnythingV1Output

__all__ = ["UpstreamMapAnythingBackbone", "load_upstream_mapanything"]

logger = logging.getLogger(__name__)


class _InfoSharingDone(Exception):
    """Raised by the forward hook to stop upstream's forward before the prediction heads."""

    def __init__(self, output) -> None:
        super().__init__("info_sharing finished")
        self.output = output


@register_backbone("mapanything_upstream")
class UpstreamMapAnythingBackbone(Backbone):
    """MapAnything V1 features from the upstream package, behind the G2G :class:`Backbone`.

    Args:
        config: sizes; a :class:`MapAnythingV1Config` or a preset name (default ``"full"``),
            exactly as for ``mapanything_v1``.
        dinov2_repo: local facebookresearch/dinov2 checkout (see :func:`resolve_dinov2_repo`).
        autocast_dtype: ``None`` for float32, or e.g. ``torch.bfloat16`` to run upstream's
            forward under autocast (upstream keeps its geometric branch in float32 itself).

    Raises:
        ImportError: the upstream package is not installed (the message says what to install).
        FileNotFoundError: no local dinov2 checkout.
    """

    def __init__(
        self,
        config: Union[MapAnythingV1Config, str] = "full",
        dinov2_repo: Union[str, os.PathLike, None] = None,
        autocast_dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        if isinstance(config, str):
            config = preset(config)
        if autocast_dtype not in (None, torch.float32, torch.bfloat16, torch.float16):
            raise ValueError(f"autocast_dtype={autocast_dtype!r}: use None, bfloat16 or float16")
        upstream = import_upstream()
        self._preprocess = upstream["preprocess"]
        self._validate = upstream["validate"]
        repo = resolve_dinov2_repo(dinov2_repo)
        register_local_dinov2_encoder()

        self.config = config
        self.autocast_dtype = None if autocast_dtype == torch.float32 else autocast_dtype
        self.feature_dim = config.info_dim
        self.patch_size = config.patch_size
        self.image_size = tuple(config.image_size)
        init_kwargs = upstream_init_kwargs(config)
        init_kwargs["encoder_config"]["dinov2_repo"] = str(repo)
        self.model = upstream["MapAnything"](**init_kwargs)
        # Rays + poses + metric scale, no depth, no random dropout: what MapAnything.infer
        # configures for these inputs. Set once: this adapter never changes it.
        self.model._configure_geometric_input_config(
            use_calibration=True, use_depth=False, use_pose=True, use_depth_scale=True,
            use_pose_scale=True)
        self.data_norm_type = self.model.encoder.data_norm_type
        norm = upstream["normalizations"][self.data_norm_type]
        self.register_buffer("image_mean", norm.mean.float().view(3, 1, 1), persistent=False)
        self.register_buffer("image_std", norm.std.float().view(3, 1, 1), persistent=False)

    @classmethod
    def from_config_dict(cls, config: Optional[dict]) -> "UpstreamMapAnythingBackbone":
        """Build from a ``mapanything_v1`` config dict (None = full V1); weights NOT loaded."""
        return cls(preset("full") if config is None else MapAnythingV1Config.from_dict(config))

    def load_weights(self, path: Union[str, os.PathLike]) -> None:
        """Load a local MapAnything V1 checkpoint (same layouts as ``mapanything_v1``).

        Strict on the feature path: every non-head tensor of the upstream model must be in the
        file with its exact shape, and the file may hold nothing the model lacks. Head tensors
        may be missing (the adapter never runs the heads); that is logged.

        Raises:
            FileNotFoundError / ValueError: as :func:`load_mapanything_v1`, listing the keys.
        """
        weights, _ = resolve_checkpoint(path)
        state_dict = read_state_dict(weights)
        check_width(state_dict, str(weights))
        expected = self.model.state_dict()
        unexpected = sorted(k for k in state_dict if k not in expected)
        missing = sorted(k for k in expected if k not in state_dict)
        missing_heads = [k for k in missing if k.startswith(HEAD_PREFIXES)]
        missing_features = [k for k in missing if not k.startswith(HEAD_PREFIXES)]
        mismatched = sorted(
            f"{k}: checkpoint {list(v.shape)} vs model {list(expected[k].shape)}"
            for k, v in state_dict.items() if k in expected and v.shape != expected[k].shape)
        problems = []
        if missing_features:
            problems.append(f"{len(missing_features)} missing keys: {missing_features}")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected keys: {unexpected}")
        if mismatched:
            problems.append(f"{len(mismatched)} shape mismatches: {mismatched}")
        if problems:
            raise ValueError(f"{weights} does not match the upstream MapAnything V1 model: "
                             + "; ".join(problems))
        self.model.load_state_dict(state_dict, strict=False)
        if missing_heads:
            logger.info("%s: %d head tensors absent (heads are not run by this adapter)",
                        weights, len(missing_heads))
        self.eval().requires_grad_(False)
        logger.info("loaded %d tensors from %s into upstream MapAnything", len(state_dict),
                    weights)

    # ----------------------------------------------------------------------------------------
    def normalize_images(self, images: torch.Tensor) -> torch.Tensor:
        """``[..., 3, H, W]`` RGB in [0, 1] -> normalised with upstream's table for the encoder."""
        return (images.float() - self.image_mean) / self.image_std

    def _check_inputs(self, images, intrinsics, cam_to_anchor, is_metric_scale) -> None:
        if images.dim() != 5 or images.shape[2] != 3:
            raise ValueError(f"images must be [B, N, 3, H, W], got {tuple(images.shape)}")
        batch, views, _, height, width = images.shape
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(
                f"image size {height}x{width} is not a multiple of patch_size={self.patch_size}")
        for name, tensor, tail in (("intrinsics", intrinsics, (3, 3)),
                                   ("cam_to_anchor", cam_to_anchor, (4, 4)),
                                   ("is_metric_scale", is_metric_scale, ())):
            if tuple(tensor.shape) != (batch, views) + tail:
                raise ValueError(f"{name} must be {[batch, views, *tail]}, "
                                 f"got {list(tensor.shape)}")

    def upstream_views(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        is_metric_scale: torch.Tensor,
    ) -> List[Dict[str, Any]]:
        """Upstream's per-view input dicts, converted by its own inference pre-processing.

        Each view gets the normalised ``img [B, 3, H, W]``, ``intrinsics [B, 3, 3]`` (upstream
        turns them into unit rays), ``camera_poses [B, 4, 4]`` (into xyzw quaternions and
        translations) and ``is_metric_scale [B]``.
        """
        pixels = self.normalize_images(images)
        views = [{
            "img": pixels[:, v],
            "data_norm_type": [self.data_norm_type],
            "intrinsics": intrinsics[:, v].float(),
            "camera_poses": cam_to_anchor[:, v].float(),
            "is_metric_scale": is_metric_scale[:, v].bool(),
        } for v in range(images.shape[1])]
        return self._preprocess(self._validate(views))

    def forward_features(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        is_metric_scale: Optional[torch.Tensor] = None,
    ) -> MapAnythingV1Output:
        """Encode groups of frames; see :meth:`forward` for the arguments.

        Returns:
            :class:`~g2g_model.backbones.mapanything_v1.MapAnythingV1Output` with float32
            ``features [B, N, P, D]`` and ``scale_token [B, D]``.
        """
        if is_metric_scale is None:
            is_metric_scale = torch.ones(images.shape[:2], dtype=torch.bool,
                                         device=images.device)
        self._check_inputs(images, intrinsics, cam_to_anchor, is_metric_scale)
        views = self.upstream_views(images, intrinsics, cam_to_anchor, is_metric_scale)

        def stop(module, inputs, output):
            raise _InfoSharingDone(output)

        handle = self.model.info_sharing.register_forward_hook(stop)
        # Upstream draws (deterministic, probability 0 or 1) input masks with torch.rand: fork
        # the RNG so that encoding does not shift the caller's random stream.
        cuda_devices = [images.device] if images.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=cuda_devices), autocast(
                    images.device, self.autocast_dtype, inherit=True):
                self.model(views)
            raise RuntimeError("upstream MapAnything.forward finished without running "
                               "info_sharing; this adapter does not know that version")
        except _InfoSharingDone as done:
            output = done.output
        finally:
            handle.remove()
        final = output[0] if isinstance(output, (tuple, list)) else output
        features = torch.stack(final.features, dim=1)  # [B, N, D, h, w]
        features = features.flatten(3).transpose(2, 3)  # [B, N, P, D], row-major patches
        scale_token = final.additional_token_features[..., 0]  # [B, D]
        return MapAnythingV1Output(features.float(), scale_token.float())

    def forward(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
        is_metric_scale: Optional[torch.Tensor] = None,
        return_scale_token: bool = False,
    ):
        """Encode groups of frames in their own anchor frame (as ``mapanything_v1``).

        Args:
            images: ``[B, N, 3, H, W]`` RGB in [0, 1]; H, W multiples of 14.
            intrinsics: ``[B, N, 3, 3]`` pinhole K in pixels of H x W.
            cam_to_anchor: ``[B, N, 4, 4]`` T_{X0<-Xi} (frame 0 identity), metres, OpenCV axes.
            is_metric_scale: optional ``[B, N]`` bool; default all True.
            return_scale_token: also return the ``[B, D]`` scale-token output.

        Returns:
            ``[B, N, P, D]`` float32 features, or ``(features, scale_token)``.
        """
        out = self.forward_features(images, intrinsics, cam_to_anchor, is_metric_scale)
        if return_scale_token:
            return out.features, out.scale_token
        return out.features


def load_upstream_mapanything(
    path: Union[str, os.PathLike],
    config: Union[MapAnythingV1Config, str, None] = None,
    dinov2_repo: Union[str, os.PathLike, None] = None,
    autocast_dtype: Optional[torch.dtype] = None,
) -> UpstreamMapAnythingBackbone:
    """Build the ``mapanything_upstream`` backbone and load a local V1 checkpoint.

    Args:
        path: checkpoint directory or file (the layouts ``load_mapanything_v1`` accepts).
        config: sizes; default: the directory's ``config.json`` if any, else preset ``"full"``.
        dinov2_repo: local dinov2 checkout (see :func:`resolve_dinov2_repo`).
        autocast_dtype: passed to the backbone.

    Returns:
        The backbone in eval mode with ``requires_grad`` off.
    """
    _, config_json = resolve_checkpoint(path)
    if isinstance(config, str):
        config = preset(config)
    elif config is None:
        config = read_config(config_json) if config_json is not None else preset("full")
    backbone = UpstreamMapAnythingBackbone(config, dinov2_repo=dinov2_repo,
                                           autocast_dtype=autocast_dtype)
    backbone.load_weights(path)
    return backbone
