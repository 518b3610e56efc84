"""A rig step's length carried from the previous step by the points of the last two keyframes
(g2g_model.localization.rig_keyframe_map): a rendered rig without overlapping cameras driving
straight, the real verifier, and RigOdometry handing it the keyframe before."""

from __future__ import annotations

import numpy as np
import pytest

from g2g_model.estimation.groups import Group
from g2g_model.geometry import make_pose, relative_pose, rotation_angle_deg
from g2g_model.localization.rig_keyframe_map import agrees_with_velocity, constant_velocity, \
    evidence_inliers, pick_step, reprojection_inliers
from g2g_model.localization.rig_motion import MotionVerification, RigMotionVerifier, \
    rig_verifier_config
from g2g_model.localization.verdict import PATH_G2G
from g2g_ros.odometry_core import RigFrames, RigOdometry
from rig_fixtures import rig, straight_drive, yawed  # noqa: E402

SIZE = 320
STEP_M = 1.2
# A camera looking left-forward and one looking back (90 deg views: nothing in common), so no
# overlap path: base_T_cam, body REP-103, cameras OpenCV.
RIG = rig([(30.0, [0.1, 0.2, 0.0]), (180.0, [-0.2, 0.0, 0.0])])


@pytest.fixture(scope="module")
def straight_drive3():
    """The rig at three poses 1.2 m apart on a straight line of a simulated hall: ``(groups,
    step)``."""
    return straight_drive(RIG, SIZE, STEP_M, 2), make_pose(np.eye(3), [STEP_M, 0.0, 0.0])


def g2g_guess(truth: np.ndarray) -> np.ndarray:
    """A G2G-like step: 30 % short and 1 deg off."""
    guess = truth @ make_pose(yawed(1.0), [0.0, 0.0, 0.0])
    guess[:3, 3] *= 0.7
    return guess


def share_off(truth: np.ndarray, delta: np.ndarray) -> float:
    return float(np.linalg.norm(relative_pose(truth, delta)[:3, 3]) / np.linalg.norm(truth[:3, 3]))


def test_a_straight_step_takes_its_length_from_the_previous_one(straight_drive3):
    """Without overlapping cameras a straight step's length is not observable between two
    keyframes (the relative pose keeps G2G's, 30 % short); with the keyframe before and the
    previous step the points of both keyframes give it within a few per cent."""
    (g0, g1, g2), step = straight_drive3
    alone = RigMotionVerifier()(g1, g2, g2g_guess(step))
    assert alone.path == PATH_G2G or share_off(step, alone.delta) > 0.1, alone.reason
    mapped = RigMotionVerifier()(g1, g2, g2g_guess(step), before=(g0, step))
    assert mapped.path != PATH_G2G and mapped.method == "keyframe map", mapped.reason
    assert mapped.reason.startswith("keyframe map: "), mapped.reason
    assert share_off(step, mapped.delta) < 0.05, (mapped.delta, mapped.reason)
    assert rotation_angle_deg(relative_pose(step, mapped.delta)[:3, :3]) < 0.5
    assert np.all(np.linalg.eigvalsh(mapped.covariance) > 0)
    # The parameter turns it off: the relative pose alone decides, as without a keyframe.
    off = RigMotionVerifier(rig_verifier_config(keyframe_map=False))(
        g1, g2, g2g_guess(step), before=(g0, step))
    assert off.method != "keyframe map" and "keyframe map" not in off.reason, off.reason
    # A keyframe before with other cameras (one missing) gives no map, and says so.
    fewer = Group(g0.images[:1], g0.intrinsics[:1], g0.cam_to_world[:1])
    other = RigMotionVerifier()(g1, g2, g2g_guess(step), before=(fewer, step))
    assert other.method != "keyframe map", other.reason
    assert "keyframe map: the last two keyframes have different cameras" in other.reason


def test_the_map_scales_with_the_previous_step(straight_drive3):
    """The map carries the previous step's length: a previous step told 10 % too long gives a
    step about 10 % too long (scale is carried, not invented), and the evidence counts prefer
    the true step to a 50 % shorter one."""
    (g0, g1, g2), step = straight_drive3
    verifier = RigMotionVerifier()
    longer = step.copy()
    longer[:3, 3] *= 1.1
    result = verifier(g1, g2, g2g_guess(step), before=(g0, longer))
    assert result.method == "keyframe map", result.reason
    ratio = np.linalg.norm(result.delta[:3, 3]) / STEP_M
    assert 1.05 < ratio < 1.15, ratio
    from g2g_model.localization.rig_keyframe_map import keyframe_map_motion

    points = keyframe_map_motion(verifier.structure, g0, step, g1, g2, g2g_guess(step), 30.0)
    short = step.copy()
    short[:3, 3] *= 0.5
    assert reprojection_inliers(step, points, 4.0) > 2 * reprojection_inliers(short, points, 4.0)
    # Without keyframe matches the evidence is the map's reprojection count alone.
    assert evidence_inliers(step, [], None, None, None, None, [points], 4.0) == (
        0, reprojection_inliers(step, points, 4.0))


