"""Peer process for test_dds_large_images: publishes ``--bursts`` bursts of 5 x 640x480 rgb8
images (cam0..cam4, reliable, as ``ros2 bag play`` offers our bags), stamped with the burst
index, once every subscriber has matched."""

import argparse
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bursts", type=int, default=6)
    parser.add_argument("--rate", type=float, default=2.0)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node("image_burst_talker")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pubs = [node.create_publisher(Image, f"cam{i}/image_raw", qos) for i in range(5)]
    data = np.random.default_rng(0).integers(0, 255, 640 * 480 * 3, dtype=np.uint8).tobytes()
    msg = Image(height=480, width=640, encoding="rgb8", step=1920, data=data)
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and not all(p.get_subscription_count() for p in pubs):
        rclpy.spin_once(node, timeout_sec=0.1)
    time.sleep(1.0)
    for k in range(args.bursts):
        msg.header.stamp.sec = k
        for pub in pubs:
            pub.publish(msg)
        time.sleep(1.0 / args.rate)
    time.sleep(2.0)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
