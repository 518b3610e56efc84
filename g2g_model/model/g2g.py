"""G2GModel: the trainable part of G2G, from frozen-backbone features to all poses w.r.t. A0.

    features [B, N, P, D_in] --embed_proj (only if D_in != C)--> [B, N, P, C]
        --PerceiverResampler (shared by A and B)--> [B, N, L, C]
        --CrossGroupBridge (A and B jointly)--> [B, N, L, C]
        --MultiFramePoseHead--> 6D rotation + translation per target
        --Gram-Schmidt--> rotation matrices, 4x4 poses T_{A0<-X}

Parameter names equal the official ``Stage2ModelMultiFrame`` names (minus ``backbone.*`` and
its two image-normalisation buffers), see :mod:`g2g_model.model.official`.
"""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn

from g2g_model.model.bridge import CrossGroupBridge
from g2g_model.model.config import G2GConfig
from g2g_model.model.pose_head import MultiFramePoseHead
from g2g_model.model.resampler import PerceiverResampler
from g2g_model.model.rotation import compose_pose, rotation_6d_to_matrix

MODULE_NAMES = ("embed_proj", "resampler", "bridge", "pose_head")


class G2GModel(nn.Module):
    """Resampler + bridge + multi-frame pose head, built from a :class:`G2GConfig`.

    Output keys of :meth:`forward` (T = N_A - 1 + N_B targets, in the order A1..A_{N_A-1},
    B0..B_{N_B-1}; every pose is T_{A0<-X}, x_A0 = R x_X + t, OpenCV axes, metres):

    * ``rotations_6d [B, T, 6]`` raw head outputs, ``rotation_matrices [B, T, 3, 3]``,
      ``translations [B, T, 3]``, ``poses [B, T, 4, 4]``;
    * the same split per group, named as in the official code: ``rotations_a [B, N_A-1, 6]``
      (6D), ``rotation_matrices_a``, ``translations_a``, ``poses_a``, and ``*_b`` with N_B rows.
      ``poses_b[:, 0]`` is the inter-group alignment T_{A0<-B0} (official ``T_rel``);
    * with ``return_intermediates=True`` also ``intermediate.<name>`` tensors: features_a/_b,
      latents_a/_b, bridge_merged_input, bridge_pre_out_norm, all_tokens_a/_b, pose_kv,
      pose_attended, pose_rot_feat, pose_trans_feat (the names of the golden fixtures).
    """

    def __init__(self, config: G2GConfig):
        super().__init__()
        self.config = config
        # Built first: with a fixed seed, this order reproduces the official initialisation.
        if config.has_input_projection:
            self.embed_proj = nn.Linear(config.input_dim, config.hidden_dim)
        else:
            self.embed_proj = nn.Identity()
        self.resampler = PerceiverResampler(config)
        self.bridge = CrossGroupBridge(config)
        self.pose_head = MultiFramePoseHead(config)
        if config.feature_norm_patches:
            shape = (config.feature_norm_patches, config.input_dim)
            self.register_buffer("feature_mean", torch.zeros(shape))
            self.register_buffer("feature_scale", torch.ones(shape))

    @torch.no_grad()
    def set_feature_statistics(self, features: torch.Tensor, eps: float = 1e-6) -> None:
        """Set the standardisation of ``feature_norm_patches`` from ``[..., P, D_in]`` features
        (any leading shape: groups, frames): per patch and channel mean and 1 / std."""
        cfg = self.config
        if not cfg.feature_norm_patches:
            raise ValueError("set_feature_statistics needs feature_norm_patches > 0")
        flat = features.detach().reshape(-1, *features.shape[-2:]).double()
        if tuple(flat.shape[1:]) != tuple(self.feature_mean.shape) or flat.shape[0] < 2:
            raise ValueError(f"feature statistics need >= 2 samples of "
                             f"[P={cfg.feature_norm_patches}, D_in={cfg.input_dim}], got "
                             f"{list(features.shape)}")
        self.feature_mean.copy_(flat.mean(0))
        self.feature_scale.copy_(1.0 / (flat.std(0) + eps))

    def normalize_features(self, features: torch.Tensor, name: str) -> torch.Tensor:
        """``(features - mean) * scale`` when ``feature_norm_patches`` is set, else unchanged."""
        if not self.config.feature_norm_patches:
            return features
        if features.shape[-2] != self.config.feature_norm_patches:
            raise ValueError(f"{name} has {features.shape[-2]} patches, the feature statistics "
                             f"of this model cover {self.config.feature_norm_patches}")
        return (features - self.feature_mean) * self.feature_scale

    def check_inputs(self, features_a: torch.Tensor, features_b: torch.Tensor) -> None:
        """Raise ``ValueError`` naming the offending input when shapes do not fit the config."""
        cfg = self.config
        for name, feats in (("features_a", features_a), ("features_b", features_b)):
            if feats.dim() != 4:
                raise ValueError(
                    f"{name} must be [B, N, P, D_in], got shape {tuple(feats.shape)}"
                )
            if not feats.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor, got {feats.dtype}")
            frames = feats.shape[1]
            if frames < 1 or frames > cfg.max_frames:
                raise ValueError(
                    f"{name} has {frames} frames; this model takes 1 to max_frames="
                    f"{cfg.max_frames} frames per group"
                )
            if feats.shape[2] < 1:
                raise ValueError(f"{name} has no patches (shape {tuple(feats.shape)})")
            if feats.shape[3] != cfg.input_dim:
                raise ValueError(
                    f"{name} has feature dim {feats.shape[3]}, the model expects "
                    f"input_dim={cfg.input_dim}"
                )
        if features_a.shape[0] != features_b.shape[0]:
            raise ValueError(
                f"batch sizes differ: features_a has {features_a.shape[0]}, "
                f"features_b has {features_b.shape[0]}"
            )

    def forward(
        self,
        features_a: torch.Tensor,
        features_b: torch.Tensor,
        return_intermediates: bool = False,
    ) -> Dict[str, torch.Tensor]:
        """Predict T_{A0<-A_i} (i >= 1) and T_{A0<-B_j} (j >= 0) in one pass.

        Args:
            features_a: ``[B, N_A, P, D_in]`` backbone features of group A (frame 0 = anchor).
            features_b: ``[B, N_B, P', D_in]`` backbone features of group B. 1 <= N_A, N_B <= W.
            return_intermediates: also return the ``intermediate.*`` tensors.

        Returns:
            dict of tensors, see the class docstring.
        """
        self.check_inputs(features_a, features_b)
        frames_a = features_a.shape[1]
        feats_a = self.embed_proj(self.normalize_features(features_a, "features_a"))
        feats_b = self.embed_proj(self.normalize_features(features_b, "features_b"))
        latents_a = self.resampler(feats_a)
        latents_b = self.resampler(feats_b)
        tokens_a, tokens_b, bridge_inter = self.bridge(
            latents_a, latents_b, return_intermediates=return_intermediates
        )
        head = self.pose_head(tokens_a, tokens_b, return_intermediates=return_intermediates)

        # Poses leave in float32 even under bf16 autocast: Gram-Schmidt in bf16 would give
        # rotations that are orthonormal only to ~1e-2.
        rot6d, trans = head["rotations_6d"].float(), head["translations"].float()
        matrices = rotation_6d_to_matrix(rot6d)
        poses = compose_pose(matrices, trans)
        split = frames_a - 1
        out = {
            "rotations_6d": rot6d,
            "rotation_matrices": matrices,
            "translations": trans,
            "poses": poses,
            "rotations_a": rot6d[:, :split],
            "rotation_matrices_a": matrices[:, :split],
            "translations_a": trans[:, :split],
            "poses_a": poses[:, :split],
            "rotations_b": rot6d[:, split:],
            "rotation_matrices_b": matrices[:, split:],
            "translations_b": trans[:, split:],
            "poses_b": poses[:, split:],
        }
        if return_intermediates:
            inter = {
                "features_a": feats_a,
                "features_b": feats_b,
                "latents_a": latents_a,
                "latents_b": latents_b,
                **bridge_inter,
                "all_tokens_a": tokens_a,
                "all_tokens_b": tokens_b,
            }
            inter.update({k: v for k, v in head.items() if k.startswith("pose_")})
            out.update({f"intermediate.{k}": v for k, v in inter.items()})
        return out


def count_parameters(model: nn.Module, trainable_only: bool = True) -> Dict[str, int]:
    """Parameter counts per top-level module of a :class:`G2GModel`, plus ``total``."""
    counts: Dict[str, int] = {}
    for name, child in model.named_children():
        counts[name] = sum(
            p.numel() for p in child.parameters() if p.requires_grad or not trainable_only
        )
    counts["total"] = sum(
        p.numel() for p in model.parameters() if p.requires_grad or not trainable_only
    )
    return counts
