"""Geometric verification and refinement of G2G's rig odometry.

Between two keyframes of a calibrated multi-camera rig, each camera of the previous keyframe is
matched with each camera of the current one whose view can overlap it (local features, see
:mod:`g2g_model.localization.local_features`; :func:`overlapping_pairs` decides from the rig's
extrinsics and intrinsics), and ONE rigid body motion is solved by
generalized relative pose with RANSAC and non-linear refinement (PoseLib's
``estimate_generalized_relative_pose``, seeded with G2G's motion). With cameras spread around
the body and any rotation, the rig's metric extrinsics make the translation's scale observable.
The covariance comes from the inliers' Sampson errors (``sigma^2 (J^T J)^-1``). The outcome
takes the same paths as relocalization: ``verified`` / ``refined`` / ``g2g`` with the reason.
A step whose length is G2G's (straight motion, one camera pair: below) takes the ``g2g`` path
with the geometry's rotation and direction (``MotionVerification.length_from_g2g``): the
geometry did not verify its length, and at car scale G2G's length is the whole error (a car
standing still, docs/VERIFICATION.md), so such a step is not reported as verified. So does a
mirrored solution (most inliers meeting behind their cameras, a second fit of a straight step:
:data:`MIN_IN_FRONT`), with its rotation only and G2G's translation.

Where that relative pose fails or cannot measure the step's length (straight motion, one
camera pair) and cameras of the rig overlap, the step is solved from the points those cameras
triangulate at the previous keyframe with the calibrated extrinsics, by generalized absolute
pose (:mod:`~g2g_model.localization.rig_overlap`; ``MotionVerification.method`` says which;
docs/VERIFICATION.md has the rule and its measurements).

Standing still is the one motion this geometry cannot solve: with no parallax the translation
is unobservable and the solver's pose is unconstrained, so the step used to fall back to G2G,
whose answer for a repeated group is not exactly the identity (0.1-2.4 deg per keyframe on
held-out scenes): a parked robot turned. When each camera's matches with itself moved less than
``standstill_deg`` (median, as an angle from the camera; ``VerifierConfig``), the motion is the
identity (``stationary``), and rig odometry keeps its keyframe, so a slow creep adds up against
it until it shows.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.local_features import LocalFeatures, per_frame_intrinsics
from g2g_model.localization.rig_epipolar import (
    G2G_STEP_COVARIANCE, camera_matrix, explained_matches, in_front_fraction, motion_covariance,
)
from g2g_model.localization.motion_verification import MotionVerification
from g2g_model.localization.rig_keyframe_map import (
    agrees_with_velocity, constant_velocity, keyframe_map_motion, pick_step,
)
from g2g_model.localization.rig_overlap import overlap_motion
from g2g_model.localization.rig_pairs import overlapping_pairs, view_cone_deg  # noqa: F401
from g2g_model.localization.verdict import PATH_G2G, Fallback, judge
from g2g_model.localization.verification import (
    StructureVerifier, VerifierConfig, new_local_features,
)
from g2g_model.poselib_conversions import camera_pose, pinhole_camera, pose_matrix

# A geometric rotation this certain is kept even when the step's length is not observable.
MAX_ROTATION_SD_DEG = 0.5
# A relative-pose solution under which fewer of its inliers triangulate in front of both
# cameras is a mirrored one (:func:`~.rig_epipolar.in_front_fraction`: measured 0 % for those,
# 99-100 % for correct steps).
MIN_IN_FRONT = 0.5
# Rig odometry's verification settings where they differ from relocalization's (the
# rig_odometry node's defaults, g2g-eval's): features of images downscaled to a long side of
# 320 px, at most 1,000 per image, and only the camera pairs whose views can overlap when the
# rig turns up to 30 deg between keyframes: a 640x480 5-camera step costs a third of what it
# did at full size (docs/VERIFICATION.md, "Cost", has the measurements and what it costs in
# accuracy; 600 features were cheaper still but let wrong step lengths through far more often).
RIG_DEFAULTS = {"max_image_px": 320, "max_features": 1000, "max_turn_deg": 30.0}


def rig_verifier_config(**overrides) -> VerifierConfig:
    """:class:`VerifierConfig` with :data:`RIG_DEFAULTS` (then ``overrides``)."""
    return VerifierConfig(**{**RIG_DEFAULTS, **overrides})


class RigMotionVerifier:
    """``verifier(group_a, group_b, delta) -> MotionVerification``.

    ``group_a`` / ``group_b``: the rig at the previous / current keyframe, ``cam_to_world`` =
    base_T_cam of each camera (the body frame at that instant is the group's world);
    ``delta``: G2G's base_prev_T_base_now. The verifier's config is that of relocalization
    (:class:`VerifierConfig`, by default :func:`rig_verifier_config`); its ``reprojection_px``
    is the epipolar threshold here.
    """

    takes_before = True  # RigOdometry hands it the keyframe before the previous one

    def __init__(self, config: Optional[VerifierConfig] = None,
                 features: Optional[LocalFeatures] = None):
        self.config = (config or rig_verifier_config()).validate()
        cfg = self.config
        self.local = features if features is not None else new_local_features(cfg)
        # Relocalization's verifier, sharing the features: the overlap path (rig_overlap).
        self.structure = StructureVerifier(cfg, self.local, guided=True)

    def cache_bytes(self) -> int:
        """Bytes held by the verifier's caches (at most ``cache_mb``)."""
        return self.structure.cache_bytes()

    def __call__(self, group_a, group_b, delta: np.ndarray,
                 before: Optional[Tuple[object, np.ndarray]] = None,
                 pairs: Optional[List[Tuple[int, int]]] = None) -> MotionVerification:
        """``before``: optional ``(group, step)``, the rig at the keyframe before ``group_a``
        and the step from it to ``group_a`` (base_before_T_base_a) where the geometry measured
        its length: the keyframe map (:mod:`.rig_keyframe_map`; ``VerifierConfig.keyframe_map``)
        then also solves the step, and :func:`~.rig_keyframe_map.pick_step` picks one.
        ``pairs``: the (camera of ``group_a``, camera of ``group_b``) pairs to match (default:
        those whose views can overlap, :func:`overlapping_pairs`)."""
        delta = np.asarray(delta, float)
        fallback = MotionVerification(PATH_G2G, delta.copy())
        if not self.config.keyframe_map:
            before = None
        try:
            return self._verify(group_a, group_b, delta, before, pairs)
        except Fallback as why:
            fallback.reason = str(why)
            return fallback

    def _verify(self, group_a, group_b, delta: np.ndarray, before,
                pairs: Optional[List[Tuple[int, int]]] = None) -> MotionVerification:
        import poselib

        cfg = self.config
        if not np.all(np.isfinite(delta)):
            raise Fallback("G2G's motion is not finite")
        sides = []
        for group in (group_a, group_b):
            ks = per_frame_intrinsics(group.intrinsics, len(group.images))
            sides.append(([self.local.describe(im) for im in group.images],
                          [camera_pose(invert_pose(T)) for T in np.asarray(group.cam_to_world)],
                          [pinhole_camera(k, im) for k, im in zip(ks, group.images)]))
        (fa, ext_a, cams_a), (fb, ext_b, cams_b) = sides
        total = min(sum(len(f.keypoints) for f in fa), sum(len(f.keypoints) for f in fb))
        if total < cfg.min_inliers:
            raise Fallback(f"too few features ({total}): blank, dark or textureless images")
        matches: List = []
        camera_pairs = (overlapping_pairs(group_a, group_b, cfg.max_turn_deg) if pairs is None
                        else pairs)
        for i, j in camera_pairs:
            f1, f2 = fa[i], fb[j]
            pairs = self.local.match(f1.descriptors, f2.descriptors)
            if len(pairs) < 5:
                continue
            m = poselib.PairwiseMatches()
            m.cam_id1, m.cam_id2 = i, j
            m.x1, m.x2 = f1.keypoints[pairs[:, 0]], f2.keypoints[pairs[:, 1]]
            matches.append(m)
        matched = sum(len(m.x1) for m in matches)
        result = self._choose(group_a, group_b, delta, before, matches, matched, ext_a, cams_a,
                              ext_b, cams_b)
        if not result.stationary:
            solved = result.delta.copy()
            result.explain = lambda: explained_matches(solved, matches, ext_a, ext_b, cams_a,
                                                       cams_b, cfg.reprojection_px / 2)
        return result

    def _choose(self, group_a, group_b, delta: np.ndarray, before, matches, matched: int,
                ext_a, cams_a, ext_b, cams_b) -> MotionVerification:
        """The step of the geometry the rules pick (module docstring); raises
        :class:`Fallback`."""
        cfg = self.config
        if matched >= cfg.min_inliers:
            still = self._standstill(matches, cams_a, cams_b, delta, matched)
            if still is not None:
                return still
        # The relative pose and, with a measured previous step that the relative pose's step
        # departs from, the keyframe map (rig_keyframe_map); the overlap (rig_overlap) only
        # where neither gives the step's length: both failed, or the relative pose took it
        # from G2G (straight motion, one camera pair) and there is no keyframe map.
        try:
            if matched < cfg.min_inliers:
                raise Fallback(f"{matched} matches between the keyframes (< {cfg.min_inliers})")
            relative = self._relative(matches, matched, ext_a, cams_a, ext_b, cams_b, delta)
        except Fallback as failed:
            why, relative = str(failed), None
        else:
            why = "its length is G2G's" if relative.length_from_g2g else ""
        candidates = [] if relative is None or relative.length_from_g2g else [relative]
        points, notes = [], ""
        predicted = (None if before is None
                     else constant_velocity(before[0], before[1], group_a, group_b))
        if predicted is not None and candidates:
            agreed = agrees_with_velocity(relative.delta, predicted)
            if agreed is not None:
                relative.reason += (f"; keyframe map not asked: the step agrees with the "
                                    f"previous step's velocity ({agreed:.2f} m apart)")
                return relative
        if before is not None:
            try:
                step = keyframe_map_motion(self.structure, before[0], before[1], group_a,
                                           group_b, delta, cfg.max_turn_deg)
            except Fallback as no_map:
                notes = f"; keyframe map: {no_map}"
            else:
                points.append(step)
                candidates.append(MotionVerification(
                    step.path, step.delta, step.covariance, step.inliers,
                    f"keyframe map: {step.reason}", step.apart, method="keyframe map"))
        if len(candidates) > 1:
            return pick_step(candidates, matches, ext_a, ext_b, cams_a, cams_b, points,
                             cfg.reprojection_px, predicted)
        if candidates:
            chosen = candidates[0]
            if why:
                chosen.reason += f"; relative pose: {why}"
            chosen.reason += notes
            return chosen
        overlap = self._overlap(group_a, group_b, delta)
        if isinstance(overlap, MotionVerification):
            overlap.reason = f"overlap: {overlap.reason}; relative pose: {why}{notes}"
            return overlap
        if relative is None:
            raise Fallback(f"{why}{overlap}{notes}")
        relative.reason += overlap + notes
        return relative

    def _overlap(self, group_a, group_b, delta: np.ndarray):
        """The step from the rig's overlapping cameras (:mod:`.rig_overlap`) as a
        :class:`MotionVerification`, or why not (a note for the reason; "" when the rig has no
        overlapping cameras or the path is off)."""
        if not self.config.overlap:
            return ""
        pairs = [(i, j) for i, j in overlapping_pairs(group_a, group_a, 0.0) if i < j]
        if not pairs:
            return ""
        try:
            step = overlap_motion(self.structure, group_a, group_b, delta, pairs,
                                  overlapping_pairs(group_a, group_b, self.config.max_turn_deg))
        except Fallback as why:
            return f"; overlap: {why}"
        return MotionVerification(step.path, step.delta, step.covariance, step.inliers,
                                  step.reason, step.apart, method="overlap")

    def _relative(self, matches, matched: int, ext_a, cams_a, ext_b, cams_b,
                  delta: np.ndarray) -> MotionVerification:
        """The step by generalized relative pose between the keyframes (the essential matrix
        of one camera pair when all matches lie in one)."""
        import poselib

        cfg = self.config
        if len({(m.cam_id1, m.cam_id2) for m in matches}) == 1:
            return self._one_camera_pair(matches[0], ext_a, cams_a, ext_b, cams_b, delta,
                                         matched)
        # PoseLib's relative pose maps rig-1 coordinates to rig-2 coordinates: inv(delta).
        pose, info = poselib.estimate_generalized_relative_pose(
            matches, ext_a, cams_a, ext_b, cams_b,
            {"max_epipolar_error": cfg.reprojection_px / 2, "seed": 0, "success_prob": 0.999,
             "max_iterations": cfg.ransac_iterations,
             "min_iterations": min(100, cfg.ransac_iterations)},
            {"loss_scale": cfg.reprojection_px / 2}, initial_pose=camera_pose(invert_pose(delta)))
        masks = [np.asarray(m, bool) for m in info.get("inliers", [])]
        inliers = int(sum(m.sum() for m in masks))
        if inliers < cfg.min_inliers:
            raise Fallback(f"{inliers} inliers (< verify_min_inliers {cfg.min_inliers}) among "
                           f"{matched} matches")
        solved = invert_pose(pose_matrix(pose))
        if not np.all(np.isfinite(solved)):
            raise Fallback("the geometric solution is not finite")
        cov = motion_covariance(solved, matches, masks, ext_a, ext_b, cams_a, cams_b)
        note, from_g2g = "", False
        front = in_front_fraction(solved, matches, masks, ext_a, ext_b, cams_a, cams_b)
        if front < MIN_IN_FRONT:
            # A straight step's second fit (MIN_IN_FRONT): its translation is meaningless, its
            # rotation is the keyframes' (0.07-0.14 deg off on the simulated car, 2026-11-30).
            note = (f"; {100 * front:.0f} % of its inliers meet in front of their cameras "
                    f"(< {100 * MIN_IN_FRONT:.0f} %): a mirrored solution "
                    f"({float(np.linalg.norm(solved[:3, 3])):.2f} m), its rotation kept, the "
                    f"direction and length of the step G2G's")
            solved = solved.copy()
            solved[:3, 3] = delta[:3, 3]
            cov, from_g2g = _length_from_g2g(cov), True
        elif _sd(cov[:3, :3]) > cfg.max_position_sd_m and _sd(cov[3:, 3:]) <= np.radians(
                MAX_ROTATION_SD_DEG) and np.linalg.norm(solved[:3, 3]) > 1e-6:
            # Straight motion: the rotation and the direction of travel are well measured, the
            # length is not (the classic degeneracy of a rig moving without turning). Keep the
            # geometry's rotation and direction, take the length from G2G, and say so.
            length = float(np.linalg.norm(delta[:3, 3]))
            solved = solved.copy()
            solved[:3, 3] *= length / np.linalg.norm(solved[:3, 3])
            cov = _length_from_g2g(cov)
            note, from_g2g = "; length of the step from G2G (straight motion: scale not " \
                "observable)", True
        path, reason, apart = judge(delta, solved, cov, inliers, matched, cfg)
        if from_g2g:  # only the rotation and the direction are verified (module docstring)
            path, reason = PATH_G2G, f"{reason}; length not verified"
        return MotionVerification(path, solved, cov, inliers, reason + note, apart,
                                  matched=matched, method="relative", length_from_g2g=from_g2g)

    def _one_camera_pair(self, match, ext_a, cams_a, ext_b, cams_b, delta: np.ndarray,
                         matched: int) -> MotionVerification:
        """The motion when every match lies between ONE camera of each keyframe (a one-camera
        rig, or the only pair that saw texture): the essential matrix of that pair (PoseLib's
        ``estimate_relative_pose``) gives the rotation and the direction of travel; the length
        is G2G's, as for a straight rig motion, and the reason says so. Generalized relative
        pose is not asked: with one camera centre its minimal solver is degenerate and PoseLib
        then spends minutes on RANSAC (measured 2026-11-29: > 5 min for one 224 px pair)."""
        import poselib

        cfg = self.config
        i, j = match.cam_id1, match.cam_id2
        base_T_ci = invert_pose(pose_matrix(ext_a[i]))
        base_T_cj = invert_pose(pose_matrix(ext_b[j]))
        # G2G's motion of that camera pair, cam_j <- cam_i: the step's length.
        prior = invert_pose(base_T_cj) @ invert_pose(delta) @ base_T_ci
        # One camera's short baseline leaves the essential matrix weakly conditioned: the
        # rig's epipolar threshold (reprojection_px / 2) let rotations 1-10 deg off through on
        # simulated 224 px steps of 0.1-0.8 m; a quarter of it kept them at 0.1-0.8 deg
        # (2026-11-29).
        threshold = cfg.reprojection_px / 8
        pose, info = poselib.estimate_relative_pose(
            match.x1, match.x2, cams_a[i], cams_b[j],
            {"max_epipolar_error": threshold, "seed": 0, "success_prob": 0.999,
             "max_iterations": cfg.ransac_iterations,
             "min_iterations": min(100, cfg.ransac_iterations)},
            {"loss_scale": threshold})
        mask = np.asarray(info.get("inliers", []), bool)
        inliers = int(mask.sum())
        if inliers < cfg.min_inliers:
            raise Fallback(f"{inliers} inliers (< verify_min_inliers {cfg.min_inliers}) among "
                           f"{matched} matches of one camera pair")
        cj_T_ci = pose_matrix(pose)
        length = float(np.linalg.norm(prior[:3, 3]))
        direction = cj_T_ci[:3, 3] / max(float(np.linalg.norm(cj_T_ci[:3, 3])), 1e-12)
        cj_T_ci[:3, 3] = direction * length
        solved = base_T_ci @ invert_pose(cj_T_ci) @ invert_pose(base_T_cj)
        if not np.all(np.isfinite(solved)):
            raise Fallback("the geometric solution is not finite")
        cov = _length_from_g2g(motion_covariance(solved, [match], [mask], ext_a, ext_b, cams_a,
                                                 cams_b))
        _, reason, apart = judge(delta, solved, cov, inliers, matched, cfg)
        # Only the rotation and the direction are verified (module docstring).
        return MotionVerification(PATH_G2G, solved, cov, inliers, reason + "; one camera pair: "
                                  "rotation and direction from its essential matrix, length "
                                  "of the step from G2G", apart, method="one camera pair",
                                  length_from_g2g=True)

    def _standstill(self, matches, cams_a, cams_b, delta: np.ndarray, matched: int
                    ) -> Optional[MotionVerification]:
        """The identity motion when every camera's matches with itself (the median of each
        camera's, as angles from the camera) moved less than ``standstill_deg``; else None.
        Its covariance: G2G's for the position (unobservable without parallax), the threshold
        for the rotation."""
        cfg = self.config
        if cfg.standstill_deg <= 0:
            return None

        def unit_rays(pixels, camera) -> np.ndarray:
            rays = np.c_[np.asarray(pixels), np.ones(len(pixels))] @ np.linalg.inv(
                camera_matrix(camera)).T
            return rays / np.linalg.norm(rays, axis=1, keepdims=True)

        moved, count = [], 0
        for m in matches:
            if m.cam_id1 != m.cam_id2:
                continue
            cos = np.sum(unit_rays(m.x1, cams_a[m.cam_id1]) * unit_rays(m.x2, cams_b[m.cam_id2]),
                         axis=1)
            moved.append(float(np.median(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))))
            count += len(m.x1)
        if count < cfg.min_inliers or max(moved) >= cfg.standstill_deg:
            return None
        cov = G2G_STEP_COVARIANCE.copy()
        cov[3:, 3:] = np.eye(3) * np.radians(cfg.standstill_deg) ** 2
        path, reason, apart = judge(delta, np.eye(4), cov, count, matched, cfg)
        return MotionVerification(
            path, np.eye(4), cov, count, f"standing still: the {len(moved)} cameras' matches "
            f"moved {max(moved):.3f} deg at most (median; < standstill_deg {cfg.standstill_deg}"
            f"); " + reason, apart, stationary=True, method="standstill")


def _length_from_g2g(cov: np.ndarray) -> np.ndarray:
    """``cov`` of a motion whose rotation and direction come from geometry and whose length
    from G2G: G2G's position covariance, uncorrelated with the rotation."""
    cov = cov.copy()
    cov[:3, :3], cov[:3, 3:], cov[3:, :3] = G2G_STEP_COVARIANCE[:3, :3], 0.0, 0.0
    return cov


def _sd(block: np.ndarray) -> float:
    """Largest standard deviation of a covariance block."""
    value = float(np.linalg.eigvalsh(block).max())
    return float(np.sqrt(value)) if np.isfinite(value) and value > 0 else 0.0
