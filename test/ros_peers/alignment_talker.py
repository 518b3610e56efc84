"""Peer process for test_foundation_dds: publishes a GroupAlignment and an Image repeatedly.

Run as ``python -m test.ros_peers.alignment_talker`` is avoided (test/ is not a package on the
path); the test starts this file by path. Exits after ``--seconds`` or when killed.
"""

import argparse
import time

import rclpy
from geometry_msgs.msg import Pose
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from builtin_interfaces.msg import Time

from g2g_msgs.msg import GroupAlignment


def build_alignment() -> GroupAlignment:
    msg = GroupAlignment()
    msg.header.stamp = Time(sec=1234, nanosec=5678)
    msg.header.frame_id = "cam0_optical_frame"
    msg.group_a_id = "map:test:kf10"
    msg.group_b_id = "query:42"
    msg.stamps_a = [Time(sec=10 + i, nanosec=i) for i in range(5)]
    msg.stamps_b = [Time(sec=20 + j, nanosec=j) for j in range(4)]
    for i in range(5):
        p = Pose()
        p.position.x = float(i)
        p.orientation.w = 1.0
        msg.poses_a.append(p)
    for j in range(4):
        p = Pose()
        p.position.y = -0.5 * j
        p.orientation.z = 0.7071067811865476
        p.orientation.w = 0.7071067811865476
        msg.poses_b.append(p)
    msg.overlap_score = 0.625
    msg.inference_time_ms = 12.5
    return msg


def build_image() -> Image:
    img = Image()
    img.height, img.width = 224, 224
    img.encoding = "rgb8"
    img.step = 224 * 3
    # A deterministic pattern the receiver can recompute: value = (row + 3*col + channel) % 251.
    data = bytearray(224 * 224 * 3)
    for r in range(224):
        base = r * 224 * 3
        for c in range(224):
            for ch in range(3):
                data[base + 3 * c + ch] = (r + 3 * c + ch) % 251
    img.data = bytes(data)
    img.header.frame_id = "cam1_optical_frame"
    return img


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("g2g_test_talker")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pub_align = node.create_publisher(GroupAlignment, "test_alignment", qos)
    pub_image = node.create_publisher(Image, "test_image", qos)
    alignment, image = build_alignment(), build_image()
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline and rclpy.ok():
            pub_align.publish(alignment)
            pub_image.publish(image)
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
