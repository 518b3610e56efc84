"""Relocalization's verifier: the map window's structure first, then (``relative_fallback``) the
query's anchor frame from its 2D-3D and 2D-2D matches, then the windows' relative pose, then
(``fallback_feature``) all of it again with another kind of local feature.

:class:`~g2g_model.localization.verification.StructureVerifier` needs map points: the map
window's frames are matched with each other and triangulated with their metric poses, and the
query is solved against those points. A short window, or one seen from nearly one spot,
triangulates few points; then the query finds too few 2D-3D inliers and the structure gives no
pose, although the two windows share plenty of texture (real 3 + 3 TUM windows, 2026-11-30: 5
of 60 pairs with 16-28 inliers against the 30 needed, from about 100 matches).

The query's anchor frame is then solved alone from its few 2D-3D matches and its 2D-2D matches
with the map frames together (:mod:`~g2g_model.localization.anchor_hybrid`; its reason starts
with ``the anchor frame's 2D-3D and 2D-2D matches:``), judged by the rules below. Where that
gives no trusted pose, the two windows still have their 2D-2D matches, and each window's
intra-group poses are
known (the map's, the query's odometry), so the pose between them is a generalized relative
pose: the rig odometry's verifier (:class:`~g2g_model.localization.rig_motion.RigMotionVerifier`,
relative pose only: no overlap path, no keyframe map, no standstill test) between the map window
and the query window placed by G2G's estimate. Placed so, only frame pairs whose views can
overlap if G2G's rotation is within ``prior_rotation_deg`` of the truth are matched, at most
:data:`MAX_FRAME_PAIRS` of them, those looking most the same way (:func:`facing_pairs`: the
matching is the cost); the solution is the correction of G2G's estimate, judged by the rules of
every geometric pose (inliers, position uncertainty, distance from G2G) and three more
(:meth:`RelocalizationVerifier._check`, :meth:`RelocalizationVerifier._confirm`: the map's own
points must agree). Its reason starts with ``relative pose between the windows:``. It is less
precise than the structure and its residuals say less than that: its covariance is published
:data:`SD_SCALE` times wider.

Where the structure solves, its pose is kept: on the real TUM windows it is the more accurate of
the two (5 + 5: 0.41 against 0.49 deg, 1.2 against 2.2 cm median, docs/VERIFICATION.md).

Off by default (``VerifierConfig.relative_fallback``). The relative pose alone, on the simulated
twin of ``bench_real_reloc`` (windows of 0.2-0.36 m), made 20 fixes of 18, one of them wrong
(0.18 m / 3.4 deg) that passed every rule here (without :meth:`RelocalizationVerifier._confirm`:
22, two wrong by 1.12 m / 23.6 deg and 0.29 m / 10.2 deg). With the anchor frame's solve first
(2026-11-30): 19 fixes of 30 on the twin, none wrong (that window is solved by the anchor
frame, 0.8 cm off); real 3 + 3 TUM windows 57 of 60 accepted, none falsely; docs/VERIFICATION.md
has the measurements.

Another kind of feature (``VerifierConfig.fallback_feature``, e.g. ALIKED where RootSIFT is the
``feature``): where the first kind gives no geometric pose, and no ambiguous one (a pose with a
rival is refused, not solved again), the same verification runs with the other features, each
kind with its own caches and half of ``cache_mb`` for them; its reason then says which features
made the pose and why the first gave none. On plain surfaces, where RootSIFT finds too few
matches, learned features still match (docs/VERIFICATION.md, "Learned local features"); where
RootSIFT solves, its pose is kept.
"""

from __future__ import annotations

from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.geometry import invert_pose
from g2g_model.localization.absolute_pose import reprojection_errors
from g2g_model.localization.anchor_hybrid import anchor_hybrid_pose
from g2g_model.localization.covariance import transfer_covariance
from g2g_model.localization.local_features import LocalFeatures
from g2g_model.localization.rig_motion import RigMotionVerifier
from g2g_model.localization.rig_pairs import overlapping_pairs
from g2g_model.localization.verdict import Fallback, judge
from g2g_model.localization.verification import (
    G2G_COVARIANCE, PATH_G2G, QueryMatches, StructureVerifier, Verification, VerifierConfig,
)

