"""Rotation matching: the pose between two groups from matches of frozen image features.

G2G's pose head regresses T_{A0<-B0} from pooled tokens and, on 7 x 7 tokens, recovers about half
of every turn over 2 degrees (docs/TRAINING.md, "What limits the regression"). The frozen ImageNet
features under the backbone already match across seasons better than chance (docs/TRAINING.md,
"Encoders"), and a match is a pair of viewing rays: a cell of frame A_i and a cell of frame B_j
that see the same thing. Expressed in their groups' anchor frames through the known intra-group
poses, the two rays of a match differ by the rotation R_{A0<-B0} alone when the scene is far
compared with the distance between the groups (relocalization windows are centimetres to decimetres
apart, the scene metres away). So:

1. a frozen MobileNetV2 stride-16 feature map of every frame of both groups. The pipeline gives
   the frames at the backbone's input size (112 px, the size at which maps store keyframes) and
   they are described enlarged to ``describe_px`` (bilinear; 160 px: 10 x 10 cells): on 7 x 7
   cells a turn under one cell (about 11 deg) keeps most matches at the same cell and the
   rotation shrinks, as G2G's does; the enlarged frames carry no new detail but a finer grid,
   and described that way they match as well as frames rendered at that size (measured);
2. for every frame pair (A_i, B_j), the mutual nearest neighbours of their cells (cosine), each
   B cell moved to where the similarity to its A cell peaks between cells (a parabola per axis
   through the best cell and its neighbours): a turn smaller than a cell moves the peak, not the
   best cell;
3. each match (A's cell centre, B's sub-cell point) lifted to a pair of unit rays in the groups'
   anchor frames (intrinsics and the known T_{X0<-Xi});
4. the rotation that most matches agree with: RANSAC over rotations from two matches, then a
   least-squares fit on the inliers (Kabsch), repeated until the inliers settle, and a last fit
   that weights each agreeing match by its residual angle (Cauchy);
5. with that rotation fixed, the translation from the same agreeing matches: each gives one
   linear constraint (generalized epipolar: the two rays leave camera centres that the known
   intra-group poses place, which gives the metric scale), solved by Huber least squares
   anchored to the caller's (G2G's) translation, which decides what the rays leave open
   (:mod:`g2g_model.estimation.match_geometry`);
6. parallax: when under 40 % of the matches agree with the rotation (``parallax_share``), the
   groups may stand far apart for the scene's depth (a metre from things two metres away, as in
   real indoor relocalization), where no one rotation explains the rays. Then R and t are also
   solved together from all matches (PoseLib's generalized relative pose, started from the
   caller's pose), and that pose is taken when it puts 1.2 x as many matches within 1 deg of
   their epipolar planes as the rotation with its translation does (``parallax_gain``) and B0
   within 2 m of the caller's position (``parallax_max_m``). Between groups close together the
   joint solve from cell-sized matches is the less accurate one (rotation and translation trade
   off, and its scale can run away), which is why it is not the first choice.

The rotation does not shrink with the size of the turn, as a regression does. Where nothing
matches (blank or dark images) too few matches agree, and where neither model explains enough of
them too small a share; then the caller keeps G2G's pose. Limits: on frames without structure
(noise) cells match their own position and the answer is about "no motion" with many inliers,
so the inlier count is not a confidence (random images: 400 of 1,000 matches agree).
Measured in docs/TRAINING.md, "Pose from feature matches" (steps 2's sub-cell peak, 4's
weighted fit and 6).

Why our own small solvers: PoseLib, used for step 6 and the verification's solvers, has no
rotation-only solver for two sets of rays, and ``scipy.spatial.transform.Rotation.align_vectors``
solves one problem per call where RANSAC needs hundreds of hypotheses at once; the batched
Kabsch below is the same closed form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from g2g_model.estimation.cell_matching import cell_rays, group_matches
from g2g_model.estimation.match_geometry import (
    generalized_pose, plane_inliers, translation_given_rotation,
)


FEATURES = ("mobilenetv2", "aliked_t16")


@dataclass
class MatchingConfig:
    """Settings of :class:`RotationMatcher`.

    Attributes:
        describe_px: frames are enlarged (or reduced) to this width, the height in proportion,
            before they are described (0: as given).
        inlier_deg: a match agrees with a rotation when its two rays are this close after it.
        hypotheses: RANSAC hypotheses (rotations from two matches each).
        min_inliers: fewer agreeing matches: no rotation (the caller keeps G2G's rotation).
        min_inlier_share: nor when a smaller share of the matches agrees: the rotation-only
            model does not explain them (groups far apart for the scene's depth, parallax;
            measured: real indoor pairs 1.3 m apart agree at 0.17-0.23, simulator pairs of
            the training scenes at 0.65 in the median).
        translation_prior: weight of the caller's translation against the matches' constraints
            (unit-normal rows, metres) in :func:`translation_given_rotation`.
        subcell: place each match between cells where the similarity peaks
            (:func:`subcell_offsets`) instead of at the best cell's centre.
        final_scale_deg: the last fit weights each agreeing match by
            ``1 / (1 + (angle / final_scale_deg)^2)`` of its residual angle (0: all alike).
        parallax_share: when fewer of the matches agree with the rotation, the pose is also
            solved with parallax
            (:func:`g2g_model.estimation.match_geometry.generalized_pose`; 0: never)
            and taken when it puts ``parallax_gain`` times as many matches within
            ``parallax_plane_deg`` of their epipolar planes as the rotation with its translation
            does (:func:`g2g_model.estimation.match_geometry.plane_inliers`).
        parallax_px: that solve's RANSAC threshold (epipolar distance, pixels of the frames as
            described).
        parallax_max_m: nor when it puts B0 further than this from the caller's position (the
            same bound as the verification's ``prior_translation_m``: the scale of a joint
            solve from cell-sized matches can run away).
        parallax_iterations: at most this many RANSAC iterations of that solve.
        seed: of the RANSAC draws (the result is deterministic for given inputs).
        features: the frozen cell features matched: ``"mobilenetv2"`` (the trunk under the
            ``compact_mnv2`` backbone, shared with it) or ``"aliked_t16"`` (ALIKED-t16's SDDH
            descriptors averaged per cell, :class:`~g2g_model.backbones.aliked.
            AlikedCellTrunk`).
    """

    describe_px: int = 160
    inlier_deg: float = 8.0
    hypotheses: int = 256
    min_inliers: int = 24
    min_inlier_share: float = 0.25
    translation_prior: float = 1.0
    subcell: bool = True
    final_scale_deg: float = 4.0
    parallax_share: float = 0.4
    parallax_gain: float = 1.2
    parallax_plane_deg: float = 1.0
    parallax_px: float = 3.0
    parallax_max_m: float = 2.0
    parallax_iterations: int = 2000
    seed: int = 0
    features: str = "mobilenetv2"

    def validate(self) -> "MatchingConfig":
        if self.features not in FEATURES:
            raise ValueError(f"features must be one of {FEATURES}, got {self.features!r}")
        if not 0 < float(self.inlier_deg) < 90:
            raise ValueError(f"inlier_deg must be in (0, 90), got {self.inlier_deg}")
        if int(self.describe_px) and int(self.describe_px) < 32:
            raise ValueError(f"describe_px must be 0 (as given) or >= 32, got "
                             f"{self.describe_px}")
        if not float(self.translation_prior) > 0:
            raise ValueError(f"translation_prior must be > 0, got {self.translation_prior}")
        if not float(self.parallax_gain) >= 1:
            raise ValueError(f"parallax_gain must be >= 1, got {self.parallax_gain}")
        for name in ("parallax_plane_deg", "parallax_px", "parallax_max_m"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not float(self.final_scale_deg) >= 0:
            raise ValueError(f"final_scale_deg must be >= 0, got {self.final_scale_deg}")
        if not 0 <= float(self.min_inlier_share) < 1:
            raise ValueError(f"min_inlier_share must be in [0, 1), got {self.min_inlier_share}")
        for name in ("hypotheses", "min_inliers", "parallax_iterations"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        return self


@dataclass
class RotationMatch:
    """Outcome of one rotation matching.

    Attributes:
        rotation: ``[3, 3]`` R_{A0<-B0}, or None when fewer than ``min_inliers`` matches agreed.
        inliers: matches that agree with ``rotation`` (with the best hypothesis when None).
        matches: mutual nearest-neighbour matches over all frame pairs.
        reason: why there is no rotation ("" when there is one).
        translation: ``[3]`` B0's position in A0's frame: from the agreeing matches with
            ``rotation`` fixed (:func:`translation_given_rotation`) when the caller gave its
            own pose as the prior, else None; solved with the rotation when ``parallax``.
        parallax: the pose was solved with parallax (rotation and translation together);
            ``inliers`` then counts the matches near their epipolar planes.
    """

    rotation: Optional[np.ndarray]
    inliers: int
    matches: int
    reason: str = ""
    translation: Optional[np.ndarray] = None
    parallax: bool = False


def kabsch(rays_a: np.ndarray, rays_b: np.ndarray, weights: Optional[np.ndarray] = None
           ) -> np.ndarray:
    """Least-squares rotations R with ``rays_a ~ R rays_b``: ``[..., K, 3]`` -> ``[..., 3, 3]``
    (each pair weighted by ``weights`` ``[..., K]`` when given)."""
    if weights is not None:
        rays_b = rays_b * weights[..., None]
    h = np.swapaxes(rays_b, -1, -2) @ rays_a
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(np.swapaxes(vt, -1, -2) @ np.swapaxes(u, -1, -2)))
    fix = np.ones(u.shape[:-2] + (3,))
    fix[..., 2] = d
    return np.swapaxes(vt, -1, -2) @ (fix[..., :, None] * np.swapaxes(u, -1, -2))


def robust_rotation(rays_a: np.ndarray, rays_b: np.ndarray, config: MatchingConfig
                    ) -> Tuple[np.ndarray, np.ndarray]:
    """RANSAC + iterated least squares: (R_{A<-B} ``[3, 3]``, inlier mask ``[K]``) for unit rays
    ``[K, 3]`` (K >= 2) with ``rays_a ~ R rays_b``."""
    rng = np.random.default_rng(config.seed)
    cos_min = np.cos(np.radians(config.inlier_deg))
    first = rng.integers(0, len(rays_a), config.hypotheses)
    second = (first + rng.integers(1, len(rays_a), config.hypotheses)) % len(rays_a)
    pairs = np.stack([first, second], 1)
    hyps = kabsch(rays_a[pairs], rays_b[pairs])                         # [H, 3, 3]
    # rays_a . (R_h rays_b) for every hypothesis h and match k (torch: numpy's einsum is 5x
    # slower here and its BLAS threads compete with torch's for the two cores).
    ta, tb = torch.from_numpy(rays_a), torch.from_numpy(rays_b)
    agree = ((torch.from_numpy(hyps) @ tb.T) * ta.T).sum(1).numpy() > cos_min  # [H, K]
    best = int(agree.sum(1).argmax())
    rotation, inliers = hyps[best], agree[best]
    for _ in range(5):
        if inliers.sum() < 3:
            break
        rotation = kabsch(rays_a[inliers], rays_b[inliers])
        now = np.einsum("kc,cd,kd->k", rays_a, rotation, rays_b) > cos_min
        if np.array_equal(now, inliers):
            break
        inliers = now
    if config.final_scale_deg > 0 and inliers.sum() >= 3:
        # The final fit weights the agreeing matches by their residual angle (Cauchy): a match
        # that barely agrees (parallax, a neighbouring cell) pulls less than one that fits.
        for _ in range(5):
            cos = np.einsum("kc,cd,kd->k", rays_a, rotation, rays_b)
            angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
            weights = np.where(cos > cos_min, 1.0 / (1.0 + (angle / config.final_scale_deg) ** 2),
                               0.0)
            rotation = kabsch(rays_a, rays_b, weights)
    return rotation, inliers


class RotationMatcher:
    """R_{A0<-B0} from two groups' images (module docstring).

    Args:
        config: :class:`MatchingConfig`.
        trunk: the frozen stride-16 feature extractor (``[M, 3, H, W]`` in [0, 1] ->
            ``[M, C, H/16, W/16]``); default the shipped MobileNetV2 trunk (the one under the
            ``compact_mnv2`` backbone: pass ``backbone.stem.trunk`` to share it).
    """

    STRIDE = 16

    def __init__(self, config: Optional[MatchingConfig] = None,
                 trunk: Optional[torch.nn.Module] = None) -> None:
        self.config = (config or MatchingConfig()).validate()
        if trunk is None and self.config.features == "aliked_t16":
            from g2g_model.backbones.aliked import AlikedCellTrunk
            trunk = AlikedCellTrunk("t16")
        elif trunk is None:
            from g2g_model.backbones.mobilenet_v2 import MobileNetV2Trunk
            trunk = MobileNetV2Trunk(self.STRIDE)
        self.trunk = trunk.eval()

    @torch.inference_mode()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        """``[N, 3, H, W]`` RGB in [0, 1] -> ``[N, C, H/16, W/16]`` float32."""
        device = next(self.trunk.parameters()).device
        return self.trunk(images.to(device).float()).float().cpu()

    def resized(self, images: torch.Tensor, intrinsics: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Frames and intrinsics at ``describe_px`` wide (K as
        :func:`g2g_model.estimation.groups.resize_with_intrinsics` scales it)."""
        from g2g_model.estimation.groups import scale_intrinsics

        h, w = images.shape[-2:]
        width = int(self.config.describe_px) or w
        height = max(self.STRIDE, int(round(h * width / w)))
        if (height, width) == (h, w):
            return images, intrinsics
        out = F.interpolate(images.float(), size=(height, width), mode="bilinear",
                            align_corners=False, antialias=width < w)
        return out, scale_intrinsics(intrinsics.double(), width / w, height / h)

    def match(self, images_a: torch.Tensor, intrinsics_a: torch.Tensor, poses_a: torch.Tensor,
              images_b: torch.Tensor, intrinsics_b: torch.Tensor, poses_b: torch.Tensor,
              prior: Optional[np.ndarray] = None) -> RotationMatch:
        """Align two groups: images ``[N, 3, H, W]`` in [0, 1] (any size, a stride-16 grid of
        cells), intrinsics ``[N, 3, 3]`` at that size, ``poses`` ``[N, 4, 4]`` T_{X0<-Xi};
        ``prior``: the caller's T_{A0<-B0} (G2G's), to whose translation the translation from
        the matches is anchored and from which the parallax solve starts."""
        (images_a, intrinsics_a), (images_b, intrinsics_b) = (
            self.resized(images_a, intrinsics_a), self.resized(images_b, intrinsics_b))
        if images_a.shape[1:] == images_b.shape[1:]:  # one batch through the trunk
            fa, fb = self.features(torch.cat([images_a, images_b])).split(
                [len(images_a), len(images_b)])
        else:
            fa, fb = self.features(images_a), self.features(images_b)
        stride = images_a.shape[-1] / fa.shape[-1]
        fi, fj, cells_a, cells_b = group_matches(fa, fb, self.config.subcell)
        ra = cell_rays(cells_a, stride, intrinsics_a[fi], poses_a[fi]).numpy()
        rb = cell_rays(cells_b, stride, intrinsics_b[fj], poses_b[fj]).numpy()
        if len(ra) < max(2, self.config.min_inliers):
            return RotationMatch(None, 0, len(ra), f"{len(ra)} matches (< min_inliers "
                                 f"{self.config.min_inliers})")
        frames = torch.stack([fi, fj], 1).numpy()
        pa, pb = poses_a.double().numpy(), poses_b.double().numpy()
        centres_a, centres_b = pa[frames[:, 0], :3, 3], pb[frames[:, 1], :3, 3]
        rotation, inliers = robust_rotation(ra, rb, self.config)
        count = int(inliers.sum())
        prior = None if prior is None else np.asarray(prior, float)
        t_rot = None
        if count < self.config.parallax_share * len(ra):
            # Rays of far-apart groups disagree with any one rotation (parallax): solve R and t
            # together and keep that pose when it explains clearly more of the matches.
            cells = torch.cat([cells_a.double(), cells_b.double()], 1).numpy()
            pixels = (cells + 0.5) * stride - 0.5
            t_rot = translation_given_rotation(
                ra[inliers], rb[inliers], centres_a[inliers], centres_b[inliers], rotation,
                np.zeros(3) if prior is None else prior[:3, 3], self.config.translation_prior)
            try:
                pose = generalized_pose(
                    pixels[:, :2], pixels[:, 2:], frames[:, 0], frames[:, 1],
                    intrinsics_a.double().numpy(), intrinsics_b.double().numpy(), pa, pb,
                    tuple(images_a.shape[-2:]), np.eye(4) if prior is None else prior,
                    self.config.parallax_px, self.config.parallax_iterations)
            except (RuntimeError, ValueError):  # a solver failure leaves the rotation's path
                pose = np.full((4, 4), np.nan)
            deg = self.config.parallax_plane_deg
            fit = plane_inliers(ra, rb, centres_a, centres_b, pose[:3, :3], pose[:3, 3], deg)
            moved = np.linalg.norm(pose[:3, 3] - (np.zeros(3) if prior is None else prior[:3, 3]))
            if (np.all(np.isfinite(pose)) and moved <= self.config.parallax_max_m
                    and fit >= self.config.min_inliers
                    and fit > self.config.parallax_gain * plane_inliers(
                        ra, rb, centres_a, centres_b, rotation, t_rot, deg)):
                return RotationMatch(pose[:3, :3], fit, len(ra), translation=pose[:3, 3],
                                     parallax=True)
        if count < self.config.min_inliers or not np.all(np.isfinite(rotation)):
            return RotationMatch(None, count, len(ra), f"{count} of {len(ra)} matches agree "
                                 f"(< min_inliers {self.config.min_inliers})")
        if count < self.config.min_inlier_share * len(ra):
            return RotationMatch(None, count, len(ra), f"{count} of {len(ra)} matches agree "
                                 f"(< min_inlier_share {self.config.min_inlier_share:g}): "
                                 "not one rotation (parallax or wrong matches)")
        translation = None
        if prior is not None:  # the parallax check's t_rot is this same solve
            translation = t_rot if t_rot is not None else translation_given_rotation(
                ra[inliers], rb[inliers], centres_a[inliers], centres_b[inliers], rotation,
                prior[:3, 3], self.config.translation_prior)
        return RotationMatch(rotation, count, len(ra), translation=translation)


def matcher_for(setting, header: Optional[dict], backbone=None) -> Optional[RotationMatcher]:
    """The pipeline's rotation matcher for ``setting``: "auto" (on for relocalization
    checkpoints, the ones measured in docs/TRAINING.md; off for rig odometry and untrained
    stand-ins), True, False / None, or a :class:`MatchingConfig`. Shares the MobileNetV2 trunk of a
    ``compact_mnv2`` backbone (the same frozen weights) instead of loading a second copy."""
    if setting == "auto":
        setting = ((header or {}).get("training") or {}).get("task") == "reloc"
    if setting is None or setting is False:
        return None
    if setting is True:
        config = MatchingConfig()
    elif isinstance(setting, MatchingConfig):
        config = setting
    else:
        raise ValueError(f"rotation_matching must be 'auto', True, False, None or a "
                         f"MatchingConfig, got {setting!r}")
    from g2g_model.backbones.mobilenet_v2 import MobileNetV2Trunk

    trunk = getattr(getattr(backbone, "stem", None), "trunk", None)
    shared = (isinstance(trunk, MobileNetV2Trunk) and trunk.stride == RotationMatcher.STRIDE
              and config.features == "mobilenetv2")
    return RotationMatcher(config, trunk if shared else None)
