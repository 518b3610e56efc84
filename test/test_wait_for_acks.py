"""g2g_ros.spinning.wait_for_all_acked: what the players (g2g-play-dataset, g2g-bag play) wait
for before they exit, so that a loaded subscriber still gets their last frames."""

import time

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from std_msgs.msg import Header  # noqa: E402

from g2g_ros.spinning import wait_for_all_acked  # noqa: E402

pytestmark = pytest.mark.ros


def test_reliable_messages_are_acknowledged_and_received():
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        talker = rclpy.create_node("ack_talker", context=context)
        listener = rclpy.create_node("ack_listener", context=context)
        got = []
        listener.create_subscription(Header, "ack_test", got.append, qos)
        pub = talker.create_publisher(Header, "ack_test", qos)
        deadline = time.monotonic() + 10
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        for k in range(3):
            pub.publish(Header(frame_id=str(k)))
        assert wait_for_all_acked([pub], lambda t: None, timeout_s=10.0)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(listener)
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert [m.frame_id for m in got] == ["0", "1", "2"]
    finally:
        rclpy.try_shutdown(context=context)


class _NeverAcked:
    """Stands for a publisher whose subscriber never acknowledges (a hung process)."""

    def wait_for_all_acked(self, timeout):
        time.sleep(timeout.nanoseconds * 1e-9)
        return False


def test_gives_up_after_the_timeout_and_keeps_spinning_meanwhile():
    spins = []
    t0 = time.monotonic()
    assert not wait_for_all_acked([_NeverAcked()], spins.append, timeout_s=0.3)
    assert 0.3 <= time.monotonic() - t0 < 2.0 and len(spins) >= 3