def test_rig_odometry_hands_the_verifier_the_keyframe_before_a_measured_step():
    """``before`` reaches a verifier that takes it only after a step whose length the geometry
    measured (not after G2G's, one whose length was G2G's, or one two geometries disputed),
    with that step."""
    base_T_cam = {"cam0": np.eye(4)}
    seen = []
    answers = iter(["refined", "refined", "g2g", "refined", "length", "refined", "disputed",
                    "refined"])

    class Spy:
        takes_before = True

        def __call__(self, a, b, delta, before=None):
            seen.append(None if before is None else before[1][:3, 3].copy())
            path = next(answers)
            out = MotionVerification("g2g" if path == "g2g" else "refined",
                                     make_pose(np.eye(3), [1.0 + len(seen), 0, 0]),
                                     np.eye(6) * 1e-4, 99, path)
            out.length_from_g2g = path == "length"
            out.disputed = path == "disputed"
            return out

    odo = RigOdometry(lambda a, b: (np.eye(4), np.eye(4)[None]), base_T_cam, verifier=Spy())
    image = np.zeros((8, 8, 3), np.uint8)
    for k in range(9):
        odo.process(RigFrames(stamp_ns=(k + 1) * 10**8, cameras=["cam0"], images=[image],
                              intrinsics=np.eye(3)[None]))
    assert seen[0] is None
    np.testing.assert_allclose(seen[1], [2.0, 0, 0])   # after the first refined step
    np.testing.assert_allclose(seen[2], [3.0, 0, 0])
    assert seen[3] is None                               # after a step left to G2G
    assert seen[4] is not None
    assert seen[5] is None                               # after a step whose length was G2G's
    assert seen[6] is not None
    assert seen[7] is None                               # after a disputed length


def test_the_relative_pose_is_kept_where_the_map_agrees_and_a_dispute_widens_the_covariance():
    """Translations within 10 % of the step: the relative pose's step, undisputed, its
    covariance untouched.
    Further apart: the better supported step (here a tie: the first), ``disputed``, with its
    position covariance widened to span the other step."""
    def step(x: float, method: str) -> MotionVerification:
        return MotionVerification("refined", make_pose(np.eye(3), [x, 0.0, 0.0]),
                                  np.eye(6) * 1e-6, 100, method, method=method)

    agreed = pick_step([step(2.0, "relative"), step(1.9, "keyframe map")],
                       [], None, None, None, None, [], 4.0)
    assert agreed.method == "relative" and not agreed.disputed and agreed.carries_length
    assert "the keyframe map agrees on the step (1.90 m, 0.10 m apart)" in agreed.reason
    np.testing.assert_array_equal(agreed.covariance, np.eye(6) * 1e-6)
    disputed = pick_step([step(2.0, "relative"), step(1.0, "keyframe map")],
                         [], None, None, None, None, [], 4.0)
    assert disputed.disputed and not disputed.carries_length
    assert "chosen over the keyframe map step 1.00 m away" in disputed.reason
    assert disputed.covariance[0, 0] == pytest.approx(1.0 + 1e-6)
    assert disputed.covariance[1, 1] == pytest.approx(1e-6)
    # The same length, reversed: a dispute, not an agreement.
    reversed_ = pick_step([step(2.0, "relative"), step(-2.0, "keyframe map")],
                          [], None, None, None, None, [], 4.0)
    assert reversed_.disputed and "chosen over the keyframe map step 4.00 m away" in \
        reversed_.reason


