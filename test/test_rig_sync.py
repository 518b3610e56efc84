"""RigSynchronizer: exact/approximate matching, degraded groups, bounds, counters, threading."""

import logging
import random
import threading

import pytest

from g2g_ros.rig_sync import SYNC_PRESETS, RigSynchronizer

MS = 1_000_000


class Recorder:
    def __init__(self):
        self.groups = []

    def __call__(self, group):
        self.groups.append(group)

    def stamps(self):
        return [dict(g.stamps_ns) for g in self.groups]


def make(cameras=("a", "b", "c"), **kw):
    rec = Recorder()
    return RigSynchronizer(cameras, rec, **kw), rec


def test_exact_matching_interleaved():
    sync, rec = make(config="exact")
    for k in range(5):
        t = 1000 + 100 * k
        for cam in ("c", "a", "b") if k % 2 else ("b", "c", "a"):
            sync.add(cam, t, f"{cam}{k}")
    assert [g.stamp_ns for g in rec.groups] == [1000 + 100 * k for k in range(5)]
    g = rec.groups[2]
    assert g.complete and g.skew_ns == 0 and g.messages == {"a": "a2", "b": "b2", "c": "c2"}
    assert list(g.messages) == ["a", "b", "c"]  # rig order, not arrival order
    st = sync.stats()
    assert st.groups_emitted == 5 and st.groups_dropped == 0
    assert st.received == {"a": 5, "b": 5, "c": 5}
    assert all(st.dropped_total(c) == 0 for c in "abc")


def test_exact_matching_drops_unmatched_stamp():
    sync, rec = make(config="exact")
    sync.add("a", 100, None)
    sync.add("b", 100, None)
    sync.add("a", 150, None)  # b and c never publish 150
    sync.add("c", 100, None)
    for cam in "abc":
        sync.add(cam, 200, None)
    assert [g.stamp_ns for g in rec.groups] == [100, 200]
    st = sync.stats()
    assert st.groups_dropped == 1 and st.dropped["a"]["group_incomplete"] == 1


def _jittered_streams(n_frames, cameras, period=100 * MS, jitter=5 * MS, seed=0):
    rng = random.Random(seed)
    return {
        c: [10**9 + k * period + rng.randint(-jitter, jitter) for k in range(n_frames)]
        for c in cameras
    }


def _random_interleaving(streams, seed):
    rng = random.Random(seed)
    pos = {c: 0 for c in streams}
    order = []
    while any(pos[c] < len(s) for c, s in streams.items()):
        cam = rng.choice([c for c, s in streams.items() if pos[c] < len(s)])
        order.append((cam, streams[cam][pos[cam]]))
        pos[cam] += 1
    return order


@pytest.mark.parametrize("min_interval", [0, 50 * MS])
def test_slop_matching_is_independent_of_arrival_order(min_interval):
    cams = ("a", "b", "c", "d")
    streams = _jittered_streams(30, cams)
    expected = [{c: streams[c][k] for c in cams} for k in range(30)]
    for seed in range(8):
        sync, rec = make(cams, slop_ns=20 * MS, max_wait_ns=None, queue_size=50,
                         min_interval_ns=min_interval)
        for cam, stamp in _random_interleaving(streams, seed):
            sync.add(cam, stamp, (cam, stamp))
        # The last group may wait for a lagging camera's next frame: send one more frame.
        end = max(s[-1] for s in streams.values()) + 100 * MS
        for cam in cams:
            sync.add(cam, end, None)
        assert rec.stamps() == expected + [{c: end for c in cams}], f"interleaving {seed}"
        skews = [g.skew_ns for g in rec.groups[:30]]
        assert max(skews) <= 20 * MS
        assert skews == [max(e.values()) - min(e.values()) for e in expected]


def test_min_interval_controls_waiting_for_a_lagging_camera():
    # b's frame is the pivot; a lags at 100. Without a frame-interval bound, a message of a in
    # (100, 103] could still arrive and tighten the group, so the synchronizer waits.
    sync, rec = make(("a", "b"), slop_ns=10, min_interval_ns=0, max_wait_ns=None)
    sync.add("a", 100, None)
    sync.add("b", 103, None)
    assert rec.groups == []
    sync.add("a", 200, None)
    assert rec.stamps() == [{"a": 100, "b": 103}]

    sync, rec = make(("a", "b"), slop_ns=10, min_interval_ns=50, max_wait_ns=None)
    sync.add("a", 100, None)
    sync.add("b", 103, None)
    assert rec.stamps() == [{"a": 100, "b": 103}]


