"""The node worker thread (g2g_ros.worker.Worker): discarding queued jobs on deactivation."""

import threading

import pytest

pytest.importorskip("rclpy")
from g2g_ros.worker import Worker  # noqa: E402


def test_discard_drops_queued_jobs_of_the_given_kinds_only():
    release, started, ran = threading.Event(), threading.Event(), []

    def blocking():
        started.set()
        release.wait(5.0)
        ran.append("running")

    worker = Worker("test_worker", maxlen=8)
    try:
        worker.submit("frame", blocking)
        assert started.wait(5.0)
        for kind in ("frame", "frame", "localize_request", "localize"):
            worker.submit(kind, lambda kind=kind: ran.append(kind))
        assert worker.discard(("frame", "localize")) == 3
        assert worker.dropped == {"frame": 2, "localize": 1}
        release.set()
        assert worker.wait_idle(5.0)
        # The running job finished; of the queued ones only the kept kind ran.
        assert ran == ["running", "localize_request"]
        worker.submit("frame", lambda: ran.append("later"))
        assert worker.wait_idle(5.0) and ran[-1] == "later"
        assert worker.discard() == 0
    finally:
        release.set()
        worker.stop()


def test_queued_counts_waiting_jobs_not_the_running_one():
    """What rig_odometry asks before verifying a step: is a newer group already waiting?"""
    release, started, seen = threading.Event(), threading.Event(), []
    worker = Worker("test_worker", maxlen=2)

    def job():
        started.set()
        seen.append(worker.queued(("group",)))
        release.wait(5.0)

    try:
        worker.submit("group", job)
        assert started.wait(5.0) and worker.queued() == 0
        worker.submit("held", lambda: None)
        worker.submit("group", lambda: seen.append(worker.queued(("group",))))
        assert worker.queued(("group",)) == 1 and worker.queued() == 2
        release.set()
        assert worker.wait_idle(5.0)
        assert seen == [0, 0] and worker.queued() == 0
    finally:
        release.set()
        worker.stop()