def test_a_dispute_goes_to_the_step_nearer_the_previous_steps_velocity():
    """With a predicted translation, the disputed step nearer to it wins (without one, the tie
    in support goes to the relative pose's); the prediction is the previous step scaled by the
    ratio of the keyframes' time intervals, or unscaled without stamps."""
    def step(x: float, method: str) -> MotionVerification:
        return MotionVerification("refined", make_pose(np.eye(3), [x, 0.0, 0.0]),
                                  np.eye(6) * 1e-6, 100, method, method=method)

    picked = pick_step([step(2.0, "relative"), step(-1.4, "keyframe map")],
                       [], None, None, None, None, [], 4.0, np.array([-1.5, 0.0, 0.0]))
    assert picked.method == "keyframe map" and picked.disputed
    assert "0.10 m from the previous step's velocity (the other 3.50 m)" in picked.reason
    picked = pick_step([step(2.0, "relative"), step(-1.4, "keyframe map")],
                       [], None, None, None, None, [], 4.0, np.array([1.8, 0.1, 0.0]))
    assert picked.method == "relative"

    def at(stamp_ns):
        return Group([np.zeros((8, 8, 3), np.uint8)], np.eye(3)[None], np.eye(4)[None],
                     stamps=[stamp_ns])

    previous = make_pose(np.eye(3), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(constant_velocity(at(0), previous, at(100), at(300)),
                               [2.0, 1.0, 0.0])
    unstamped = Group([np.zeros((8, 8, 3), np.uint8)], np.eye(3)[None], np.eye(4)[None])
    np.testing.assert_allclose(constant_velocity(unstamped, previous, at(100), at(300)),
                               [1.0, 0.5, 0.0])


def test_a_node_behind_verifies_without_the_keyframe_map():
    """When the caller is behind (``defer`` gives a reason) and deferral is used up
    (``max_deferred`` 0), the step is verified without ``before``: the map's cost yields to
    keeping up."""
    seen = []
    behind = [False]

    class Spy:
        takes_before = True

        def __call__(self, a, b, delta, before=None):
            seen.append(before is not None)
            return MotionVerification("refined", make_pose(np.eye(3), [1.0, 0, 0]),
                                      np.eye(6) * 1e-4, 99, "refined")

    odo = RigOdometry(lambda a, b: (np.eye(4), np.eye(4)[None]), {"cam0": np.eye(4)},
                      verifier=Spy(), defer=lambda: "1 newer group queued" if behind[0] else None,
                      max_deferred=0)
    image = np.zeros((8, 8, 3), np.uint8)
    for k, late in enumerate([False, False, False, True, False]):
        behind[0] = late
        odo.process(RigFrames(stamp_ns=(k + 1) * 10**8, cameras=["cam0"], images=[image],
                              intrinsics=np.eye(3)[None]))
    assert seen == [False, True, False, True]


def test_agreement_with_the_velocity_is_within_a_tenth_of_the_longer_step():
    """``agrees_with_velocity``: the distance between the step's translation and the predicted
    one where it is within :data:`DISPUTED_LENGTH` of the longer's length, else None (a
    reversed step of the same length does not agree)."""
    ahead = make_pose(np.eye(3), [2.0, 0.0, 0.0])
    assert agrees_with_velocity(ahead, np.array([1.9, 0.0, 0.0])) == pytest.approx(0.1)
    assert agrees_with_velocity(ahead, np.array([1.7, 0.0, 0.0])) is None
    assert agrees_with_velocity(ahead, np.array([-2.0, 0.0, 0.0])) is None
    assert agrees_with_velocity(np.eye(4), np.zeros(3)) is None


# Left and right cameras 0.4 m apart turned 15 deg outwards (overlapping views) and one looking
# back: the relative pose measures a straight step's length through the pair.
OVERLAP_RIG = rig([(15.0, [0.1, 0.2, 0.0]), (-15.0, [0.1, -0.2, 0.0]),
                   (180.0, [-0.2, 0.0, 0.0])])


def test_the_map_is_asked_only_where_the_relative_pose_departs_from_the_velocity(monkeypatch):
    """A relative-pose step that agrees with the previous step's velocity is published without
    the keyframe map (its reason says so); where the previous step was 30 % longer the map is
    solved and the dispute rule picks."""
    from g2g_model.localization import rig_motion

    g0, g1, g2 = straight_drive(OVERLAP_RIG, SIZE, 1.5, 2)
    step = make_pose(np.eye(3), [1.5, 0.0, 0.0])
    asked = []
    solve = rig_motion.keyframe_map_motion
    monkeypatch.setattr(rig_motion, "keyframe_map_motion",
                        lambda *args: asked.append(1) or solve(*args))
    verifier = RigMotionVerifier()
    agreed = verifier(g1, g2, g2g_guess(step), before=(g0, step))
    assert agreed.method == "relative" and not agreed.length_from_g2g, agreed.reason
    assert "keyframe map not asked: the step agrees with the previous step's velocity" in \
        agreed.reason
    assert share_off(step, agreed.delta) < 0.05 and not asked
    # The matches the step explains (a refined window's tracks), worked out when read.
    explained = sum(len(xa) for _, _, xa, _ in agreed.correspondences)
    assert 0.8 * agreed.inliers <= explained, (explained, agreed.inliers)
    faster = step.copy()
    faster[:3, 3] *= 1.3
    verifier(g1, g2, g2g_guess(step), before=(g0, faster))
    assert asked == [1]
