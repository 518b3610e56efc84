"""Classical group-to-group baseline: SIFT + essential matrices on every cross pair.

Given two groups of images with known intra-group extrinsics, estimate ``T_{A0<-Bj}`` for every
frame of group B:

1. Each group's cam-to-world poses are re-anchored to its frame 0 (``T_{A0<-Ai}``,
   ``T_{B0<-Bj}``).
2. For every cross pair (A_i, B_j): OpenCV SIFT, Lowe ratio test, robust essential matrix
   (USAC with local optimisation by default, plain RANSAC as an option) on per-pair *normalised*
   coordinates (``K^-1 [u v 1]``, so the two frames may have different
   intrinsics) and ``recoverPose``: ``x_Bj = R x_Ai + t`` with ``|t| = 1``.
3. Rotation: each pair's rotation is lifted to ``R_{A0<-B0} = R_{A0<-Ai} R^T R_{B0<-Bj}^T`` and all
   pairs are averaged with an inlier-weighted geodesic L1 median (Weiszfeld iterations on SO(3));
   pairs far from the consensus are rejected as outliers and the median is recomputed.
4. Translation: each pair with enough parallax gives a ray in A0: origin = centre of A_i, direction
   = ``R_{A0<-Ai} (-R^T t)``, on which the centre of B_j must lie. With the known offsets
   (``c_Bj = c_B0 + R_{A0<-B0} o_j``, ``o_j`` the centre of B_j in B0) every ray constrains the
   single unknown ``c_B0``. It is found by RANSAC over all pairs of rays (deterministic
   enumeration) and a weighted least-squares intersection of the inlier rays. Fewer than two usable
   rays, no ray consensus or near-parallel rays (no metric depth) make the translation *fail*:
   it is reported as NaN with a reason, never silently zero.

Modules: this one (configuration, results, the estimator), :mod:`.two_view` (step 2) and
:mod:`.consensus` (the rotation median of step 3 and the ray intersection of step 4).

Every pair is reported in :attr:`ClassicalResult.pairs` (keypoints, matches, inliers, parallax,
what it was used for and why not); failed pairs are listed by :attr:`ClassicalResult.failed_pairs`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from typing import Dict, List, Optional, Sequence, Tuple, Union

import cv2
import numpy as np

from g2g_model.baseline.consensus import angle_deg, ray_consensus, rotation_l1_median
from g2g_model.baseline.two_view import (ESSENTIAL_METHODS, essential_relative_pose,
                                         median_parallax_deg, normalise_pixels)
from g2g_model.geometry import make_pose, reanchor, rotation_angle_deg

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ClassicalConfig:
    """Settings of the classical baseline (defaults next to the code that uses them)."""

    max_features: int = 4000            # SIFT keypoints per image (0 = unlimited)
    ratio: float = 0.8                  # Lowe ratio test
    min_matches: int = 20               # after the ratio test
    min_inliers: int = 15               # after RANSAC + cheirality
    # Robust estimator of cv2.findEssentialMat; USAC_ACCURATE adds local optimisation, which
    # measurably sharpens the translation directions (rays) over plain RANSAC.
    essential_method: str = "usac_accurate"
    ransac_threshold_px: float = 1.0    # epipolar distance, converted per pair to normalised units
    ransac_confidence: float = 0.999
    ransac_max_iters: int = 2000
    min_parallax_deg: float = 1.0       # median parallax below this: rotation only (no direction)
    rotation_outlier_deg: float = 10.0  # lifted rotation further than this from consensus: outlier
    rotation_iterations: int = 50       # Weiszfeld iterations
    ray_inlier_deg: float = 5.0         # angle between a ray and the direction to its B centre
    min_rays: int = 2
    min_ray_angle_deg: float = 2.0      # rays closer to parallel than this give no metric depth
    max_ray_hypotheses: int = 2000      # ray pairs tried (all pairs when fewer)
    seed: int = 0                       # only used when ray pairs must be subsampled

    def __post_init__(self):
        if not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"ratio must be in (0, 1], got {self.ratio}")
        if self.min_matches < 5 or self.min_inliers < 5:
            raise ValueError(
                f"min_matches and min_inliers must be >= 5 (five-point solver), got "
                f"{self.min_matches}, {self.min_inliers}"
            )
        if self.min_rays < 2:
            raise ValueError(f"min_rays must be >= 2 to fix metric scale, got {self.min_rays}")
        if self.essential_method not in ESSENTIAL_METHODS:
            raise ValueError(f"essential_method must be one of {sorted(ESSENTIAL_METHODS)}, "
                             f"got {self.essential_method!r}")
        if self.ransac_threshold_px <= 0:
            raise ValueError(f"ransac_threshold_px must be > 0, got {self.ransac_threshold_px}")


CLASSICAL_PRESETS: Dict[str, ClassicalConfig] = {
    "default": ClassicalConfig(),
    # Fewer keypoints for quick CPU runs on small images.
    "fast": ClassicalConfig(max_features=1500, ransac_max_iters=1000),
    # Textbook variant (plain RANSAC, no local optimisation), for comparison.
    "ransac": ClassicalConfig(essential_method="ransac"),
}


@dataclasses.dataclass
class ImageGroup:
    """One group of frames.

    Attributes:
        images: ``N`` uint8 images ``[H, W, 3]`` (RGB or BGR: only the grey level is used).
        intrinsics: one ``[3, 3]`` K for all frames or ``[N, 3, 3]``.
        poses: ``[N, 4, 4]`` cam-to-world poses (any world frame; re-anchored internally).
    """

    images: Sequence[np.ndarray]
    intrinsics: np.ndarray
    poses: np.ndarray

    def __post_init__(self):
        n = len(self.images)
        if n == 0:
            raise ValueError("images must contain at least one frame")
        for k, img in enumerate(self.images):
            img = np.asarray(img)
            if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
                raise ValueError(
                    f"images[{k}] must be uint8 [H,W,3], got {img.dtype} {img.shape}"
                )
        k_mat = np.asarray(self.intrinsics, dtype=np.float64)
        if k_mat.shape == (3, 3):
            k_mat = np.broadcast_to(k_mat, (n, 3, 3))
        if k_mat.shape != (n, 3, 3):
            raise ValueError(f"intrinsics must be [3,3] or [{n},3,3], got {k_mat.shape}")
        if np.any(k_mat[:, 0, 0] <= 0) or np.any(k_mat[:, 1, 1] <= 0):
            raise ValueError("intrinsics must have positive focal lengths")
        self.intrinsics = np.array(k_mat)
        poses = np.asarray(self.poses, dtype=np.float64)
        if poses.shape != (n, 4, 4):
            raise ValueError(f"poses must be [{n},4,4], got {poses.shape}")
        self.poses = poses


GroupLike = Union[ImageGroup, Tuple[Sequence[np.ndarray], np.ndarray, np.ndarray]]


@dataclasses.dataclass
class PairResult:
    """Outcome for one cross pair (A_i, B_j).

    ``rotation_a0_b0``: this pair's estimate of ``R_{A0<-B0}`` (None if the pair failed).
    ``ray_direction_a0``: unit direction from the centre of A_i towards B_j, in A0 (None when
    the pair failed or had too little parallax). ``reason`` says why a pair is not (fully) used.
    """

    index_a: int
    index_b: int
    n_keypoints_a: int = 0
    n_keypoints_b: int = 0
    n_matches: int = 0
    n_inliers: int = 0
    parallax_deg: float = 0.0
    rotation_a0_b0: Optional[np.ndarray] = None
    ray_direction_a0: Optional[np.ndarray] = None
    used_for_rotation: bool = False
    used_for_translation: bool = False
    reason: str = ""

    @property
    def failed(self) -> bool:
        """True when the pair contributes nothing (not even a rotation)."""
        return not self.used_for_rotation


@dataclasses.dataclass
class ClassicalResult:
    """Result of :meth:`ClassicalBaseline.predict`.

    Attributes:
        poses_b: ``[N_B, 4, 4]`` predicted ``T_{A0<-Bj}``. Rotation block NaN when the rotation
            failed; translation NaN when the translation failed.
        poses_a: ``[N_A, 4, 4]`` ``T_{A0<-Ai}`` (the given intra-group poses, re-anchored).
        rotation_ok / translation_ok, rotation_reason / translation_reason: overall status.
        pairs: one :class:`PairResult` per cross pair, ``i``-major.
        timing_s: seconds per stage (``features``: SIFT; ``pairs``: matching and two-view
            geometry of all cross pairs; ``aggregation``; ``total``).
        n_rays / n_ray_inliers: rays available / agreeing with the translation.
    """

    poses_b: np.ndarray
    poses_a: np.ndarray
    rotation_ok: bool
    translation_ok: bool
    rotation_reason: str
    translation_reason: str
    pairs: List[PairResult]
    timing_s: Dict[str, float]
    n_rays: int = 0
    n_ray_inliers: int = 0

    @property
    def ok(self) -> bool:
        return self.rotation_ok and self.translation_ok

    @property
    def failed_pairs(self) -> List[PairResult]:
        return [p for p in self.pairs if p.failed]

    @property
    def pose_b0(self) -> np.ndarray:
        """The primary pose ``T_{A0<-B0}`` ``[4, 4]``."""
        return self.poses_b[0]


class ClassicalBaseline:
    """SIFT + essential-matrix group-to-group pose estimator (see module docstring)."""

    def __init__(self, config: Union[ClassicalConfig, str] = "default"):
        if isinstance(config, str):
            if config not in CLASSICAL_PRESETS:
                raise ValueError(
                    f"unknown classical preset {config!r}; known: {sorted(CLASSICAL_PRESETS)}"
                )
            config = CLASSICAL_PRESETS[config]
        self.config = config
        self._sift = cv2.SIFT_create(nfeatures=config.max_features)
        self._matcher = cv2.BFMatcher(cv2.NORM_L2)

    # ------------------------------------------------------------------ public
    def predict(self, group_a: GroupLike, group_b: GroupLike) -> ClassicalResult:
        """Estimate ``T_{A0<-Bj}`` for every frame of group B.

        Args:
            group_a, group_b: :class:`ImageGroup` or ``(images, intrinsics, poses)`` tuples.
        Returns:
            :class:`ClassicalResult` (never raises for bad image content: failures are reported).
        """
        t_start = time.perf_counter()
        ga, gb = _as_group(group_a, "group_a"), _as_group(group_b, "group_b")
        ext_a = reanchor(ga.poses)  # T_{A0<-Ai}
        ext_b = reanchor(gb.poses)  # T_{B0<-Bj}

        feats_a = [self._features(img) for img in ga.images]
        feats_b = [self._features(img) for img in gb.images]
        t_feat = time.perf_counter()

        pairs: List[PairResult] = []
        for i, j in itertools.product(range(len(feats_a)), range(len(feats_b))):
            pairs.append(self._pair(i, j, feats_a[i], feats_b[j], ga.intrinsics[i],
                                    gb.intrinsics[j], ext_a[i], ext_b[j]))
        t_match = time.perf_counter()

        poses_b = np.full((len(gb.images), 4, 4), np.nan)
        poses_b[:, 3] = [0.0, 0.0, 0.0, 1.0]
        rot, rot_reason = self._average_rotation(pairs)
        trans, trans_reason, n_rays, n_inl = None, "rotation failed", 0, 0
        if rot is not None:
            trans, trans_reason, n_rays, n_inl = self._solve_translation(pairs, rot, ext_a, ext_b)
            poses_b = make_pose(rot, trans if trans is not None else np.zeros(3))[None] @ ext_b
            if trans is None:  # reported as failed, never as a silent zero
                poses_b[:, :3, 3] = np.nan
        t_end = time.perf_counter()
        result = ClassicalResult(
            poses_b=poses_b, poses_a=ext_a,
            rotation_ok=rot is not None, translation_ok=trans is not None,
            rotation_reason=rot_reason, translation_reason=trans_reason, pairs=pairs,
            timing_s={"features": t_feat - t_start, "pairs": t_match - t_feat,
                      "aggregation": t_end - t_match, "total": t_end - t_start},
            n_rays=n_rays, n_ray_inliers=n_inl,
        )
        if not result.ok:
            logger.info("classical baseline: rotation %s, translation %s",
                        rot_reason or "ok", trans_reason or "ok")
        return result

    # ------------------------------------------------------------------ features / pairs
    def _features(self, image: np.ndarray) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        grey = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2GRAY)
        keypoints, desc = self._sift.detectAndCompute(grey, None)
        pts = np.array([kp.pt for kp in keypoints], dtype=np.float64).reshape(-1, 2)
        return pts, desc

    def _pair(self, i, j, feat_a, feat_b, k_a, k_b, ext_ai, ext_bj) -> PairResult:
        cfg = self.config
        pts_a, desc_a = feat_a
        pts_b, desc_b = feat_b
        res = PairResult(index_a=i, index_b=j, n_keypoints_a=len(pts_a), n_keypoints_b=len(pts_b))
        if len(pts_a) < cfg.min_matches or len(pts_b) < cfg.min_matches:
            res.reason = (f"too few keypoints (A{i}: {len(pts_a)}, B{j}: {len(pts_b)}; "
                          f"need {cfg.min_matches})")
            return res
        knn = self._matcher.knnMatch(desc_a, desc_b, k=2)
        good = [m[0] for m in knn if len(m) == 2 and m[0].distance < cfg.ratio * m[1].distance]
        res.n_matches = len(good)
        if len(good) < cfg.min_matches:
            res.reason = f"too few matches after ratio test ({len(good)} < {cfg.min_matches})"
            return res
        xa = normalise_pixels(pts_a[[m.queryIdx for m in good]], k_a)
        xb = normalise_pixels(pts_b[[m.trainIdx for m in good]], k_b)
        focal = 0.25 * (k_a[0, 0] + k_a[1, 1] + k_b[0, 0] + k_b[1, 1])
        try:
            rel = essential_relative_pose(xa, xb, cfg.ransac_threshold_px / focal, cfg)
        except cv2.error as exc:  # degenerate input inside OpenCV
            res.reason = f"essential matrix estimation failed: {str(exc).strip()[:120]}"
            return res
        if rel is None:
            res.reason = "essential matrix estimation failed (no solution)"
            return res
        r_ba, t_ba, inliers = rel  # x_Bj = r_ba x_Ai + t_ba
        res.n_inliers = int(inliers.sum())
        if res.n_inliers < cfg.min_inliers:
            res.reason = f"too few inliers ({res.n_inliers} < {cfg.min_inliers})"
            return res
        res.parallax_deg = median_parallax_deg(xa[inliers], xb[inliers], r_ba)
        r_ab = r_ba.T
        res.rotation_a0_b0 = ext_ai[:3, :3] @ r_ab @ ext_bj[:3, :3].T
        res.used_for_rotation = True
        if res.parallax_deg < cfg.min_parallax_deg:
            res.reason = (f"low parallax ({res.parallax_deg:.2f} deg < "
                          f"{cfg.min_parallax_deg}): rotation only")
            return res
        direction = ext_ai[:3, :3] @ (-r_ab @ t_ba)
        res.ray_direction_a0 = direction / np.linalg.norm(direction)
        return res

    # ------------------------------------------------------------------ aggregation
    def _average_rotation(self, pairs: List[PairResult]) -> Tuple[Optional[np.ndarray], str]:
        cfg = self.config
        usable = [p for p in pairs if p.used_for_rotation]
        if not usable:
            return None, "no pair gave a relative pose"
        rots = np.stack([p.rotation_a0_b0 for p in usable])
        weights = np.array([p.n_inliers for p in usable], dtype=np.float64)
        rot = rotation_l1_median(rots, weights, cfg.rotation_iterations)
        errors = rotation_angle_deg(np.swapaxes(rot[None], -1, -2) @ rots)
        keep = errors <= cfg.rotation_outlier_deg
        if not np.any(keep):
            for p in usable:
                p.used_for_rotation = False
                p.ray_direction_a0 = None
                p.reason = "rotation disagrees with every other pair"
            return None, "no rotation consensus among pairs"
        if not np.all(keep):
            for p, err, k in zip(usable, errors, keep):
                if not k:
                    p.used_for_rotation = False
                    p.ray_direction_a0 = None
                    p.reason = (f"rotation outlier ({err:.1f} deg from consensus > "
                                f"{cfg.rotation_outlier_deg})")
            rot = rotation_l1_median(rots[keep], weights[keep], cfg.rotation_iterations)
        return rot, ""

    def _solve_translation(self, pairs, rot, ext_a, ext_b):
        """Returns ``(c_B0 or None, reason, n_rays, n_inliers)``."""
        cfg = self.config
        ray_pairs = [p for p in pairs if p.used_for_rotation and p.ray_direction_a0 is not None]
        n = len(ray_pairs)
        if n < cfg.min_rays:
            return None, f"fewer than {cfg.min_rays} usable rays ({n})", n, 0
        # Shift every ray by its B offset so that all of them must pass through c_B0.
        origins = np.stack([ext_a[p.index_a, :3, 3] - rot @ ext_b[p.index_b, :3, 3]
                            for p in ray_pairs])
        dirs = np.stack([p.ray_direction_a0 for p in ray_pairs])
        weights = np.array([p.n_inliers for p in ray_pairs], dtype=np.float64)
        centre, best_mask, reason = ray_consensus(
            origins, dirs, weights, cfg.ray_inlier_deg, cfg.min_rays, cfg.min_ray_angle_deg,
            cfg.max_ray_hypotheses, cfg.seed)
        if centre is None:
            if best_mask is None:
                for p in ray_pairs:
                    p.reason = "translation: no consistent ray pair"
            return None, reason, n, 0
        for p, used, o, d in zip(ray_pairs, best_mask, origins, dirs):
            p.used_for_translation = bool(used)
            if not used:
                v = centre - o
                ang = angle_deg(v, d)
                p.reason = f"translation ray outlier ({ang:.1f} deg > {cfg.ray_inlier_deg})"
        return centre, "", n, int(best_mask.sum())


def _as_group(group: GroupLike, name: str) -> ImageGroup:
    if isinstance(group, ImageGroup):
        return group
    if isinstance(group, (tuple, list)) and len(group) == 3:
        return ImageGroup(*group)
    raise ValueError(f"{name} must be an ImageGroup or an (images, intrinsics, poses) tuple, "
                     f"got {type(group).__name__}")
