"""TFBuffer: interpolation, chained lookups, errors, static data, pruning, bad input."""

import logging
import threading

import numpy as np
import pytest

from g2g_model.geometry import (
    axis_angle_to_matrix,
    make_pose,
    matrix_to_quat_xyzw,
    relative_pose,
    rotation_angle_deg,
)
from g2g_ros.conversions import matrix_to_transform_stamped, transform_to_matrix
from g2g_ros.tf_buffer import (
    ConnectivityError,
    ExtrapolationError,
    TFBuffer,
    TFError,
    TFLookupError,
    make_tf_message,
)
from g2g_ros.tf_tree import slerp_xyzw

S = 10**9


def _pose(axis_angle, t):
    return make_pose(axis_angle_to_matrix(np.asarray(axis_angle, float)), t)


def test_interpolation_halfway_linear_translation_and_slerp():
    buf = TFBuffer()
    buf.set_transform_matrix("odom", "base_link", 10 * S, _pose([0, 0, 0], [0, 0, 0]))
    turn = _pose([0, 0, np.radians(90)], [2, -4, 1])
    buf.set_transform_matrix("odom", "base_link", 12 * S, turn)
    mid = buf.lookup_transform("odom", "base_link", 11 * S)
    np.testing.assert_allclose(mid[:3, 3], [1, -2, 0.5], atol=1e-12)
    # Slerp: half of a 90 deg yaw is exactly 45 deg about the same axis.
    np.testing.assert_allclose(mid[:3, :3], axis_angle_to_matrix([0, 0, np.radians(45)]),
                               atol=1e-12)
    quarter = buf.lookup_transform("odom", "base_link", 10 * S + S // 2)
    assert rotation_angle_deg(quarter[:3, :3]) == pytest.approx(22.5, abs=1e-9)
    # Exact sample times return the samples.
    np.testing.assert_allclose(buf.lookup_transform("odom", "base_link", 12 * S)[:3, 3],
                               [2, -4, 1])


def test_slerp_takes_the_short_way_for_sign_flipped_quaternions():
    q0 = matrix_to_quat_xyzw(axis_angle_to_matrix([0, 0, np.radians(170)]))
    q1 = -matrix_to_quat_xyzw(axis_angle_to_matrix([0, 0, np.radians(-170)]))
    mid = slerp_xyzw(q0, q1, 0.5)
    # 170 -> 190 (= -170) through 180, not back through 0.
    assert abs(mid[2]) == pytest.approx(1.0, abs=1e-9)


def _three_frame_tree(buf, stamp=5 * S):
    world_T_odom = _pose([0.1, 0.2, 0.3], [1, 2, 3])
    odom_T_base = _pose([0.0, 0.0, 0.7], [4, 0, 0])
    base_T_cam = _pose([-np.pi / 2, 0, -np.pi / 2], [0.2, 0.0, 1.1])  # optical frame
    buf.set_transform_matrix("map", "odom", stamp, world_T_odom)
    buf.set_transform_matrix("odom", "base_link", stamp, odom_T_base)
    buf.set_transform_matrix("base_link", "cam0_optical_frame", 0, base_T_cam, static=True)
    return world_T_odom, odom_T_base, base_T_cam


def test_chained_lookup_through_three_frames_and_inverse():
    buf = TFBuffer()
    m_T_o, o_T_b, b_T_c = _three_frame_tree(buf)
    m_T_c = buf.lookup_transform("map", "cam0_optical_frame", 5 * S)
    np.testing.assert_allclose(m_T_c, m_T_o @ o_T_b @ b_T_c, atol=1e-12)
    c_T_m = buf.lookup_transform("cam0_optical_frame", "map", 5 * S)
    np.testing.assert_allclose(c_T_m @ m_T_c, np.eye(4), atol=1e-12)
    # Sibling chain through the common ancestor base_link.
    buf.set_transform_matrix("base_link", "imu", 0, _pose([0.3, 0, 0], [0, 0, 0.5]), static=True)
    imu_T_cam = buf.lookup_transform("imu", "cam0_optical_frame", 5 * S)
    expected = relative_pose(_pose([0.3, 0, 0], [0, 0, 0.5]), b_T_c)
    np.testing.assert_allclose(imu_T_cam, expected, atol=1e-12)
    np.testing.assert_allclose(buf.lookup_transform("odom", "odom"), np.eye(4))


def test_extrapolation_error_names_the_range():
    buf = TFBuffer()
    buf.set_transform_matrix("odom", "base_link", 10 * S, np.eye(4))
    buf.set_transform_matrix("odom", "base_link", 12 * S + 500_000_000, np.eye(4))
    with pytest.raises(ExtrapolationError) as err:
        buf.lookup_transform("odom", "base_link", 13 * S)
    text = str(err.value)
    assert "after" in text and "10.000000000 s" in text and "12.500000000 s" in text
    assert (err.value.earliest_ns, err.value.latest_ns) == (10 * S, 12 * S + 500_000_000)
    with pytest.raises(ExtrapolationError, match="before"):
        buf.lookup_transform("base_link", "odom", 9 * S)
    assert isinstance(err.value, TFError)


def test_missing_frames_and_unconnected_trees():
    buf = TFBuffer()
    _three_frame_tree(buf)
    buf.set_transform_matrix("world", "other_robot", 0, np.eye(4), static=True)
    with pytest.raises(TFLookupError, match="'nowhere' does not exist") as err:
        buf.lookup_transform("map", "nowhere", 5 * S)
    assert isinstance(err.value, LookupError) and isinstance(err.value, TFError)
    with pytest.raises(ConnectivityError, match="roots 'world' and 'map'"):
        buf.lookup_transform("other_robot", "cam0_optical_frame", 5 * S)
    assert not buf.can_transform("map", "other_robot")
    assert buf.can_transform("map", "cam0_optical_frame", 5 * S)


def test_static_transforms_valid_at_all_times_and_latest_lookup():
    buf = TFBuffer()
    _, _, b_T_c = _three_frame_tree(buf)
    for stamp in (0, 1, 10**18):
        np.testing.assert_allclose(
            buf.lookup_transform("base_link", "cam0_optical_frame", stamp), b_T_c, atol=1e-12)
    assert buf.latest_common_time("base_link", "cam0_optical_frame") == 0
    # Latest (stamp 0) through dynamic edges = newest time all of them cover.
    buf.set_transform_matrix("odom", "base_link", 7 * S, _pose([0, 0, 0], [9, 9, 9]))
    assert buf.latest_common_time("map", "cam0_optical_frame") == 5 * S
    assert buf.latest_common_time("odom", "cam0_optical_frame") == 7 * S
    np.testing.assert_allclose(buf.lookup_transform("odom", "base_link")[:3, 3], [9, 9, 9])


def test_cache_pruning_and_old_data():
    buf = TFBuffer(cache_duration_ns=2 * S)
    for k in range(11):  # 0 .. 5 s every 0.5 s
        buf.set_transform_matrix("odom", "base_link", k * S // 2, np.eye(4))
    assert buf.time_range("base_link") == (3 * S, 5 * S)
    with pytest.raises(ExtrapolationError):
        buf.lookup_transform("odom", "base_link", 2 * S)
    assert buf.set_transform_matrix("odom", "base_link", S, np.eye(4)) == "old_data"
    assert buf.stats()["rejected"] == {"old_data": 1}
    # Late but inside the window: inserted in order.
    assert buf.set_transform_matrix("odom", "base_link", 4 * S + 1, np.eye(4)) is None


def test_nan_and_invalid_transforms_are_rejected_and_counted(caplog):
    buf = TFBuffer()
    buf.set_transform_matrix("odom", "base_link", S, np.eye(4))
    with caplog.at_level(logging.WARNING, logger="g2g_ros.tf_buffer"):
        assert buf.set_transform("odom", "base_link", 2 * S, [np.nan, 0, 0], [0, 0, 0, 1]) == "nan"
        assert buf.set_transform("odom", "base_link", 3 * S, [0, 0, 0], [0, 0, np.inf, 1]) == "nan"
        assert buf.set_transform("odom", "base_link", 4 * S, [0, 0, 0], [0, 0, 0, 0]) \
            == "denormalized_quaternion"
        assert buf.set_transform("odom", "odom", 4 * S, [0, 0, 0], [0, 0, 0, 1]) \
            == "self_transform"
        assert buf.set_transform("", "x", 4 * S, [0, 0, 0], [0, 0, 0, 1]) == "empty_frame_id"
    assert "nan" in caplog.text and "odom -> base_link" in caplog.text
    st = buf.stats()
    assert st["rejected"]["nan"] == 2 and st["accepted"] == 1
    assert buf.time_range("base_link") == (S, S)  # nothing bad was stored
    # Slightly denormalised quaternions are normalised, not rejected.
    assert buf.set_transform("odom", "base_link", 2 * S, [0, 0, 0], [0, 0, 0, 1.001]) is None


def test_static_edge_rejects_dynamic_updates_and_leading_slash():
    buf = TFBuffer()
    buf.set_transform_matrix("/base_link", "cam", 0, np.eye(4), static=True)
    assert buf.set_transform_matrix("base_link", "cam", S, np.eye(4)) == "conflicts_with_static"
    assert buf.frames() == ["base_link", "cam"]


def test_message_round_trip_and_ingest():
    pose = _pose([0.4, -0.2, 1.0], [1.5, -2.0, 0.25])
    msg = matrix_to_transform_stamped(pose, "odom", "base_link", 12 * S + 345)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 345)
    np.testing.assert_allclose(transform_to_matrix(msg), pose, atol=1e-12)
    bad = matrix_to_transform_stamped(np.eye(4), "odom", "base_link", 13 * S)
    bad.transform.translation.x = float("nan")
    buf = TFBuffer()
    assert buf.ingest(make_tf_message([msg, bad])) == 1
    np.testing.assert_allclose(buf.lookup_transform("odom", "base_link", 12 * S + 345), pose,
                               atol=1e-12)
    with pytest.raises(ValueError, match="finite"):
        matrix_to_transform_stamped(np.full((4, 4), np.nan), "a", "b", 0)


def test_concurrent_ingest_and_lookup():
    buf = TFBuffer(cache_duration_ns=S)
    errors = []

    def writer():
        for k in range(2000):
            buf.set_transform("odom", "base_link", k * 1_000_000, [k, 0, 0], [0, 0, 0, 1])

    def reader():
        for _ in range(2000):
            try:
                t = buf.lookup_transform("odom", "base_link")
                assert np.isfinite(t).all()
            except TFLookupError:
                pass  # not yet written
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert errors == []
    assert buf.time_range("base_link")[1] == 1999 * 1_000_000


def test_clear_dynamic_keeps_static_edges_and_accepts_older_data_again():
    # After a jump back of time the replayed /tf is older than the cached
    # samples ("old_data" for ever) unless the dynamic edges are forgotten; /tf_static is
    # latched and must survive.
    buf = TFBuffer(cache_duration_ns=10**9)
    buf.set_transform("base_link", "cam0", 0, [0, 0, 1], [0, 0, 0, 1], static=True)
    buf.set_transform("odom", "base_link", 100 * 10**9, [1, 0, 0], [0, 0, 0, 1])
    assert buf.set_transform("odom", "base_link", 5 * 10**9, [0, 0, 0], [0, 0, 0, 1]) == \
        "old_data"
    assert buf.clear_dynamic() == 1
    assert buf.set_transform("odom", "base_link", 5 * 10**9, [2, 0, 0], [0, 0, 0, 1]) is None
    pose = buf.lookup_transform("odom", "cam0", 5 * 10**9)
    np.testing.assert_allclose(pose[:3, 3], [2, 0, 1])


def test_far_future_dynamic_transform_is_rejected_without_poisoning_the_edge():
    # A /tf sample stamped a day ahead became the newest of its edge and made
    # every later, correct sample "old_data".
    now = {"ns": 100 * 10**9}
    buf = TFBuffer(cache_duration_ns=10**9, clock_ns=lambda: now["ns"])
    assert buf.set_transform("odom", "base_link", now["ns"] + 86400 * 10**9, [9, 0, 0],
                             [0, 0, 0, 1]) == "future"
    assert buf.set_transform("base_link", "cam0", 10**18, [0, 0, 1], [0, 0, 0, 1],
                             static=True) is None  # static stamps are not judged
    assert buf.set_transform("odom", "base_link", now["ns"], [1, 0, 0], [0, 0, 0, 1]) is None
    assert buf.stats()["rejected"] == {"future": 1}
    now["ns"] = 0  # before the first /clock: not checked
    assert buf.set_transform("odom", "base_link", 200 * 10**9, [2, 0, 0], [0, 0, 0, 1]) is None


def test_future_sample_taken_before_the_first_clock_is_forgotten_once_the_time_is_known():
    # The race the replay test hit: the player's first /tf (stamped a day ahead) reached the
    # node before its first /clock, was stored unjudged and made every later sample "old_data".
    now = {"ns": 0}
    buf = TFBuffer(cache_duration_ns=10**9, clock_ns=lambda: now["ns"])
    assert buf.set_transform("odom", "base_link", (100 + 86400) * 10**9, [9, 0, 0],
                             [0, 0, 0, 1]) is None  # unjudged: no ROS time yet
    now["ns"] = 100 * 10**9
    assert buf.set_transform("odom", "base_link", now["ns"], [1, 0, 0], [0, 0, 0, 1]) is None
    np.testing.assert_allclose(buf.lookup_transform("odom", "base_link", now["ns"])[:3, 3],
                               [1, 0, 0])
    assert buf.stats()["rejected"] == {} and buf.stats()["forgotten"] == 1


class _Clock:
    """A hand-moved wall clock for the buffer's ``monotonic``."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_loop_edge_is_rejected_counted_and_lookups_keep_working(caplog):
    clock = _Clock()
    buf = TFBuffer(monotonic=clock)
    buf.set_transform_matrix("base_link", "cam0_optical_frame", 0, np.eye(4), static=True)
    buf.set_transform_matrix("map", "odom", 0, _pose([0, 0, 0], [5, 0, 0]), static=True)
    for k in range(1, 4):
        buf.set_transform_matrix("odom", "base_link", k * S, _pose([0, 0, 0], [k, 0, 0]))
    with caplog.at_level(logging.WARNING, logger="g2g_ros.tf_buffer"):
        # Directly (base_link -> odom) and through two edges (cam -> map), static or dynamic.
        assert buf.set_transform_matrix("base_link", "odom", 3 * S, np.eye(4)) == "loop"
        assert buf.set_transform_matrix("cam0_optical_frame", "map", 0, np.eye(4),
                                        static=True) == "loop"
    assert "would close the loop odom -> base_link -> odom" in caplog.text
    st = buf.stats()
    assert st["rejected"] == {"loop": 2}
    assert st["last_rejected"] == "cam0_optical_frame -> map: loop"
    # Nothing changed: the chain map -> cam still resolves, and new samples are taken.
    assert buf.set_transform_matrix("odom", "base_link", 4 * S, _pose([0, 0, 0], [4, 0, 0])) \
        is None
    np.testing.assert_allclose(buf.lookup_transform("map", "cam0_optical_frame", 4 * S)[:3, 3],
                               [9, 0, 0])


def test_second_parent_is_rejected_while_the_first_streams_then_latest_wins():
    clock = _Clock()
    buf = TFBuffer(monotonic=clock, reparent_after_s=1.0)
    for k in range(1, 4):
        buf.set_transform_matrix("odom", "base_link", k * S, np.eye(4))
        clock.now += 0.1
    assert buf.set_transform_matrix("map", "base_link", 4 * S, np.eye(4)) == "second_parent"
    assert buf.stats()["last_rejected"] == "map -> base_link: second_parent"
    assert buf.time_range("base_link") == (S, 3 * S)  # the stream's history is intact
    assert buf.lookup_transform("odom", "base_link", 2 * S) is not None
    # The first parent goes quiet: after reparent_after_s the newest parent takes the frame.
    clock.now += 1.5
    assert buf.set_transform_matrix("map", "base_link", 5 * S, np.eye(4)) is None
    assert buf.time_range("base_link") == (5 * S, 5 * S)
    with pytest.raises(TFLookupError):  # odom is no frame of the tree any more
        buf.lookup_transform("odom", "base_link", 5 * S)
    # ... which in turn is defended while it streams.
    assert buf.set_transform_matrix("odom", "base_link", 6 * S, np.eye(4)) == "second_parent"


def test_static_edge_replaces_any_edge_and_is_not_overridden_by_dynamic():
    buf = TFBuffer(monotonic=_Clock())
    buf.set_transform_matrix("odom", "base_link", S, np.eye(4))
    # A latched calibration is the latest word, even over a live dynamic edge.
    assert buf.set_transform_matrix("robot", "base_link", 0, np.eye(4), static=True) is None
    assert buf.time_range("base_link") is None
    assert buf.set_transform_matrix("odom", "base_link", 2 * S, np.eye(4)) \
        == "conflicts_with_static"
    assert buf.set_transform_matrix("robot", "base_link", 2 * S, np.eye(4)) \
        == "conflicts_with_static"
