"""A rig step whose length the geometry could not measure takes the last measured speed
(g2g_ros.velocity_hold), within hold_velocity_s; through RigOdometry as the node runs it."""

import numpy as np
import pytest

from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose
from g2g_model.localization.rig_motion import MotionVerification
from g2g_ros.odometry_core import RigFrames, RigOdometry
from g2g_ros.velocity_hold import SPEED_SHARE, VelocityHold

K = np.array([[100.0, 0, 32], [0, 100, 32], [0, 0, 1]])
BODY_T_OPTICAL = np.array([[0, 0, 1], [-1, 0, 0], [0, -1, 0]], float)
BASE_T_CAM = {"front": make_pose(BODY_T_OPTICAL, [0.2, 0, 1.0]),
              "left": make_pose(axis_angle_to_matrix([0, 0, np.pi / 2]) @ BODY_T_OPTICAL,
                                [0, 0.2, 1.0])}
PERIOD_NS = 200_000_000  # keyframes 0.2 s apart


def test_the_hold_takes_the_measured_speed_along_the_new_direction():
    hold = VelocityHold(1.0)
    assert hold.held(make_pose(np.eye(3), [0.05, 0, 0]), 0.2, 0) is None  # nothing measured
    turn = axis_angle_to_matrix([0, 0, np.radians(10)])
    hold.measured(make_pose(turn, [2.0, 0.0, 0.0]), 0.2, 1_000_000_000)  # 10 m/s, turning
    step = make_pose(np.eye(3), [0.04, 0.01, 0.0])  # G2G's length, the geometry's direction
    out, cov, note = hold.held(step, 0.3, 1_000_000_000)
    assert np.linalg.norm(out[:3, 3]) == pytest.approx(3.0)  # 10 m/s for 0.3 s
    direction = out[:3, 3] / 3.0
    assert np.allclose(direction, step[:3, 3] / np.linalg.norm(step[:3, 3]))
    assert np.allclose(out[:3, :3], step[:3, :3])
    assert np.allclose(cov, np.eye(3) * (SPEED_SHARE * 3.0) ** 2)
    assert "3.00 m" in note and "10.00 m/s" in note and "G2G's 0.04 m" in note
    # Too old, turned back, no direction, or the hold off: G2G's length stays.
    assert hold.held(step, 0.3, 2_000_000_001) is None
    assert hold.held(make_pose(np.eye(3), [-0.04, 0, 0]), 0.3, 1_000_000_000) is None
    assert hold.held(np.eye(4), 0.3, 1_000_000_000) is None
    off = VelocityHold(0.0)
    off.measured(make_pose(np.eye(3), [2.0, 0, 0]), 0.2, 0)
    assert off.held(step, 0.2, 0) is None
    with pytest.raises(ValueError, match="hold_s"):
        VelocityHold(-1.0)


def _odometry(hold_velocity_s, verdicts):
    """RigOdometry whose verifier answers ``verdicts`` in turn: "measured" (a 2 m step along x
    whose length the geometry measured), "partial" (the geometry's direction along x, G2G's
    0.05 m length) or "still" (standing still)."""
    answers = iter(verdicts)

    def g2g(group_a, group_b):
        step = make_pose(np.eye(3), [0.05, 0, 0])  # G2G: a car standing still, nearly
        cam = BASE_T_CAM["front"]
        a0_T_b0 = invert_pose(cam) @ step @ cam
        return a0_T_b0, a0_T_b0[None]

    def verifier(group_a, group_b, delta, before=None):
        kind = next(answers)
        if kind == "measured":
            return MotionVerification("verified", make_pose(np.eye(3), [2.0, 0, 0]),
                                      np.eye(6) * 1e-6, 200, "measured", method="relative")
        if kind == "still":
            return MotionVerification("verified", np.eye(4), np.eye(6) * 1e-6, 200, "still",
                                      stationary=True, method="standstill")
        return MotionVerification("g2g", delta.copy(), np.eye(6) * 1e-3, 150,
                                  "length not verified", method="relative",
                                  length_from_g2g=True)

    verifier.takes_before = True
    return RigOdometry(g2g, BASE_T_CAM, verifier=verifier, hold_velocity_s=hold_velocity_s)


def _run(odo, count, start=0):
    img = np.zeros((64, 64, 3), np.uint8)
    return [odo.process(RigFrames((start + k) * PERIOD_NS, list(BASE_T_CAM), [img, img],
                                  np.stack([K, K]))) for k in range(count)]


def test_rig_odometry_holds_the_speed_through_unmeasured_steps_for_a_second():
    # A measured 2 m step in 0.2 s (10 m/s), then straight steps whose length the geometry
    # cannot measure: 2 m each for one second, then G2G's 0.05 m again.
    odo = _odometry(1.0, ["measured"] + ["partial"] * 7)
    updates = _run(odo, 9)
    lengths = [float(np.linalg.norm(u.delta[:3, 3])) for u in updates[1:]]
    assert lengths[0] == pytest.approx(2.0)
    # The measured step ended at 0.2 s; the steps starting at 0.2 ... 1.2 s hold (6).
    assert lengths[1:7] == pytest.approx([2.0] * 6)
    assert lengths[7] == pytest.approx(0.05)
    held = updates[2]
    assert held.path == "g2g" and held.method == "relative" and "from the speed measured" in \
        held.reason
    assert held.covariance[0, 0] > updates[1].covariance[0, 0] + (SPEED_SHARE * 2.0) ** 2 * 0.99
    assert odo._before is None  # a held length is not carried into the keyframe map
    np.testing.assert_allclose(updates[7].odom_T_base[:3, 3], [14.0, 0, 0], atol=1e-9)


@pytest.mark.parametrize("hold, verdicts, expected", [
    (0.0, ["measured", "partial"], 0.05),            # the hold off: G2G's length
    (1.0, ["partial", "partial"], 0.05),             # nothing measured yet
    (1.0, ["measured", "still", "partial"], 0.05),   # a standstill forgets the speed
])
def test_g2g_length_stays_without_a_recent_measured_speed(hold, verdicts, expected):
    odo = _odometry(hold, verdicts)
    updates = _run(odo, len(verdicts) + 1)
    assert float(np.linalg.norm(updates[-1].delta[:3, 3])) == pytest.approx(expected)
