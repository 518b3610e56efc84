"""Inference API: ``G2GPipeline.predict(group_a, group_b)`` on arbitrary user data.

The pipeline owns a frozen backbone and a :class:`~g2g_model.model.g2g.G2GModel`. ``predict``
validates and prepares both groups (resize with consistent intrinsics, re-anchoring to frame 0;
see :mod:`g2g_model.estimation.groups`), encodes each group once (features can be passed in when
cached, e.g. from a map), and runs the trainable modules in one pass.

Returned poses are camera-to-anchor transforms T_{A0<-X} (OpenCV axes, metres). Because group A
was given in some world frame, ``world_T_b`` also expresses group B's predicted poses in A's world.

Both directions (``both_directions``, on by default for relocalization checkpoints): the modules
also run with the groups exchanged (the encoded features are reused, so it costs one more pass of
the small modules, not of the backbone). Every frame's prediction of either pass, carried through
the known intra-group poses, is one estimate of T_{A0<-B0}; the returned poses are their mean,
made rigid with B's input poses, and the estimates themselves are kept (``b0_estimates``) for the
consistency checks of the relocalizer and of rig odometry. Rig-odometry checkpoints trained on
forward motion only run one way; trained with reversed pairs too, as the default is, both
(measured: docs/TRAINING.md). One way, the answer is B's frames as predicted (T_{A0<-B0} is
frame B0's own prediction) and the other frames' estimates only enter those checks: on the
previous rig default their mean was 2 % better on moving held-out pairs but 2.7x worse in
rotation when the rig stood still (B = A: 0.64 against 0.24 deg on a held-out scene;
docs/TRAINING.md, "Rig odometry").

Rotation matching (``rotation_matching``, on by default for relocalization checkpoints): the
rotation of T_{A0<-B0} is then taken from matches of the frozen image features of both groups
(:mod:`g2g_model.estimation.rotation_matching`) wherever enough of them agree, and the translation
from the same matches with that rotation fixed, anchored to G2G's; ``Prediction.rotation_match``
says what it found. On held-out simulator pairs it takes the rotation error from 3.2 to 1.5 deg
and the translation error from 0.081 to 0.045 m (docs/TRAINING.md, "Pose from feature matches").
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.assets import default_checkpoint
from g2g_model.backbones.base import Backbone, backbone_class, build_backbone
from g2g_model.geometry import (
    b0_estimates, fuse_directions, invert_pose, project_to_rigid,
)
from g2g_model.estimation.groups import PreparedGroup, prepare_group
from g2g_model.estimation.match_geometry import with_pose
from g2g_model.model.checkpoint import load_any
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.precision import autocast, bf16_is_fast
from g2g_model.estimation.rotation_matching import RotationMatch, matcher_for

LOG = logging.getLogger(__name__)

#: W of the untrained stand-in (:meth:`G2GPipeline.untrained_default`).
UNTRAINED_MAX_FRAMES = 8


@dataclass
class Prediction:
    """Result of :meth:`G2GPipeline.predict`.

    Attributes:
        poses_a: ``[N_A, 4, 4]`` T_{A0<-Ai}; ``poses_a[0]`` is the identity.
        poses_b: ``[N_B, 4, 4]`` T_{A0<-Bj}.
        world_T_b: ``[N_B, 4, 4]`` group B's predicted camera poses in group A's world frame.
        timing_ms: ``prepare``, ``encode``, ``g2g`` and ``total`` wall times.
        untrained: True when the weights are random (wiring tests), never for a checkpoint.
        features_a, features_b: the ``[1, N, P, D]`` backbone features used (for caching).
        b0_estimates: ``[K, 4, 4]`` the estimates of T_{A0<-B0} that ``poses_b`` fuses (one per
            frame of B, plus one per frame of A when both directions ran).
        directions: 1, or 2 when the groups also ran exchanged.
        rotation_match: the rotation matching's outcome (None when it is off); when it found a
            rotation, ``poses_b`` carry it and its translation, and ``b0_estimates`` stay G2G's
            own.
    """

    poses_a: np.ndarray
    poses_b: np.ndarray
    world_T_b: np.ndarray
    timing_ms: Dict[str, float] = field(default_factory=dict)
    untrained: bool = False
    features_a: Optional[torch.Tensor] = field(default=None, repr=False)
    features_b: Optional[torch.Tensor] = field(default=None, repr=False)
    b0_estimates: Optional[np.ndarray] = field(default=None, repr=False)
    directions: int = 1
    rotation_match: Optional[RotationMatch] = None

    @property
    def a0_T_b0(self) -> np.ndarray:
        """The inter-group alignment T_{A0<-B0}."""
        return self.poses_b[0]


class G2GPipeline:
    """Frozen backbone + G2G modules.

    Args:
        backbone: any registered :class:`Backbone` (frozen here: eval mode, no gradients).
        model: the trainable modules; ``model.config.input_dim`` must equal the backbone's D.
        device: torch device string.
        bf16: run under bf16 autocast: True, False or "auto" (see :func:`bf16_is_fast`).
        header: checkpoint header (kept for ``info`` and logs).
        both_directions: also run with the groups exchanged and fuse (module docstring): True,
            False or "auto": True for checkpoints trained on relocalization pairs or with a
            share of the pairs reversed (``data.reverse_fraction`` > 0), the ones that learned
            motion in both orders.
        rotation_matching: the rotation from feature matches (module docstring): "auto" (on for
            relocalization checkpoints), True, False or a ``MatchingConfig``.
    """

    def __init__(self, backbone: Backbone, model: G2GModel, device: str = "cpu",
                 bf16="auto", header: Optional[dict] = None, untrained: bool = False,
                 both_directions="auto", rotation_matching="auto"):
        if model.config.input_dim != backbone.feature_dim:
            raise ValueError(
                f"G2G input_dim={model.config.input_dim} does not match the backbone "
                f"{backbone.name!r} feature_dim={backbone.feature_dim}"
            )
        self.device = torch.device(device)
        self.backbone = backbone.to(self.device).eval()
        for p in self.backbone.parameters():
            p.requires_grad_(False)
        self.model = model.to(self.device).eval()
        self.bf16 = bf16_is_fast(self.device) if bf16 == "auto" else bool(bf16)
        self.header = header or {}
        self.untrained = untrained
        if both_directions == "auto":
            training = self.header.get("training") or {}
            both_directions = (training.get("task") == "reloc"
                               or float(training.get("reverse_fraction") or 0.0) > 0.0)
        elif not isinstance(both_directions, bool):
            raise ValueError(f"both_directions must be True, False or 'auto', got "
                             f"{both_directions!r}")
        self.both_directions = both_directions
        self.rotation_matcher = matcher_for(rotation_matching, self.header, self.backbone)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_checkpoint(cls, path, device: str = "cpu", bf16="auto",
                        backbone_weights: Optional[str] = None,
                        both_directions="auto", rotation_matching="auto") -> "G2GPipeline":
        """Build from a checkpoint of ours (backbone named in its header).

        A backbone trained here (``compact``) ships inside the checkpoint; ``backbone_weights``
        must then be empty. A checkpoint for an external backbone (``mapanything_v1``, e.g. a
        converted official release) needs ``backbone_weights``: a local file or folder (the
        release's ``map-anything-model/``). Every mismatch raises ``ValueError`` with the reason.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"checkpoint {path!r} does not exist")
        loaded = load_any(path)
        info = loaded.header.get("backbone") or {}
        name = info.get("name")
        if not name:
            raise ValueError(f"checkpoint {path!r} does not name its backbone")
        if loaded.backbone_state_dict:
            if backbone_weights:
                raise ValueError(
                    f"checkpoint {path!r} includes the weights of its backbone {name!r}; "
                    f"backbone_weights must be empty (got {os.fspath(backbone_weights)!r})")
            backbone = build_backbone(name, info.get("config"))
            backbone.load_state_dict(loaded.backbone_state_dict, strict=True)
        elif backbone_weights:
            backbone = backbone_class(name).from_weights(os.fspath(backbone_weights),
                                                         info.get("config") or None)
            if loaded.model.config.input_dim != backbone.feature_dim:
                raise ValueError(
                    f"checkpoint {path!r} takes {loaded.model.config.input_dim}-dim features "
                    f"(input_dim), but the backbone weights {os.fspath(backbone_weights)!r} "
                    f"give {backbone.feature_dim}-dim features: they do not belong together")
        else:
            raise ValueError(
                f"checkpoint {path!r} does not include the weights of backbone {name!r}; "
                "pass backbone_weights=<local file or folder> (node parameter and launch "
                "argument backbone_weights)"
            )
        LOG.info("loaded %s (backbone %s, preset %s)", path, name, loaded.header.get("preset"))
        return cls(backbone, loaded.model, device=device, bf16=bf16, header=loaded.header,
                   both_directions=both_directions,
                   rotation_matching=rotation_matching)

    @classmethod
    def untrained_default(cls, device: str = "cpu", seed: int = 0,
                          backbone: str = "compact", g2g_preset: str = "small",
                          max_frames: int = UNTRAINED_MAX_FRAMES) -> "G2GPipeline":
        """Random weights with the default architecture: for wiring tests only (flagged)."""
        torch.manual_seed(seed)
        bb = build_backbone(backbone, None)
        model = G2GModel(preset(g2g_preset, input_dim=bb.feature_dim, max_frames=max_frames))
        LOG.warning("G2G pipeline with RANDOM weights (no checkpoint): outputs are meaningless")
        return cls(bb, model, device=device, header={"preset": g2g_preset}, untrained=True)

    @classmethod
    def default(cls, task: str = "relocalization", device: str = "cpu",
                rotation_matching="auto") -> "G2GPipeline":
        """The embedded default for ``task``, or the untrained stand-in if none is shipped."""
        path = default_checkpoint(task)
        if path is None:
            return cls.untrained_default(device=device)
        return cls.from_checkpoint(path, device=device, rotation_matching=rotation_matching)

    # ---------------------------------------------------------------- running
    @property
    def image_size(self) -> tuple:
        return tuple(self.backbone.image_size)

    @property
    def max_frames(self) -> int:
        return self.model.config.max_frames

    def backbone_id(self) -> Dict[str, str]:
        """``{"name", "config_hash"}`` identifying the encoder (maps and covisibility
        checkpoints store it). The hash covers the configuration AND the weights: tokens of the
        same architecture with other weights are just as incompatible."""
        if getattr(self, "_backbone_id", None) is None:
            from g2g_model.backbones.identity import encoder_id

            self._backbone_id = encoder_id(self.backbone)
        return self._backbone_id

    def prepare(self, group, name: str = "group") -> PreparedGroup:
        return prepare_group(group, self.image_size, name=name)

    @torch.inference_mode()
    def encode(self, prepared: PreparedGroup) -> torch.Tensor:
        """Backbone features ``[1, N, P, D]`` (float32) of a prepared group."""
        return self._encode_batch([prepared])

    @torch.inference_mode()
    def _encode_batch(self, groups: Sequence[PreparedGroup]) -> torch.Tensor:
        """Backbone features ``[B, N, P, D]`` (float32) of B prepared groups of one shape."""
        with autocast(self.device, torch.bfloat16 if self.bf16 else None):
            feats = self.backbone(*(torch.cat([getattr(g, name) for g in groups]).to(self.device)
                                    for name in ("images", "intrinsics", "cam_to_anchor")))
        return feats.float()

    @torch.inference_mode()
    def encode_frames(self, images, intrinsics, batch_size: int = 16) -> torch.Tensor:
        """Encode frames one by one (each as a single-frame group at the identity).

        These per-frame tokens are what maps cache and what window selection compares
        (ARCHITECTURE §4: every frame is encoded once, linear in the number of frames).

        Args:
            images: T RGB ``uint8 [H, W, 3]``.
            intrinsics: ``[T, 3, 3]`` or one ``[3, 3]``.

        Returns:
            ``[T, P, D]`` float32 on the CPU.
        """
        from g2g_model.estimation.groups import Group

        k = np.asarray(intrinsics, dtype=np.float64)
        if k.shape == (3, 3):
            k = np.broadcast_to(k, (len(images), 3, 3))
        out = []
        for start in range(0, len(images), batch_size):
            chunk = range(start, min(start + batch_size, len(images)))
            preps = [self.prepare(Group([images[i]], k[i], np.eye(4)[None]), f"frame {i}")
                     for i in chunk]
            imgs = torch.cat([p.images for p in preps], 0).to(self.device)      # [b, 1, 3, H, W]
            ks = torch.cat([p.intrinsics for p in preps], 0).to(self.device)
            poses = torch.cat([p.cam_to_anchor for p in preps], 0).to(self.device)
            with autocast(self.device, torch.bfloat16 if self.bf16 else None):
                feats = self.backbone(imgs, ks, poses)
            out.append(feats[:, 0].float().cpu())
        if not out:
            return torch.zeros(0)
        return torch.cat(out, 0)

    @torch.inference_mode()
    def run_features(self, features_a: torch.Tensor, features_b: torch.Tensor) -> Dict:
        with autocast(self.device, torch.bfloat16 if self.bf16 else None):
            out = self.model(features_a.to(self.device), features_b.to(self.device))
        return {k: v.float().cpu() for k, v in out.items()}

    def encode_pair(self, prep_a: PreparedGroup, prep_b: PreparedGroup,
                    features_a: Optional[torch.Tensor] = None,
                    features_b: Optional[torch.Tensor] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """:meth:`encode` of both groups (cached ``features_*`` kept): one batch of two groups
        where both need encoding and have as many frames (the same features, less overhead)."""
        if (features_a is None and features_b is None
                and prep_a.images.shape == prep_b.images.shape):
            both = self._encode_batch([prep_a, prep_b])
            return both[:1], both[1:]
        return (self.encode(prep_a) if features_a is None else features_a,
                self.encode(prep_b) if features_b is None else features_b)

    def run_both_ways(self, fa: torch.Tensor, fb: torch.Tensor
                      ) -> Tuple[Dict, Optional[Dict]]:
        """The modules on (A, B), and on (B, A) when :attr:`both_directions` (else None): one
        batch of two where the groups have as many frames and patches."""
        if not self.both_directions:
            return self.run_features(fa, fb), None
        if fa.shape != fb.shape:
            return self.run_features(fa, fb), self.run_features(fb, fa)
        out = self.run_features(torch.cat([fa, fb]), torch.cat([fb, fa]))
        return ({k: v[:1] for k, v in out.items()}, {k: v[1:] for k, v in out.items()})

    def predict(self, group_a, group_b, features_a: Optional[torch.Tensor] = None,
                features_b: Optional[torch.Tensor] = None) -> Prediction:
        """Predict every frame's pose relative to A0 (see :class:`Prediction`).

        Args:
            group_a, group_b: :class:`g2g_model.estimation.groups.Group` or dicts with ``images``,
                ``intrinsics``, ``cam_to_world``.
            features_a, features_b: cached ``[1, N, P, D]`` backbone features of the same
                groups (skips encoding them).
        """
        t0 = time.perf_counter()
        prep_a = self.prepare(group_a, "group_a")
        prep_b = self.prepare(group_b, "group_b")
        pred = self.predict_prepared(prep_a, prep_b, features_a, features_b)
        pred.timing_ms["prepare"] = 1e3 * (time.perf_counter() - t0) - pred.timing_ms["total"]
        pred.timing_ms["total"] += pred.timing_ms["prepare"]
        return pred

    def predict_prepared(self, prep_a: PreparedGroup, prep_b: PreparedGroup,
                         features_a: Optional[torch.Tensor] = None,
                         features_b: Optional[torch.Tensor] = None) -> Prediction:
        """:meth:`predict` on groups already at the backbone's size (``g2g-eval``'s loaded
        pairs, with their clean or noisy input poses)."""
        for name, prep in (("group_a", prep_a), ("group_b", prep_b)):
            if prep.num_frames > self.max_frames:
                raise ValueError(f"{name} has {prep.num_frames} frames; this model takes at "
                                 f"most {self.max_frames} per group")
        t1 = time.perf_counter()
        fa, fb = self.encode_pair(prep_a, prep_b, features_a, features_b)
        t2 = time.perf_counter()
        out, back = self.run_both_ways(fa, fb)
        # Proper rigid transforms (rotations projected onto SO(3), as g2g-eval scores them).
        poses_a = np.concatenate([np.eye(4)[None],
                                  project_to_rigid(out["poses_a"][0].double().numpy())], axis=0)
        poses_b = project_to_rigid(out["poses_b"][0].double().numpy())
        input_b = prep_b.cam_to_anchor[0].double().numpy()
        if back is not None:
            back = project_to_rigid(back["poses_b"][0].double().numpy())
            poses_b, estimates = fuse_directions(
                poses_b, back, prep_a.cam_to_anchor[0].double().numpy(), input_b)
        else:
            estimates = b0_estimates(poses_b, input_b)
        t3 = time.perf_counter()
        matched = None
        if self.rotation_matcher is not None:
            # From the frames at the backbone's input size, as maps store their keyframes.
            a0_T_b0 = poses_b[0] @ invert_pose(input_b[0])
            matched = self.rotation_matcher.match(
                prep_a.images[0], prep_a.intrinsics[0], prep_a.cam_to_anchor[0],
                prep_b.images[0], prep_b.intrinsics[0], prep_b.cam_to_anchor[0],
                prior=a0_T_b0)
            if matched.rotation is not None:
                poses_b = with_pose(a0_T_b0, input_b, matched.rotation, matched.translation)
        t4 = time.perf_counter()
        return Prediction(
            poses_a=poses_a,
            poses_b=poses_b,
            world_T_b=prep_a.anchor_to_world[None] @ poses_b,
            timing_ms={"prepare": 0.0, "encode": 1e3 * (t2 - t1), "g2g": 1e3 * (t3 - t2),
                       "match": 1e3 * (t4 - t3), "total": 1e3 * (t4 - t1)},
            untrained=self.untrained,
            features_a=fa,
            features_b=fb,
            b0_estimates=estimates,
            directions=2 if self.both_directions else 1,
            rotation_match=matched,
        )
