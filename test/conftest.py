"""Test-wide settings.

DDS isolation: every pytest process (`make test` runs the test files in ``PYTEST_WORKERS``
processes with pytest-xdist) reserves a ROS domain for its lifetime, with localhost-only
discovery, so two test processes, the evaluation replays the tests start (`g2g-eval-bag` takes
a free domain the same way) and a developer's live robot graph never see each other's traffic.
Child processes started by the tests inherit these variables.
"""

import os
from contextlib import ExitStack

import pytest

from g2g_ros.bags.domains import private_domain

# The product's reservation (an advisory lock per domain, released by the operating system when
# the process ends): held until then, never closed here. A domain drawn at random could be the
# one a replay in the other worker reserved, and the two tests' nodes would then take each
# other's messages.
_RESERVED = ExitStack()
os.environ["ROS_DOMAIN_ID"] = str(_RESERVED.enter_context(private_domain()))


def _share_the_cores() -> None:
    """Under xdist, each worker (and the processes it starts) gets its share of the cores for
    torch's, OpenMP's and BLAS' thread pools: workers that each ran two threads on two cores
    spun at each other's barriers (a 97 s fixture took 371 s)."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if count < 2:
        return
    threads = str(max(1, len(os.sched_getaffinity(0)) // count))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads
    import torch

    torch.set_num_threads(int(threads))


_share_the_cores()
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