PREFIX = "relative pose between the windows: "
HYBRID_PREFIX = "the anchor frame's 2D-3D and 2D-2D matches: "
# The least share of the matches that a relative pose must explain. A match lies on its
# epipolar line by chance far more often than a 2D-3D match reprojects onto its point by
# chance: a map window of another scene gave a relative pose with 73 inliers of 1,386 matches
# (5 %), the simulated and real windows of the same place 27-55 %.
MIN_INLIER_SHARE = 0.2
# Frame pairs matched at most (those looking most the same way): the matching, not the solver,
# is the cost (a 25 + 25-frame rig window of another scene: 484 frame pairs, 1.9 s; PoseLib
# 0.09 s of it).
MAX_FRAME_PAIRS = 50
# The published covariance of a relative pose is its Sampson-error covariance with standard
# deviations this many times larger: its errors were 1.1-9.8 times those deviations on the four
# real TUM windows it solved (2026-11-30; 1.6-22 cm, 0.6-3.8 deg) and up to 12 times on
# simulated windows of one instant (test_window_relative.py). The trust rules see the
# unscaled one.
SD_SCALE = 10.0
# The least number of the query's 2D-3D matches with the map window's points (the structure's,
# too few for its own solve) that must reproject at the relative pose. On the five real TUM
# windows the structure failed on (2026-11-30): 9 and 10 for relative poses 1.6 and 3.9 cm off,
# 1 and 3 for those 17 and 22 cm off.
MIN_MAP_AGREEMENT = 8


class RelocalizationVerifier:
    """``verifier(group_a, query, map_T_b) -> Verification``: the arguments and the outcome of
    :class:`~g2g_model.localization.verification.StructureVerifier` (module docstring); with
    ``config.relative_fallback`` off it is that verifier alone."""

    def __init__(self, config: Optional[VerifierConfig] = None,
                 features: Optional[LocalFeatures] = None) -> None:
        config = config or VerifierConfig()
        if config.fallback_feature:  # two kinds of features share the caches' memory
            config = replace(config, cache_mb=config.cache_mb / 2)
        self.structure = StructureVerifier(config, features)
        self.config, self.local = self.structure.config, self.structure.local
        self.relative = None
        if self.config.relative_fallback:
            self.relative = RigMotionVerifier(
                replace(self.config, overlap=False, keyframe_map=False, standstill_deg=0.0),
                self.local)
        self.other = None  # the verifier with the fallback features
        if self.config.fallback_feature:
            self.other = RelocalizationVerifier(replace(
                self.config, feature=self.config.fallback_feature, fallback_feature=""))

    def cache_bytes(self) -> int:
        """Bytes held by the verifier's caches (the relative pose keeps none of its own)."""
        return self.structure.cache_bytes() + (self.other.cache_bytes() if self.other else 0)

    def __call__(self, group_a, query, map_T_b: np.ndarray,
                 view_prior: Optional[np.ndarray] = None,
                 pairs: Optional[Sequence[Tuple[int, int]]] = None) -> Verification:
        result = self._with_features(group_a, query, map_T_b, view_prior, pairs)
        if self.other is None or result.path != PATH_G2G or result.ambiguous:
            return result
        again = self.other(group_a, query, map_T_b, view_prior, pairs)
        first, other = self.config.feature, self.other.config.feature
        if again.path == PATH_G2G:
            result.reason += f"; {other}: {again.reason}"
            return result
        again.reason = f"{other}: {again.reason} ({first}: {result.reason})"
        return again

    def _with_features(self, group_a, query, map_T_b: np.ndarray,
                       view_prior: Optional[np.ndarray],
                       pairs: Optional[Sequence[Tuple[int, int]]]) -> Verification:
        """The structure, then the relative-pose fallbacks, with ``config.feature``."""
        result = self.structure(group_a, query, map_T_b, view_prior, pairs)
        map_T_b = np.asarray(map_T_b, float)
        if (result.path != PATH_G2G or self.relative is None or result.ambiguous
                or not np.all(np.isfinite(map_T_b))):
            return result
        # The query's 2D-3D matches with the map window's points: too few for the structure's
        # solve, still evidence for the two poses tried next.
        found = self.structure.query_matches(group_a, query, view_prior, pairs)
        hybrid = self._anchor_hybrid(group_a, query, found, map_T_b)
        if hybrid.path != PATH_G2G:
            return hybrid
        result.reason += f"; {hybrid.reason}"
        map_T_a = np.asarray(group_a.cam_to_world, float)
        a0_T_map = invert_pose(map_T_a[0])
        # The query's frames where G2G puts them, in the map window's first camera frame: the
        # relative pose then solves the correction of G2G's estimate.
        placed = Group(query.images, query.intrinsics, a0_T_map[None] @ map_T_b)
        window = Group(group_a.images, group_a.intrinsics, a0_T_map[None] @ map_T_a)
        step = self.relative(window, placed, np.eye(4),
                             pairs=facing_pairs(window, placed, self.config.prior_rotation_deg))
        if step.path == PATH_G2G:
            result.reason += f"; {PREFIX}{step.reason}"
            return result
        correction = np.asarray(step.delta, float)
        map_T_b0 = map_T_a[0] @ correction @ a0_T_map @ map_T_b[0]
        cov = map_covariance(step.covariance, correction, (a0_T_map @ map_T_b[0])[:3, 3],
                             map_T_a[0])
        try:
            self._check(step.inliers, step.matched)
            self._confirm(found, map_T_b0)
            # The rules of every relocalization pose, on the query's first camera in the map.
            path, reason, apart = judge(map_T_b[0], map_T_b0, cov, step.inliers, step.matched,
                                        self.config, near_prior=True)
        except Fallback as why:
            result.reason += f"; {PREFIX}{why}"
            return result
        return Verification(path, map_T_b0, cov * SD_SCALE ** 2, step.inliers, PREFIX + reason,
                            apart)

    def _anchor_hybrid(self, group_a, query, found: QueryMatches, map_T_b: np.ndarray
                       ) -> Verification:
        """The query's anchor frame alone from its 2D-3D (``found``) and 2D-2D matches with the
        map window (:func:`~g2g_model.localization.anchor_hybrid.anchor_hybrid_pose`), judged as
        every geometric pose and by :meth:`_check`; a ``g2g`` outcome says why not."""
        cfg = self.config
        try:
            solved, cov, inliers, matched = anchor_hybrid_pose(
                self.local, group_a, query, found, map_T_b[0], cfg.reprojection_px)
            if inliers < cfg.min_inliers:
                raise Fallback(f"{inliers} inliers (< verify_min_inliers {cfg.min_inliers})")
            self._check(inliers, matched)
            path, reason, apart = judge(map_T_b[0], solved, cov, inliers, matched, cfg,
                                        near_prior=True)
        except Fallback as why:
            return Verification(PATH_G2G, map_T_b[0], G2G_COVARIANCE.copy(), 0,
                                f"{HYBRID_PREFIX}{why}")
        return Verification(path, solved, cov, inliers, HYBRID_PREFIX + reason, apart)

    @staticmethod
    def _check(inliers: int, matched: int) -> None:
        """Raises :class:`Fallback` where a pose from 2D-2D matches explains too few of them
        (module docstring); :func:`judge` with ``near_prior`` then never trusts it beyond
        ``prior_translation_m`` / ``prior_rotation_deg`` of G2G (an epipolar inlier is a weaker
        witness than a 2D-3D one)."""
        if inliers < MIN_INLIER_SHARE * matched:
            raise Fallback(f"{inliers} inliers of {matched} matches (< {MIN_INLIER_SHARE:.0%})")

    def _confirm(self, found: QueryMatches, map_T_b0: np.ndarray) -> None:
        """Raises :class:`Fallback` unless at least :data:`MIN_MAP_AGREEMENT` of the query's
        2D-3D matches with the map window's points (``found``: the structure's, too few to
        solve alone) reproject within ``reprojection_px`` at the relative pose: a second check
        of it."""
        errors = reprojection_errors(invert_pose(map_T_b0), found.p2d, found.p3d,
                                     [e.Rt for e in found.exts], found.k_b)
        agree = int(sum((e < self.config.reprojection_px).sum() for e in errors))
        if agree < MIN_MAP_AGREEMENT:
            raise Fallback(f"{agree} of the map window's {sum(len(x) for x in found.p2d)} "
                           f"2D-3D matches agree with it (< {MIN_MAP_AGREEMENT}): not "
                           "confirmed by the map's points")


