"""Rig-odometry composition and relocalization gating, with exact geometric estimates.

The estimate functions here compute each camera's T_{A0<-Bj} from ground truth and hand
RigOdometry the estimates of T_{A0<-B0} they give (``per_camera``, as ``Prediction.b0_estimates``
does), so these tests check the composition/gating logic exactly; the model itself is tested
elsewhere.
"""

import numpy as np
import pytest

from g2g_model.geometry import (axis_angle_to_matrix, estimate_spread, fuse_poses, invert_pose,
                                make_pose)
from g2g_model.geometry import b0_estimates
from g2g_model.localization.correction import (
    Candidate, CorrectionGate, GateConfig, QueryBuffer, QueryFrame,
)
from g2g_model.localization.rig_motion import MotionVerification
from g2g_ros.odometry_core import RigFrames, RigOdometry, rotation_vector

K = np.array([[100.0, 0, 32], [0, 100, 32], [0, 0, 1]])
# Two cameras: front (optical z = body x) and left, 0.2 m apart.
BODY_T_OPTICAL = np.array([[0, 0, 1], [-1, 0, 0], [0, -1, 0]], float)
BASE_T_CAM = {
    "front": make_pose(BODY_T_OPTICAL, [0.2, 0, 1.0]),
    "left": make_pose(axis_angle_to_matrix([0, 0, np.pi / 2]) @ BODY_T_OPTICAL, [0, 0.2, 1.0]),
}


def _frames(stamp, cams=("front", "left")):
    img = np.zeros((64, 64, 3), np.uint8)
    return RigFrames(stamp, list(cams), [img] * len(cams), np.stack([K] * len(cams)))


def per_camera(estimate):
    """An estimator of every camera's T_{A0<-Bj} -> the answer and estimates of T_{A0<-B0}, as
    the pipeline returns them for a model run one way: the answer is camera B0's own."""
    def estimates(group_a, group_b):
        b = np.asarray(group_b.cam_to_world)
        found = b0_estimates(estimate(group_a, group_b), invert_pose(b[0]) @ b)
        return found[0], found
    return estimates


def _trajectory(n):
    poses = []
    for i in range(n):
        yaw = 0.05 * i
        poses.append(make_pose(axis_angle_to_matrix([0, 0, yaw]), [0.3 * i, 0.1 * i ** 1.2, 0]))
    return poses


def test_odometry_recovers_trajectory_from_exact_estimates():
    world_T_base = _trajectory(6)
    state = {"k": 0}

    def estimate(group_a, group_b):
        k = state["k"]
        # world_T_camA0 at keyframe k-1 and world_T_camBj at keyframe k.
        a0 = world_T_base[k - 1] @ BASE_T_CAM["front"]
        return np.stack([invert_pose(a0) @ world_T_base[k] @ BASE_T_CAM[c]
                         for c in ("front", "left")])

    odo = RigOdometry(per_camera(estimate), BASE_T_CAM)
    for k in range(6):
        state["k"] = k
        upd = odo.process(_frames(int(1e9 * k)))
        expected = invert_pose(world_T_base[0]) @ world_T_base[k]
        np.testing.assert_allclose(upd.odom_T_base, expected, atol=1e-9)
    assert upd.linear_velocity == pytest.approx(upd.delta[:3, 3])  # dt = 1 s
    assert upd.angular_velocity[2] == pytest.approx(0.05)
    assert upd.covariance[0, 0] == pytest.approx(5e-3)


def test_stride_skips_and_bad_stamps_raise():
    calls = []

    def estimate(a, b):
        calls.append(1)
        return np.stack([invert_pose(BASE_T_CAM["front"]) @ BASE_T_CAM[c]
                         for c in ("front", "left")])

    odo = RigOdometry(per_camera(estimate), BASE_T_CAM, keyframe_stride=3)
    results = [odo.process(_frames(int(1e8 * (i + 1)))) for i in range(7)]
    assert [r is not None for r in results] == [True, False, False, True, False, False, True]
    assert len(calls) == 2
    with pytest.raises(ValueError, match="not after the previous keyframe"):
        for _ in range(3):
            odo.process(_frames(1))
    with pytest.raises(ValueError, match="no extrinsics for camera"):
        RigOdometry(per_camera(estimate), BASE_T_CAM).process(
            _frames(5, cams=("front", "rear")))
    with pytest.raises(ValueError, match="keyframe_stride"):
        RigOdometry(per_camera(estimate), BASE_T_CAM, keyframe_stride=0)


