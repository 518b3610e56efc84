"""SingleJob: one background job at a time; a second start while one runs is refused, the
outcome (value or exception) reaches the future, and the next job may start once it is done."""

import threading

import pytest

from g2g_ros.single_job import SingleJob


def test_one_job_at_a_time_and_outcomes_reach_the_future():
    jobs = SingleJob("test_job")
    release = threading.Event()
    first = jobs.start("slow", lambda: release.wait(10) and "done")
    assert first is not None
    assert jobs.start("second", lambda: "never") is None
    what, age = jobs.running()
    assert what == "slow" and age >= 0
    release.set()
    assert first.result(timeout=10) == "done"
    assert jobs.running() is None

    def fail():
        raise KeyError("frames")

    failed = jobs.start("failing", fail)
    with pytest.raises(KeyError, match="frames"):
        failed.result(timeout=10)
    assert jobs.start("after", lambda: 3).result(timeout=10) == 3
