"""Test-wide settings.

DDS isolation: every pytest run gets its own ROS domain and localhost-only discovery, so two
runs on the same machine (or a developer's live robot graph) never see each other's traffic.
Child processes started by the tests inherit these variables.
"""

import os
import random

import pytest

# Domain ids 1..100 are safe with Fast DDS default ports; vary by pid so parallel runs differ.
os.environ["ROS_DOMAIN_ID"] = str(1 + (os.getpid() + random.randrange(1000)) % 100)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# The large shared-memory segment our players give themselves (g2g_ros.qos), for every process
# of the run: a group of camera images then fits the segment instead of waiting for repairs.
from g2g_ros.qos import prefer_large_shm_profile  # noqa: E402

prefer_large_shm_profile()


@pytest.fixture
def context():
    """A fresh rclpy context for in-process node tests, shut down afterwards.""",
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.shutdown(context=ctx)


# The files that take 15 s or more each (setup included), from `make test PYTEST_ARGS=
# --durations=0` on 2 cores (2026-11-29): marked ``slow`` here, in one place, so that `make
# test-fast` (``-m "not slow"``) stays a quick subset; `make test` runs them all.
SLOW_FILES = {
    "test_bag_replay.py",
    "test_covis_bench_sim.py",
    "test_covis_quality.py",
    "test_eval_bag_reloc.py",
    "test_eval_cli.py",
    "test_inference.py",
    "test_lens.py",
    "test_localization_cache_memory.py",
    "test_localization_rig_motion.py",
    "test_localization_verification.py",
    "test_nodes_accuracy.py",
    "test_nodes_calibration.py",
    "test_nodes_counters.py",
    "test_nodes_lifecycle.py",
    "test_nodes_paper_model.py",
    "test_nodes_parameters.py",
    "test_nodes_relocalize.py",
    "test_nodes_rig_odometry.py",
    "test_nodes_time_jumps.py",
    "test_release_weights.py",
    "test_train_defaults_gpu.py",
    "test_eval_bag_rig.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