def test_disagreeing_cameras_are_rejected_and_state_kept():
    def estimate(a, b):
        good = invert_pose(BASE_T_CAM["front"]) @ BASE_T_CAM["front"]
        bad = make_pose(np.eye(3), [5.0, 0, 0])
        return np.stack([good, bad])

    odo = RigOdometry(per_camera(estimate), BASE_T_CAM, max_spread_m=0.5)
    odo.process(_frames(1))
    with pytest.raises(ValueError, match="disagree"):
        odo.process(_frames(2))
    np.testing.assert_array_equal(odo.odom_T_base, np.eye(4))
    assert odo.rejected == 1


@pytest.mark.parametrize("verdict", ["refined", "g2g", "length"])
def test_the_spread_gate_judges_only_steps_taken_from_g2g(verdict):
    """G2G's estimates of a long step disagree (a car's 1-3 m steps: by 1.7 m); a step the
    geometry refined is kept and the odometry moves on, one that fell back to G2G is rejected
    with the verifier's reason and the keyframe stays. A step whose rotation and direction the
    geometry measured and whose length is G2G's (straight motion: path g2g) is published with
    the geometry's rotation and direction, counted under g2g, and not rejected."""
    def estimate(a, b):
        return np.stack([make_pose(np.eye(3), [0, 0, 2.0]), make_pose(np.eye(3), [0, 0, 0.1])])

    solved = make_pose(np.eye(3), [2.0, 0.0, 0.0])

    def verifier(group_prev, group_now, delta):
        if verdict == "refined":
            return MotionVerification("refined", solved, np.eye(6) * 1e-4, 120, "refined")
        if verdict == "length":  # the geometry's direction (x), G2G's length
            step = make_pose(np.eye(3), [float(np.linalg.norm(delta[:3, 3])), 0.0, 0.0])
            return MotionVerification("g2g", step, np.eye(6) * 1e-3, 90, "length not verified",
                                      method="relative", length_from_g2g=True)
        return MotionVerification("g2g", delta, np.eye(6), 0, "12 inliers (< 30)")

    odo = RigOdometry(per_camera(estimate), BASE_T_CAM, max_spread_m=1.0, verifier=verifier)
    odo.process(_frames(1))
    for k in (2, 3):
        if verdict == "g2g":
            with pytest.raises(ValueError, match=r"disagree by .*verification: 12 inliers"):
                odo.process(_frames(k))
            np.testing.assert_array_equal(odo.odom_T_base, np.eye(4))
            assert odo.rejected == k - 1
        elif verdict == "length":
            upd = odo.process(_frames(k))
            assert upd.path == "g2g" and upd.method == "relative" and upd.spread_m > 1.0
            # The geometry's direction (x), not G2G's.
            assert upd.delta[0, 3] > 0 and np.allclose(upd.delta[1:3, 3], 0)
            assert odo.rejected == 0 and odo._before is None  # its length is not carried
            from g2g_ros.rig_tally import RigTally

            tally = RigTally()
            tally.processed(upd)
            assert tally.steps_by_path == {"g2g": 1} and not tally.steps_by_geometry
            assert tally.steps_length_from_g2g == 1
        else:
            upd = odo.process(_frames(k))
            assert upd.path == "refined" and upd.spread_m > 1.0
            np.testing.assert_allclose(upd.odom_T_base[:3, 3], [2.0 * (k - 1), 0, 0])
            assert odo.rejected == 0


