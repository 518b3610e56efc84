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
    """A fresh rclpy context for in-process node tests, shut down afterwards."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.shutdown(context=ctx)
