"""TransformListener over real DDS: a separate process broadcasts static and dynamic TF.

The publisher runs in its own interpreter (``python -c``); ROS_DOMAIN_ID and localhost-only
discovery come from test/conftest.py through the inherited environment.
"""

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("tf2_msgs.msg")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from g2g_model.geometry import axis_angle_to_matrix, make_pose  # noqa: E402
from g2g_ros.tf_buffer import ExtrapolationError, TFBuffer  # noqa: E402
from g2g_ros.tf_listener import TransformListener  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
S = 10**9
BASE_T_CAM = make_pose(axis_angle_to_matrix([-np.pi / 2, 0, -np.pi / 2]), [0.3, -0.1, 1.2])

# The child publishes the static transform once (latched), says READY, then streams
# odom -> base_link with x = stamp in seconds and a yaw of 10 deg per second, every 20 ms,
# stamps 100 ms apart starting at 100 s, for at most 15 s of wall time.
CHILD = """
import sys, time
import numpy as np
import rclpy
from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_ros.tf_broadcaster import TransformBroadcaster

rclpy.init()
node = rclpy.create_node("tf_publisher_child")
static = TransformBroadcaster(node, static=True)
dynamic = TransformBroadcaster(node)
static.send_matrix(np.array(%r), "base_link", "cam0_optical_frame", 0)
print("READY", flush=True)
start = time.monotonic()
k = 0
while time.monotonic() - start < 15.0:
    t = 100.0 + 0.1 * k
    pose = make_pose(axis_angle_to_matrix([0, 0, np.radians(10 * (t - 100.0))]), [t, 0, 0])
    dynamic.send_matrix(pose, "odom", "base_link", int(round(t * 1e9)))
    k += 1
    time.sleep(0.02)
node.destroy_node()
rclpy.shutdown()
""" % (BASE_T_CAM.tolist(),)


def _read_lines(stream, out):
    for line in iter(stream.readline, ""):
        out.put(line.strip())


@pytest.fixture
def publisher_process():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        yield proc, lines
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def test_listener_receives_static_and_dynamic_transforms(publisher_process):
    proc, lines = publisher_process
    deadline = time.monotonic() + 18.0
    output = []
    while "READY" not in output:
        try:
            output.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            pytest.fail(f"publisher did not start: {output}")
        assert proc.poll() is None or "READY" in output, f"publisher died: {output}"
    time.sleep(0.3)  # the static transform is latched before the listener exists

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("tf_listener_test", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        buffer = TFBuffer()
        listener = TransformListener(buffer, node)
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            if buffer.can_transform("odom", "cam0_optical_frame"):
                rng = buffer.time_range("base_link")
                if rng[1] - rng[0] >= 3 * S // 10:  # at least four dynamic samples
                    break
        else:
            pytest.fail(f"no transforms within the deadline; buffer: {buffer.stats()}")

        np.testing.assert_allclose(
            buffer.lookup_transform("base_link", "cam0_optical_frame"), BASE_T_CAM, atol=1e-9)
        earliest, latest = buffer.time_range("base_link")
        # Halfway between two published samples: x = stamp in seconds, yaw interpolated.
        stamp = earliest + 150 * S // 1000
        t = stamp / S
        odom_T_base = buffer.lookup_transform("odom", "base_link", stamp)
        expected = make_pose(axis_angle_to_matrix([0, 0, np.radians(10 * (t - 100.0))]),
                             [t, 0, 0])
        np.testing.assert_allclose(odom_T_base, expected, atol=1e-6)
        chained = buffer.lookup_transform("odom", "cam0_optical_frame", stamp)
        np.testing.assert_allclose(chained, expected @ BASE_T_CAM, atol=1e-6)
        with pytest.raises(ExtrapolationError):
            buffer.lookup_transform("odom", "base_link", latest + 10 * S)
        assert buffer.stats()["rejected"] == {}
        listener.destroy()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
