"""Fill a :class:`~g2g_ros.tf_buffer.TFBuffer` from ``/tf`` and ``/tf_static`` (ROS glue).

QoS as in tf2_ros: ``/tf`` reliable, volatile, depth 100; ``/tf_static`` reliable, transient
local, depth 100 (so transforms latched before the listener existed are still received).
The subscriptions live on the caller's node and are served by its executor; the callbacks only
ingest into the (thread-safe) buffer, which never raises on bad data (it counts and logs it).
The buffer gets the node's clock (unless it has one), so that a ``/tf`` sample stamped far
ahead of the node's ROS time is rejected instead of poisoning its edge.
"""

from __future__ import annotations

from typing import Any, Optional

from rclpy.node import Node
from g2g_ros.qos import tf_qos
from g2g_ros.tf_buffer import TFBuffer


class TransformListener:
    """Subscribes ``/tf`` and ``/tf_static`` on ``node`` and ingests them into ``buffer``.

    Args:
        buffer: the TF buffer to fill.
        node: node owning the subscriptions (spun by the caller's executor).
        tf_topic / tf_static_topic: topic names (remappable like any other).
        callback_group: optional rclpy callback group, e.g. to serve TF on its own thread.
    """

    def __init__(self, buffer: TFBuffer, node: Node, tf_topic: str = "/tf",
                 tf_static_topic: str = "/tf_static",
                 callback_group: Optional[Any] = None) -> None:
        from tf2_msgs.msg import TFMessage

        self.buffer = buffer
        self._node = node
        if buffer.clock_ns is None:  # far-future /tf stamps are judged against the node's time
            clock = node.get_clock()
            buffer.clock_ns = lambda: clock.now().nanoseconds
        self._subscriptions = [
            node.create_subscription(TFMessage, tf_topic, self._on_tf, tf_qos(static=False),
                                     callback_group=callback_group),
            node.create_subscription(TFMessage, tf_static_topic, self._on_tf_static,
                                     tf_qos(static=True), callback_group=callback_group),
        ]

    def _on_tf(self, msg: Any) -> None:
        self.buffer.ingest(msg, static=False)

    def _on_tf_static(self, msg: Any) -> None:
        self.buffer.ingest(msg, static=True)

    def destroy(self) -> None:
        for sub in self._subscriptions:
            self._node.destroy_subscription(sub)
        self._subscriptions = []
