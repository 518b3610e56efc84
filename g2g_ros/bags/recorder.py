"""Recording of live topics to a bag (the node outputs during an evaluation replay).

Subscribes in raw mode (the CDR bytes are stored unchanged) and writes, when closed, one MCAP bag
with the typestore's message definitions. The log time of each message is given by a callable
(the replay's current ``/clock``), as ``ros2 bag record --use-sim-time`` would store it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import StoragePlugin, Writer

from g2g_ros.bags.player import message_class
from g2g_ros.bags.typestore import bag_qos, bag_typestore

# What g2g-eval-bag records: the outputs of rig_odometry and relocalize.
OUTPUT_TOPICS: Dict[str, str] = {
    "odometry": "nav_msgs/msg/Odometry",
    "relocalize/pose": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "relocalize/alignment": "g2g_msgs/msg/GroupAlignment",
    "relocalize/processed": "std_msgs/msg/Header",
    "rig_odometry/status": "g2g_msgs/msg/EstimatorStatus",
    "relocalize/status": "g2g_msgs/msg/EstimatorStatus",
    "/tf": "tf2_msgs/msg/TFMessage",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
}


class Recorder(Node):
    """Keeps every message of ``topics`` (name -> ``pkg/msg/Type``) until :meth:`write`."""

    def __init__(self, topics: Dict[str, str], now_ns: Callable[[], int], **node_kwargs):
        super().__init__("g2g_bag_recorder", **node_kwargs)
        self.topics = dict(topics)
        self.now_ns = now_ns
        self.messages: List[Tuple[str, int, bytes]] = []
        self.wall_received: Dict[str, List[float]] = {t: [] for t in topics}
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        for topic, msgtype in self.topics.items():
            self.create_subscription(message_class(msgtype), topic,
                                     lambda raw, t=topic: self._on_msg(t, raw), qos, raw=True)

    def _on_msg(self, topic: str, raw: bytes) -> None:
        self.messages.append((topic, int(self.now_ns()), bytes(raw)))
        self.wall_received[topic].append(time.monotonic())

    def counts(self) -> Dict[str, int]:
        out = {t: 0 for t in self.topics}
        for topic, _, _ in self.messages:
            out[topic] += 1
        return out

    def write(self, path: str | Path) -> Path:
        """Write everything received so far to the new bag directory ``path``."""
        store = bag_typestore()
        writer = Writer(Path(path), version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        try:
            conns = {t: writer.add_connection(t, m, typestore=store,
                                              offered_qos_profiles=[bag_qos()])
                     for t, m in self.topics.items()}
            for topic, stamp, raw in sorted(self.messages, key=lambda m: m[1]):
                writer.write(conns[topic], stamp, raw)
        finally:
            writer.close()
        return Path(path)