def test_every_estimate_counts_not_one_per_camera():
    # Both directions give more estimates than B has cameras (2 + 2 here): the step is their
    # mean (the pipeline's answer), and one bad estimate of the second direction is enough to
    # reject it; a malformed answer of the model is refused with the reason, and the keyframe
    # stays.
    step = make_pose(np.eye(3), [0.0, 0.0, 0.4])  # T_{A0<-B0}: camera B0 0.4 m ahead
    offset = make_pose(np.eye(3), [0.2, 0, 0])
    answers = {"exact": [step] * 4, "skewed": [step, step, step @ offset,
                                               step @ invert_pose(offset)],
               "bad": [step, step, step, make_pose(np.eye(3), [3.0, 0, 0])],
               "malformed": [step[:3]]}
    state = {}

    def both_ways(a, b):
        found = np.stack(answers[state["answer"]])
        return fuse_poses(found), found

    odo = RigOdometry(both_ways, BASE_T_CAM, max_spread_m=0.5)
    odo.process(_frames(1))
    front = BASE_T_CAM["front"]
    for k, answer in enumerate(("exact", "skewed"), start=2):
        state["answer"] = answer
        upd = odo.process(_frames(k))
        np.testing.assert_allclose(upd.delta, front @ step @ invert_pose(front), atol=1e-12)
    assert upd.spread_m == pytest.approx(0.2)
    for answer, match in (("bad", "disagree by 2.27 m"), ("malformed", "invalid estimates")):
        state["answer"] = answer
        with pytest.raises(ValueError, match=match):
            odo.process(_frames(10))
    np.testing.assert_allclose(odo.odom_T_base, front @ step @ step @ invert_pose(front),
                               atol=1e-12)


def test_restart_chain_keeps_pose_and_covariance():
    # After a pause (a deactivated node), the next group starts a new chain from the kept pose
    # instead of being compared with the group before the pause.
    step = make_pose(np.eye(3), [0.0, 0.0, 0.5])  # camera-frame forward motion
    calls = []

    def estimate(a, b):
        calls.append((a.stamps[0], b.stamps[0]))
        return np.stack([step, invert_pose(BASE_T_CAM["front"]) @ BASE_T_CAM["left"] @ step])

    odo = RigOdometry(per_camera(estimate), BASE_T_CAM, max_spread_m=10.0)
    odo.process(_frames(1))
    moved = odo.process(_frames(2)).odom_T_base
    covariance = odo.covariance.copy()
    odo.restart_chain()
    resumed = odo.process(_frames(100))
    assert resumed.is_initial and len(calls) == 1, "no estimate across the pause"
    np.testing.assert_array_equal(resumed.odom_T_base, moved)
    np.testing.assert_array_equal(resumed.covariance, covariance)
    odo.process(_frames(101))
    assert calls[-1] == (100, 101)


def test_rotation_vector_and_fusion():
    for v in ([0.1, -0.2, 0.3], [0, 0, np.pi], [np.pi / np.sqrt(2), -np.pi / np.sqrt(2), 0]):
        np.testing.assert_allclose(rotation_vector(axis_angle_to_matrix(np.array(v))), v,
                                   atol=1e-6)
    a = make_pose(axis_angle_to_matrix([0, 0, 0.1]), [1, 0, 0])
    b = make_pose(axis_angle_to_matrix([0, 0, -0.1]), [3, 0, 0])
    fused = fuse_poses([a, b])
    np.testing.assert_allclose(fused, make_pose(np.eye(3), [2, 0, 0]), atol=1e-12)


def test_spread_is_the_largest_distance_from_the_answer():
    a = make_pose(axis_angle_to_matrix([0, 0, 0.1]), [1, 0, 0])
    b = make_pose(axis_angle_to_matrix([0, 0, -0.1]), [3, 0, 0])
    c = make_pose(np.eye(3), [2, 3, 0])
    mean = fuse_poses([a, b, c])
    assert estimate_spread(mean, [a, b, c]) == pytest.approx(2.0)  # c, 2 m from (2, 1, 0)
    assert estimate_spread(a, [a, b, c]) == pytest.approx(np.linalg.norm([1, 3, 0]))  # c from a
    assert estimate_spread(a, [a]) == 0.0
    for bad in (np.zeros((0, 4, 4)), np.eye(4), np.full((2, 4, 4), np.nan)):
        with pytest.raises(ValueError, match="estimates"):
            estimate_spread(a, bad)
    for bad in (np.eye(3), np.full((4, 4), np.nan)):
        with pytest.raises(ValueError, match="pose"):
            estimate_spread(bad, [a])


def _cand(x, score=0.5, path="g2g"):
    return Candidate(make_pose(np.eye(3), [x, 0, 0]), 0, score, 0.0, path=path)


