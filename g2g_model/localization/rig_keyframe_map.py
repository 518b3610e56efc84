"""The rig step from a map of the last two keyframes, and the evidence that picks a step.

The generalized relative pose between two keyframes (:mod:`.rig_motion`) measures the step's
length only through the rig's extrinsics: it cannot when the rig drives straight, and at car
scale it can settle on a wrong length: its robust cost along the length has several minima of
nearly equal height (a simulated car, 2026-11-29: 37 of 255 steps of about 2 m off by more than
10 %, most published short). Here the previous step, once the geometry has measured it, carries
its scale forward: the keyframe before the previous one is placed in the previous body frame
by that step, the cameras of the two keyframes whose views can overlap (each camera with itself
and its neighbours, as for the relative pose) and the rig's own overlapping cameras
triangulate metric points, those points are followed into the current keyframe, and the
current body pose is solved by generalized absolute pose
(:func:`~g2g_model.localization.rig_overlap.window_motion`, relocalization's solver). The
length then rests on the previous step's, also on a straight stretch, and a wrong minimum of
the relative pose does not decide it.

Where two geometries give a step (the relative pose and this map) and disagree, the step nearer
to where the previous step's velocity puts the body wins (:func:`pick_step`); the support of
both geometries' matches (the relative pose's keyframe matches whose Sampson error is under its
threshold plus the map's 2D-3D matches that reproject within theirs, both counted under each
candidate: :func:`evidence_inliers`) decides only without a previous step, and is reported.
On a repeated texture each candidate fits its own matches about equally well. A relative-pose
step that already lies within :data:`DISPUTED_LENGTH` of that prediction
(:func:`agrees_with_velocity`) is published without solving the map: the rule would keep it
whether the map agreed or not, save where the map fell even nearer the prediction. On real car
steps the map never changed a step and made a step 1.3-1.9x as costly (docs/VERIFICATION.md).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.geometry import invert_pose
from g2g_model.localization.absolute_pose import reprojection_errors
from g2g_model.localization.local_features import per_frame_intrinsics
from g2g_model.localization.rig_epipolar import sampson_errors
from g2g_model.localization.rig_overlap import PointStep, window_motion
from g2g_model.localization.rig_pairs import overlapping_pairs
from g2g_model.localization.verdict import Fallback
from g2g_model.localization.verification import StructureVerifier

WHAT = "camera pairs of the last two keyframes"
# Steps of two geometries whose translations lie further apart than this share of the longer
# one's length are disputed.
DISPUTED_LENGTH = 0.1


def keyframe_map_motion(structure: StructureVerifier, before, step: np.ndarray, group_a, group_b,
                        delta: np.ndarray, max_turn_deg: float) -> PointStep:
    """The step from ``group_a`` (previous keyframe) to ``group_b`` (current one) through the
    points the keyframe ``before`` and ``group_a`` triangulate (all three ``cam_to_world`` =
    base_T_cam); ``step``: base_before_T_base_a, measured by the geometry. ``delta``: G2G's step
    (seed and prior). Raises :class:`~g2g_model.localization.verdict.Fallback`."""
    n = len(before.images)
    if n != len(group_a.images) or not np.allclose(np.asarray(before.cam_to_world, float),
                                                   np.asarray(group_a.cam_to_world, float)):
        raise Fallback("the last two keyframes have different cameras")
    k_before = per_frame_intrinsics(before.intrinsics, n)
    k_a = per_frame_intrinsics(group_a.intrinsics, len(group_a.images))
    window = Group(list(before.images) + list(group_a.images), np.concatenate([k_before, k_a]),
                   np.concatenate([invert_pose(np.asarray(step, float))
                                   @ np.asarray(before.cam_to_world, float),
                                   np.asarray(group_a.cam_to_world, float)]))
    pairs = [(i, n + j) for i, j in overlapping_pairs(before, group_a, max_turn_deg)]
    pairs += [(n + i, n + j) for i, j in overlapping_pairs(group_a, group_a, 0.0) if i < j]
    followed = [(n + i, j) for i, j in overlapping_pairs(group_a, group_b, max_turn_deg)]
    followed += [(i, j) for i, j in overlapping_pairs(before, group_b,
                                                      min(180.0, 2 * max_turn_deg))]
    return window_motion(structure, window, group_b, delta, pairs, followed, WHAT)


def reprojection_inliers(delta: np.ndarray, points: PointStep, threshold_px: float) -> int:
    """How many of ``points``' 2D-3D matches reproject within ``threshold_px`` in front of their
    camera when the current body is at ``delta`` (base_prev_T_base_now)."""
    errors = reprojection_errors(invert_pose(np.asarray(delta, float)), points.p2d, points.p3d,
                                 [ext.Rt for ext in points.exts], points.intrinsics)
    return int(sum(np.sum(err < threshold_px) for err in errors))


def evidence_inliers(delta: np.ndarray, matches, ext_a, ext_b, cams_a, cams_b,
                     point_steps: Sequence[PointStep], reprojection_px: float) -> Tuple[int, int]:
    """``(epipolar, reprojection)`` inliers of a candidate step ``delta``: the keyframe matches
    (PoseLib ``PairwiseMatches``) within the relative pose's threshold (``reprojection_px / 2``
    of Sampson error) and the 2D-3D matches of every ``point_steps`` within
    ``reprojection_px``."""
    epipolar = 0
    if matches:
        errors = sampson_errors(delta, matches, None, ext_a, ext_b, cams_a, cams_b)
        epipolar = int(np.sum(np.abs(errors) < reprojection_px / 2))
    return epipolar, sum(reprojection_inliers(delta, p, reprojection_px) for p in point_steps)


def constant_velocity(before, step: np.ndarray, group_a, group_b) -> np.ndarray:
    """The translation of the step from ``group_a`` to ``group_b`` if the body moves on as it
    did from ``before`` to ``group_a`` (``step``: base_before_T_base_a), in base_a's frame:
    ``step``'s translation scaled by the ratio of the keyframes' time intervals (their
    ``stamps``; 1 without them)."""
    t = np.asarray(step, float)[:3, 3]
    stamps = [g.stamps[0] if getattr(g, "stamps", None) else None
              for g in (before, group_a, group_b)]
    if None in stamps or not stamps[1] > stamps[0]:
        return t.copy()
    return t * float(stamps[2] - stamps[1]) / float(stamps[1] - stamps[0])


def translations_apart(t_a: np.ndarray, t_b: np.ndarray) -> Tuple[float, float]:
    """``(apart, longer)``: the distance (m) between two step translations and the longer one's
    length. They agree where ``apart <= DISPUTED_LENGTH * longer`` (the vectors, not only their
    lengths: a reversed step of the same length does not agree)."""
    t_a, t_b = np.asarray(t_a, float), np.asarray(t_b, float)
    return (float(np.linalg.norm(t_a - t_b)),
            max(float(np.linalg.norm(t_a)), float(np.linalg.norm(t_b))))


def agrees_with_velocity(delta: np.ndarray, predicted: np.ndarray) -> Optional[float]:
    """How far (m) the step ``delta``'s translation lies from the ``predicted`` one
    (:func:`constant_velocity`) where the two agree (:func:`translations_apart`) and are not
    both zero, else None. Such a step needs no keyframe map: where the map agrees,
    :func:`pick_step` takes the relative pose's step, and where it disagrees, the step nearer
    the prediction, which is then almost always this one too."""
    apart, longer = translations_apart(np.asarray(delta, float)[:3, 3], predicted)
    return apart if longer > 0 and apart <= DISPUTED_LENGTH * longer else None


def pick_step(candidates, matches, ext_a, ext_b, cams_a, cams_b, point_steps: Sequence[PointStep],
              reprojection_px: float, predicted: Optional[np.ndarray] = None):
    """Of the relative pose's step (``candidates[0]``) and the keyframe map's (``[1]``), both
    ``MotionVerification``: the relative pose's where the two translations lie within
    :data:`DISPUTED_LENGTH` of the longer one's length of each other (its rotation is the
    keyframes' own, while the map's carries the previous step's rotation error forward: at
    Segway scale, publishing the map's steps turned the heading by -1.03 deg per 100 m against
    -0.25). The vectors are compared, not only their lengths: on a repeated texture one
    geometry can settle on the step reversed, of about the same length (a simulated car in the
    hall, 2026-11-29). Otherwise the step that more of all the geometries' matches support
    (:func:`evidence_inliers`), ``disputed``, its position covariance widened by the outer
    product of the two steps' difference; its reason names the other and both counts. With a
    ``predicted`` translation (:func:`constant_velocity`) the step nearer to it wins instead:
    on a repeated texture both geometries fit their own matches about equally well (a simulated
    car in the hall: the wrong step had more support in 4 of 18 disputes), while a body's step
    changes little from one keyframe to the next."""
    apart, longer = translations_apart(candidates[0].delta[:3, 3], candidates[1].delta[:3, 3])
    if apart <= DISPUTED_LENGTH * longer:
        candidates[0].reason += (f"; the keyframe map agrees on the step "
                                 f"({float(np.linalg.norm(candidates[1].delta[:3, 3])):.2f} m, "
                                 f"{apart:.2f} m apart)")
        return candidates[0]
    counts = [evidence_inliers(c.delta, matches, ext_a, ext_b, cams_a, cams_b, point_steps,
                               reprojection_px) for c in candidates]
    if predicted is None:
        order = sorted(range(len(candidates)), key=lambda k: -sum(counts[k]))
        rule = "supported by"
    else:
        near = [float(np.linalg.norm(c.delta[:3, 3] - predicted)) for c in candidates]
        order = sorted(range(len(candidates)), key=lambda k: near[k])
        rule = (f"{near[order[0]]:.2f} m from the previous step's velocity (the other "
                f"{near[order[1]]:.2f} m); supported by")
    best, other = candidates[order[0]], candidates[order[1]]
    gap = best.delta[:3, 3] - other.delta[:3, 3]
    best.disputed = True
    # Either may be the wrong one: the position covariance spans the other step too (its own
    # claims millimetres even when the length is wrong by metres).
    best.covariance = best.covariance.copy()
    best.covariance[:3, :3] += np.outer(gap, gap)
    (e1, r1), (e2, r2) = counts[order[0]], counts[order[1]]
    best.reason += (f"; chosen over the {other.method} step {float(np.linalg.norm(gap)):.2f} m "
                    f"away: {rule} {e1} + {r1} against {e2} + {r2} keyframe + map matches")
    return best
