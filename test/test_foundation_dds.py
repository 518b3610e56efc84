"""Two real processes exchange g2g_msgs and sensor_msgs over real DDS (Fast DDS, loopback)."""

import pathlib
import subprocess
import sys
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from g2g_msgs.msg import GroupAlignment  # noqa: E402
from g2g_msgs.srv import LoadMap  # noqa: E402

PEERS = pathlib.Path(__file__).parent / "ros_peers"
pytestmark = pytest.mark.ros


@pytest.fixture
def ros_node():
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("g2g_test_listener", context=context)
    executor = rclpy.executors.SingleThreadedExecutor(context=context)
    executor.add_node(node)
    yield node, executor
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown(context=context)


def start_peer(name: str, seconds: float = 25.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(PEERS / name), "--seconds", str(seconds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def stop_peer(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out.decode(errors="replace")


def spin_until(executor, predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
        if predicate():
            return True
    return False


def test_group_alignment_and_image_between_processes(ros_node):
    node, executor = ros_node
    received = {}
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(GroupAlignment, "test_alignment",
                             lambda m: received.setdefault("alignment", m), qos)
    node.create_subscription(Image, "test_image", lambda m: received.setdefault("image", m), qos)
    peer = start_peer("alignment_talker.py")
    try:
        ok = spin_until(executor, lambda: len(received) == 2, timeout=20.0)
    finally:
        log = stop_peer(peer)
    assert ok, f"nothing received over DDS within 20 s; peer output:\n{log}"

    msg = received["alignment"]
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1234, 5678)
    assert msg.header.frame_id == "cam0_optical_frame"
    assert (msg.group_a_id, msg.group_b_id) == ("map:test:kf10", "query:42")
    assert [(t.sec, t.nanosec) for t in msg.stamps_a] == [(10 + i, i) for i in range(5)]
    assert [(t.sec, t.nanosec) for t in msg.stamps_b] == [(20 + j, j) for j in range(4)]
    assert [p.position.x for p in msg.poses_a] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [p.position.y for p in msg.poses_b] == [0.0, -0.5, -1.0, -1.5]
    assert all(abs(p.orientation.z - 0.7071067811865476) < 1e-12 for p in msg.poses_b)
    assert msg.overlap_score == pytest.approx(0.625)
    assert msg.inference_time_ms == pytest.approx(12.5)

    import numpy as np

    img = received["image"]
    assert (img.height, img.width, img.encoding, img.step) == (224, 224, "rgb8", 672)
    pixels = np.frombuffer(bytes(img.data), dtype=np.uint8).reshape(224, 224, 3)
    r, c, ch = np.meshgrid(np.arange(224), np.arange(224), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(pixels, (r + 3 * c + ch) % 251)


def test_load_map_service_round_trip(ros_node):
    node, executor = ros_node
    client = node.create_client(LoadMap, "/test_server/load_map")
    peer = start_peer("load_map_server.py")
    try:
        ready = spin_until(executor, client.service_is_ready, timeout=20.0)
        assert ready, "service never appeared"
        replies = []
        for path in ("/maps/office.g2gmap", "/maps/broken.txt"):
            future = client.call_async(LoadMap.Request(path=path))
            assert spin_until(executor, future.done, timeout=10.0), f"no reply for {path}"
            replies.append(future.result())
    finally:
        log = stop_peer(peer)
    assert replies[0].success and replies[0].num_keyframes == len("/maps/office.g2gmap"), log
    assert replies[0].message == "server saw /maps/office.g2gmap"
    assert not replies[1].success and replies[1].num_keyframes == len("/maps/broken.txt")