def test_gate_needs_consistency_then_tracks_then_rejects_jumps():
    gate = CorrectionGate(GateConfig(max_jump_translation_m=0.5, consistency_count=2))
    assert not gate.offer(_cand(1.0)).accepted          # 1 of 2
    assert not gate.offer(_cand(9.0)).accepted          # inconsistent: restart the count
    d = gate.offer(_cand(9.2))
    assert d.accepted and d.reason == "first fix"
    assert gate.current[0, 3] == pytest.approx(9.1)
    assert gate.offer(_cand(9.4)).accepted              # small change: tracked
    d = gate.offer(_cand(20.0))
    assert not d.accepted and "exceeds the limits" in d.reason
    assert gate.current[0, 3] == pytest.approx(9.4)     # state kept
    assert gate.offer(_cand(20.1)).accepted             # consistent jump: re-localized
    nan = _cand(0.0)
    nan.map_T_odom[0, 0] = np.nan
    assert not gate.offer(nan).accepted
    low = CorrectionGate(GateConfig(min_overlap_score=0.3, consistency_count=1))
    assert "overlap score" in low.offer(_cand(1.0, score=0.1)).reason
    with pytest.raises(ValueError):
        GateConfig(consistency_count=0).validate()


def test_g2g_alone_does_not_replace_a_geometric_fix_until_the_hold_ends():
    gate = CorrectionGate(GateConfig(max_jump_translation_m=0.5, consistency_count=2,
                                     geometric_hold=3))
    assert not gate.offer(_cand(1.0, path="verified")).accepted
    assert gate.offer(_cand(1.01, path="refined")).accepted   # first fix, by geometry:
    assert gate.current[0, 3] == pytest.approx(1.01)          # the newest, not the mean
    for k in (1, 2, 3):  # G2G alone, even close by, is held off 3 times
        d = gate.offer(_cand(1.2))
        assert not d.accepted and f"does not replace a refined fix ({k}/3)" in d.reason
    assert gate.current[0, 3] == pytest.approx(1.01)
    assert gate.offer(_cand(1.2)).accepted                    # hold over: G2G tracks again
    assert gate.current_path == "g2g"
    assert gate.offer(_cand(1.0, path="verified")).accepted   # geometry takes over at once
    assert gate.offer(_cand(9.0)).reason.endswith("(1/3)")    # and holds again
    with pytest.raises(ValueError, match="geometric_hold"):
        GateConfig(geometric_hold=-1).validate()


def test_with_geometric_fix_g2g_alone_never_moves_the_correction():
    """geometric_fix: G2G-only candidates are reported, never published - consistent ones
    (G2G away from the map answers about the same wrong pose every time) make no first fix,
    and after a geometric fix G2G neither tracks nor jumps, however close it is."""
    gate = CorrectionGate(GateConfig(max_jump_translation_m=0.5, consistency_count=2,
                                     geometric_hold=0, geometric_fix=True))
    for x in (7.0, 7.01, 7.02):
        d = gate.offer(_cand(x))
        assert not d.accepted and "is reported, not published" in d.reason
    assert gate.current is None and gate.rejected == 3
    assert not gate.offer(_cand(1.0, path="verified")).accepted   # 1 of 2, as before
    assert gate.offer(_cand(1.02, path="verified")).accepted      # the newest: 1.02
    d = gate.offer(_cand(1.05))                                    # G2G close to the fix
    assert not d.accepted and "0.03 m / 0.0 deg from the current correction" in d.reason
    for x in (7.0, 7.01):                                          # no jump by G2G either
        assert not gate.offer(_cand(x)).accepted
    assert gate.current[0, 3] == pytest.approx(1.02)
    assert gate.offer(_cand(1.2, path="refined")).accepted          # geometry tracks
    assert not gate.offer(_cand(7.0, path="refined")).accepted      # geometry: 1 of 2
    assert gate.offer(_cand(7.01, path="refined")).accepted         # re-localized
    gate.reset()
    assert "is reported, not published" in gate.offer(_cand(7.0)).reason
    # Off (the default of the library, and the node's when it does not verify): as before.
    plain = CorrectionGate(GateConfig(consistency_count=2))
    assert not plain.offer(_cand(7.0)).accepted and plain.offer(_cand(7.01)).accepted
    assert plain.offer(_cand(7.9)).accepted and plain.offer(_cand(8.8)).accepted  # walks
    # A first fix of G2G's candidates (or of G2G's and geometry's) fuses them: their errors
    # are decimetres and independent, where geometric ones are millimetres.
    mixed = CorrectionGate(GateConfig(consistency_count=2))
    assert not mixed.offer(_cand(3.0, path="verified")).accepted
    assert mixed.offer(_cand(3.2)).accepted and mixed.current[0, 3] == pytest.approx(3.1)