def test_approximate_matching_is_not_greedy():
    # a sent two close frames; the later one is the better partner for b's 108.
    sync, rec = make(("a", "b"), slop_ns=10, max_wait_ns=None)
    sync.add("a", 100, None)
    sync.add("a", 105, None)
    sync.add("b", 108, None)
    sync.add("a", 300, None)
    sync.add("b", 300, None)
    assert rec.stamps() == [{"a": 105, "b": 108}, {"a": 300, "b": 300}]
    assert sync.stats().dropped["a"]["unmatched"] == 1
    # Same in the other direction: b's later frame is closer to the pivot a=100.
    sync, rec = make(("a", "b"), slop_ns=10, max_wait_ns=None)
    sync.add("b", 92, None)
    sync.add("b", 101, None)
    sync.add("a", 100, None)
    assert rec.stamps() == [{"a": 100, "b": 101}]
    assert sync.stats().dropped["b"]["unmatched"] == 1


def _run_with_dead_camera(min_cameras):
    cams = ("a", "b", "c")
    sync, rec = make(cams, slop_ns=10 * MS, min_cameras=min_cameras, max_wait_ns=250 * MS,
                     min_interval_ns=50 * MS, queue_size=20)
    for k in range(20):
        t = k * 100 * MS
        for cam in cams:
            if cam == "c" and k >= 5:
                continue  # camera c stops after frame 4
            sync.add(cam, t, k)
    return sync, rec


def test_camera_that_stops_gives_degraded_groups_with_min_cameras():
    sync, rec = _run_with_dead_camera(min_cameras=2)
    complete = [g for g in rec.groups if g.complete]
    degraded = [g for g in rec.groups if not g.complete]
    assert [g.stamp_ns for g in complete] == [k * 100 * MS for k in range(5)]
    assert all(g.missing == ("c",) and set(g.messages) == {"a", "b"} for g in degraded)
    # Frames 5..19: all but the ones still inside the wait window at the end are emitted.
    assert [g.messages["a"] for g in degraded] == list(range(5, 5 + len(degraded)))
    assert len(degraded) >= 12
    st = sync.stats()
    assert st.groups_degraded == len(degraded) and st.groups_dropped == 0
    # Per camera, its messages in emitted groups: c only in the complete ones.
    assert st.grouped == {"a": st.groups_emitted, "b": st.groups_emitted, "c": len(complete)}
    # Once c is considered dead, groups no longer wait for it: a tick flushes nothing stale.
    sync.tick(10**12)
    assert [g.messages["a"] for g in rec.groups if not g.complete] == list(range(5, 20))


def test_camera_that_stops_gives_no_group_without_min_cameras():
    sync, rec = _run_with_dead_camera(min_cameras=None)
    assert [g.stamp_ns for g in rec.groups] == [k * 100 * MS for k in range(5)]
    assert all(g.complete for g in rec.groups)
    sync.tick(10**12)
    st = sync.stats()
    assert st.groups_dropped == 15 and st.groups_degraded == 0
    assert st.dropped["a"]["group_incomplete"] == 15


def test_camera_recovers_after_gap():
    sync, rec = make(("a", "b", "c"), min_cameras=2, max_wait_ns=150)
    for t in range(0, 1000, 100):
        sync.add("a", t, None)
        sync.add("b", t, None)
        if not 300 <= t <= 600:
            sync.add("c", t, None)
    # c is declared dead after max_wait; the group of its first frame back (700) was already
    # emitted without it when that frame arrived, so it rejoins from the next frame on.
    assert [g.stamp_ns for g in rec.groups if g.complete] == [0, 100, 200, 800, 900]
    assert [g.stamp_ns for g in rec.groups if not g.complete] == [300, 400, 500, 600, 700]
    st = sync.stats()
    assert st.dropped["c"]["late"] == 1 and st.groups_dropped == 0