def facing_pairs(window: Group, placed: Group, max_turn_deg: float,
                 most: Optional[int] = None) -> List[Tuple[int, int]]:
    """(map frame, query frame) pairs to match: those whose views can overlap if G2G placed the
    query within ``max_turn_deg`` of the truth (:func:`overlapping_pairs`, both in the map
    window's first camera frame), at most ``most`` (default :data:`MAX_FRAME_PAIRS`) of them,
    the ones whose optical axes are closest."""
    pairs = overlapping_pairs(window, placed, max_turn_deg)
    axes_a = np.asarray(window.cam_to_world, float)[:, :3, 2]
    axes_b = np.asarray(placed.cam_to_world, float)[:, :3, 2]
    cosine = [float(axes_a[i] @ axes_b[j]) for i, j in pairs]
    keep = np.argsort(cosine, kind="stable")[::-1][:MAX_FRAME_PAIRS if most is None else most]
    return sorted(pairs[k] for k in keep)


def map_covariance(cov: np.ndarray, correction: np.ndarray, b0: np.ndarray,
                   map_T_a0: np.ndarray) -> np.ndarray:
    """The covariance of the query's first camera in the map (x y z of its centre, then small
    rotations about the map axes) from ``cov``, that of ``correction`` (a translation and a
    rotation about the map window's first camera's axes, :func:`~.rig_epipolar.perturbed`),
    which moves G2G's first query camera, at ``b0`` in that camera's frame: the correction's
    covariance carried to that camera (:func:`~.covariance.transfer_covariance`), then rotated
    into the map's axes."""
    moved = transfer_covariance(np.asarray(cov, float),
                                correction[:3, :3] @ np.asarray(b0, float))
    rot = np.kron(np.eye(2), np.asarray(map_T_a0, float)[:3, :3])
    out = rot @ moved @ rot.T
    return 0.5 * (out + out.T)