def test_query_buffer_spacing_and_order():
    buf = QueryBuffer(3, min_translation_m=0.1, min_rotation_deg=5.0)
    img = np.zeros((8, 8, 3), np.uint8)
    assert buf.add(QueryFrame(1, img, K, np.eye(4)))
    assert not buf.add(QueryFrame(2, img, K, make_pose(np.eye(3), [0.05, 0, 0])))
    for i in range(1, 4):
        assert buf.add(QueryFrame(10 + i, img, K, make_pose(np.eye(3), [0.2 * i, 0, 0])))
    assert buf.full() and [f.stamp_ns for f in buf.frames] == [11, 12, 13]
    with pytest.raises(ValueError, match="not after"):
        buf.add(QueryFrame(5, img, K, make_pose(np.eye(3), [5, 0, 0])))
    bad = make_pose(np.eye(3), [np.nan, 0, 0])
    with pytest.raises(ValueError, match="non-finite"):
        buf.add(QueryFrame(50, img, K, bad))
    assert buf.group().cam_to_world.shape == (3, 4, 4)


def test_deferred_steps_are_published_but_never_become_keyframes():
    """When the caller falls behind, a step's verification is deferred: G2G's motion from the
    last keyframe is published at once with G2G's covariance, the keyframe stays, and the next
    verified step is measured from that keyframe, so the composed odometry holds only verified
    motion; at most ``max_deferred`` groups in a row are deferred."""
    world_T_base = _trajectory(8)
    g2g_error = make_pose(axis_angle_to_matrix([0, 0, 0.02]), [0.05, 0, 0])

    def index(group):
        return int(group.stamps[0] // 10**9)

    def estimate(group_a, group_b):  # G2G: the true motion, 5 cm / 1.1 deg off
        a0 = world_T_base[index(group_a)] @ BASE_T_CAM["front"]
        b = world_T_base[index(group_b)] @ g2g_error
        return np.stack([invert_pose(a0) @ b @ BASE_T_CAM[c] for c in ("front", "left")])

    calls = []

    class Verifier:  # geometry: the true motion
        def __call__(self, group_a, group_b, delta):
            calls.append((index(group_a), index(group_b)))
            truth = invert_pose(world_T_base[index(group_a)]) @ world_T_base[index(group_b)]
            return MotionVerification("verified", truth, np.eye(6) * 1e-6, 100)

    behind = {1, 2, 3, 5}  # a newer group is queued when these are about to be verified
    state = {"k": 0}
    odo = RigOdometry(per_camera(estimate), BASE_T_CAM, verifier=Verifier(), max_deferred=2,
                      defer=lambda: "1 newer group queued" if state["k"] in behind else None)
    updates = []
    for k in range(8):
        state["k"] = k
        updates.append(odo.process(_frames(k * 10**9)))
    truth = [invert_pose(world_T_base[0]) @ world_T_base[k] for k in range(8)]
    deferred = [k for k, u in enumerate(updates) if u.deferred]
    assert deferred == [1, 2, 5]  # 3 would be the third in a row: verified
    assert calls == [(0, 3), (3, 4), (4, 6), (6, 7)]
    assert odo.deferred == 3
    for k, upd in enumerate(updates):
        if k in deferred:  # G2G's motion from the keyframe, G2G's covariance
            keyframe = 0 if k < 3 else 4
            np.testing.assert_allclose(upd.odom_T_base, truth[keyframe] @ invert_pose(
                world_T_base[keyframe]) @ world_T_base[k] @ g2g_error, atol=1e-9)
            assert upd.path == "g2g" and upd.reason == "verification deferred: 1 newer group " \
                "queued"
            assert upd.covariance[0, 0] >= 1e-3
        else:  # verified steps are exact: the deferred G2G errors never enter the odometry
            np.testing.assert_allclose(upd.odom_T_base, truth[k], atol=1e-9)
    assert updates[3].delta == pytest.approx(invert_pose(world_T_base[0]) @ world_T_base[3])
    # Without a verifier nothing is deferred.
    plain = RigOdometry(per_camera(estimate), BASE_T_CAM, max_deferred=5, defer=lambda: "behind")
    assert not any(plain.process(_frames(k * 10**9)).deferred for k in range(3))