def test_late_camera_within_max_wait_still_gives_full_groups():
    sync, rec = make(("a", "b", "c"), slop_ns=2, max_wait_ns=500, min_cameras=2,
                     min_interval_ns=50)
    arrivals = []
    for k in range(10):
        arrivals += [("a", 100 * k), ("b", 100 * k + 1)]
        if k >= 2:
            arrivals.append(("c", 100 * (k - 2)))  # c arrives two frames late
    for cam, t in arrivals:
        sync.add(cam, t, None)
    sync.add("c", 800, None)
    sync.add("c", 900, None)
    assert [g.stamp_ns for g in rec.groups] == [100 * k for k in range(10)]
    assert all(g.complete for g in rec.groups)
    assert sync.stats().groups_degraded == 0


def test_too_late_camera_is_left_out_of_degraded_groups():
    sync, rec = make(("a", "b", "c"), max_wait_ns=150, min_cameras=2)
    for k in range(6):
        sync.add("a", 100 * k, None)
        sync.add("b", 100 * k, None)
    assert not sync.add("c", 100, "late")  # its slot was decided long ago
    assert sync.stats().dropped["c"]["late"] == 1 and sync.stats().groups_dropped == 0
    assert all(g.missing == ("c",) for g in rec.groups)


def test_queue_overflow_drops_oldest_and_counts():
    sync, rec = make(("a", "b"), queue_size=5, max_wait_ns=None)
    for k in range(15):
        sync.add("a", k, k)
    st = sync.stats()
    assert st.dropped["a"]["queue_overflow"] == 10 and st.queued["a"] == 5
    for k in range(10, 15):
        sync.add("b", k, k)
    assert [g.stamp_ns for g in rec.groups] == list(range(10, 15))


def test_out_of_order_and_duplicate_stamps_are_rejected_and_counted(caplog):
    sync, rec = make(("a", "b"))
    with caplog.at_level(logging.WARNING, logger="g2g_ros.rig_sync"):
        assert sync.add("a", 100, None)
        assert not sync.add("a", 100, None)
        assert not sync.add("a", 50, None)
        assert sync.add("a", 200, None)
    st = sync.stats()
    assert st.dropped["a"]["duplicate"] == 1 and st.dropped["a"]["out_of_order"] == 1
    assert st.received["a"] == 4
    text = caplog.text
    assert "duplicate" in text and "out_of_order" in text
    sync.add("b", 100, None)
    sync.add("b", 200, None)
    assert [g.stamp_ns for g in rec.groups] == [100, 200]


def test_callback_runs_outside_the_lock_and_may_reenter():
    cams = ("a", "b")
    seen = []

    def callback(group):
        seen.append(group.stamp_ns)
        sync.stats()  # takes the lock: would deadlock if it were held
        if group.stamp_ns < 500:
            nxt = group.stamp_ns + 100
            sync.add("a", nxt, None)
            sync.add("b", nxt, None)  # completes a group from inside the callback
            assert seen[-1] == group.stamp_ns  # ... delivered only after we return

    sync = RigSynchronizer(cams, callback)
    worker = threading.Thread(target=lambda: (sync.add("a", 100, None), sync.add("b", 100, None)))
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "deadlock: callback re-entering the synchronizer"
    assert seen == [100, 200, 300, 400, 500]


def test_callback_exception_is_counted_and_stream_continues(caplog):
    def callback(group):
        if group.stamp_ns == 1:
            raise RuntimeError("consumer bug")
        ok.append(group.stamp_ns)

    ok = []
    sync = RigSynchronizer(("a",), callback)
    with caplog.at_level(logging.ERROR, logger="g2g_ros.rig_sync"):
        for t in range(3):
            sync.add("a", t, None)
    assert ok == [0, 2] and sync.stats().callback_errors == 1
    assert "consumer bug" in caplog.text


