"""A node's diagnostics without ROS traffic: rate-limited problem logging."""

import time

from g2g_ros.diagnostics import ProblemLog


def test_problem_log_says_when_to_log_and_counts_the_rest():
    log = ProblemLog(keep_s=10.0, log_every_s=0.2)
    assert log.report("camera cam0", "bad encoding") == 0  # first: log now
    assert log.report("camera cam0", "bad encoding") is None
    assert log.report("camera cam0", "bad encoding") is None
    assert log.report("camera cam1", "no camera_info") == 0  # per key
    time.sleep(0.25)
    assert log.report("camera cam0", "bad encoding") == 2  # two were not logged
    assert log.counts["camera cam0"] == 4
    assert dict(log.recent())["camera cam0"] == "bad encoding"
