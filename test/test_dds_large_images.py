"""Large camera images over DDS on one machine: bursts of five 640x480
images reach a best-effort subscriber only with the Fast DDS profile
``config/fastdds_large_shm.xml`` (a shared-memory segment larger than a burst); with Fast DDS'
defaults most are lost, the first cameras of each burst the most."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

rclpy = pytest.importorskip("rclpy")

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROFILE = ROOT / "config" / "fastdds_large_shm.xml"
pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]

LISTENER = r"""
import collections, sys, time, rclpy
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
rclpy.init()
node = rclpy.create_node("burst_listener")
qos = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST,
                 reliability=ReliabilityPolicy.BEST_EFFORT)  # the sensor-data convention
got = collections.Counter()
for i in range(5):
    node.create_subscription(Image, f"cam{i}/image_raw",
                             (lambda c: lambda m: got.update([c]))(f"cam{i}"), qos)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    rclpy.spin_once(node, timeout_sec=0.1)
print(" ".join(str(got[f"cam{i}"]) for i in range(5)))
"""


def _received(env) -> list:
    listener = subprocess.Popen([sys.executable, "-c", LISTENER, "14"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    talker = subprocess.run([sys.executable, str(ROOT / "test" / "ros_peers" /
                                                 "image_burst_talker.py"), "--bursts", "6"],
                            env=env, capture_output=True, text=True, timeout=60)
    out, _ = listener.communicate(timeout=60)
    assert talker.returncode == 0, talker.stderr[-2000:]
    return [int(v) for v in out.split()[-5:]]


@pytest.mark.skipif(os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
                    != "rmw_fastrtps_cpp", reason="a Fast DDS profile")
def test_best_effort_subscriber_gets_every_burst_with_the_large_shm_profile():
    env = dict(os.environ, FASTDDS_DEFAULT_PROFILES_FILE=str(PROFILE))
    assert _received(env) == [6] * 5


def test_players_prefer_the_large_shm_profile_unless_told_otherwise():
    from g2g_ros.qos import PROFILES_VAR, prefer_large_shm_profile

    env = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
    assert prefer_large_shm_profile(env) == str(PROFILE) == env[PROFILES_VAR]
    mine = {PROFILES_VAR: "/robot/fastdds.xml"}  # the user's own profile is kept
    assert prefer_large_shm_profile(mine) == "/robot/fastdds.xml"
    cyclone = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}  # not a Fast DDS graph
    assert prefer_large_shm_profile(cyclone) == "" and PROFILES_VAR not in cyclone
    # The test run itself (conftest) and what it starts use it.
    assert os.environ.get(PROFILES_VAR) == str(PROFILE)