def test_concurrent_producers_deliver_every_group_in_order():
    cams = ("a", "b", "c")
    n = 300
    got = []
    sync = RigSynchronizer(cams, lambda g: got.append(g.stamp_ns), max_wait_ns=None,
                           queue_size=n)

    def produce(cam):
        for k in range(n):
            sync.add(cam, k, None)

    threads = [threading.Thread(target=produce, args=(c,)) for c in cams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert got == list(range(n))
    assert sync.stats().groups_emitted == n


def test_tick_decides_slots_when_every_camera_stops():
    sync, rec = make(("a", "b"), min_cameras=1, max_wait_ns=100)
    sync.add("a", 1000, None)
    assert rec.groups == []
    sync.tick(1050)
    assert rec.groups == []
    sync.tick(1101)
    assert [g.missing for g in rec.groups] == [("b",)]


def test_config_validation_and_presets():
    with pytest.raises(ValueError, match="min_cameras"):
        RigSynchronizer(("a", "b"), print, min_cameras=3)
    with pytest.raises(ValueError, match="unique"):
        RigSynchronizer(("a", "a"), print)
    with pytest.raises(ValueError, match="slop_ns"):
        RigSynchronizer(("a",), print, slop_ns=-1)
    with pytest.raises(ValueError, match="unknown sync preset"):
        RigSynchronizer(("a",), print, config="fast")
    sync = RigSynchronizer(("a",), print, config="approximate")
    assert sync.config == SYNC_PRESETS["approximate"]
    with pytest.raises(ValueError, match="unknown camera"):
        sync.add("z", 1, None)
    with pytest.raises(ValueError, match="stamp_ns"):
        sync.add("a", 1.5, None)


@pytest.mark.parametrize("max_wait_ms", [150, 400])
@pytest.mark.parametrize("seed", range(4))
def test_lossy_streams_keep_invariants_and_account_for_every_message(seed, max_wait_ms):
    """Random frame loss, jitter, late cameras and duplicates: groups stay ordered, disjoint,
    within slop, and every received message is in a group, dropped with a reason, or queued."""
    rng = random.Random(seed)
    cams = ("a", "b", "c", "d")
    arrivals = []
    sent = {}  # frame index -> {camera: stamp}
    last_arrival = {c: 0.0 for c in cams}
    delay = {c: 0 for c in cams}
    for k in range(200):
        for cam in cams:
            if rng.random() < 0.05:  # transport latency changes now and then, up to 2.5 frames
                delay[cam] = rng.choice([0, 0, 30, 250]) * MS
            if rng.random() < 0.1:
                continue  # frame lost
            stamp = k * 100 * MS + rng.randint(-8, 8) * MS
            # A stream arrives in order (one publisher), whatever its latency does.
            last_arrival[cam] = max(last_arrival[cam], stamp + delay[cam] + rng.random())
            arrivals.append((last_arrival[cam], cam, stamp))
            sent.setdefault(k, {})[cam] = stamp
            if rng.random() < 0.02:
                arrivals.append((last_arrival[cam], cam, stamp))  # duplicate
    arrivals.sort(key=lambda a: a[0])
    sync, rec = make(cams, slop_ns=20 * MS, min_cameras=3, max_wait_ns=max_wait_ms * MS,
                     min_interval_ns=50 * MS, queue_size=8)
    for _, cam, stamp in arrivals:
        sync.add(cam, stamp, (cam, stamp))
    sync.tick(10**12)  # end of the stream: decide the slots still waiting
    groups = rec.groups
    used = {c: [] for c in cams}
    for g in groups:
        assert g.skew_ns <= 20 * MS and len(g.messages) >= 3
        assert g.skew_ns == max(g.stamps_ns.values()) - min(g.stamps_ns.values())
        for cam, stamp in g.stamps_ns.items():
            assert g.messages[cam] == (cam, stamp)
            used[cam].append(stamp)
    for cam in cams:
        assert used[cam] == sorted(set(used[cam])), "groups out of order or sharing messages"
    ref = [min(g.stamps_ns.values()) for g in groups]
    assert ref == sorted(ref)
    st = sync.stats()
    for cam in cams:
        assert st.received[cam] == len(used[cam]) + st.dropped_total(cam) + st.queued[cam]
    assert st.groups_emitted == len(groups)
    assert st.groups_degraded == sum(not g.complete for g in groups)
    if max_wait_ms > 250:  # waits longer than the worst latency: every usable frame is grouped
        expected = [frame for k, frame in sorted(sent.items()) if len(frame) >= 3]
        assert [dict(g.stamps_ns) for g in groups] == expected
        assert all(st.dropped[c]["late"] == 0 for c in cams)
    else:  # the 250 ms cameras are too late for some groups, which go out without them
        assert len(groups) > 50 and sum(st.dropped[c]["late"] for c in cams) > 0
