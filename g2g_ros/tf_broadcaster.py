"""Publish transforms on ``/tf`` or ``/tf_static`` from 4x4 matrices (tf2_ros is not installable).

Wire-compatible with tf2_ros: ``tf2_msgs/TFMessage`` on ``/tf`` (reliable, volatile, depth 100)
and on ``/tf_static`` (reliable, transient local, depth 1; like tf2_ros' static broadcaster it
keeps every static transform sent so far and republishes the whole set, so a late-joining
listener receives all of them from the one latched message).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Union

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile

from g2g_ros.conversions import matrix_to_transform_stamped
from g2g_ros.qos import tf_qos
from g2g_ros.tf_buffer import make_tf_message


class TransformBroadcaster:
    """Sends ``geometry_msgs/TransformStamped`` (or 4x4 matrices) as ``tf2_msgs/TFMessage``.

    Args:
        node: the rclpy node that owns the publisher.
        static: publish on ``/tf_static`` with latched semantics instead of ``/tf``.
        topic / qos: overrides of the standard topic and QoS.
        lifecycle: use a lifecycle publisher of ``node`` (an ``rclpy.lifecycle`` node): the
            transforms are sent only while the node is active.
    """

    def __init__(self, node: Node, static: bool = False, topic: Optional[str] = None,
                 qos: Optional[QoSProfile] = None, lifecycle: bool = False) -> None:
        from tf2_msgs.msg import TFMessage

        self.static = static
        self._node = node
        self._lifecycle = lifecycle
        self._static_set: Dict[str, Any] = {}
        create = node.create_lifecycle_publisher if lifecycle else node.create_publisher
        self._publisher = create(
            TFMessage,
            topic or ("/tf_static" if static else "/tf"),
            qos or tf_qos(static, depth=1 if static else 100),
        )

    @property
    def publisher(self):
        """The underlying rclpy publisher (e.g. to wait until its messages are acknowledged)."""
        return self._publisher

    def send(self, transforms: Union[Any, Iterable[Any]]) -> None:
        """Publish one TransformStamped or an iterable of them."""
        if hasattr(transforms, "child_frame_id"):
            transforms = [transforms]
        transforms = list(transforms)
        if self.static:
            for t in transforms:
                self._static_set[t.child_frame_id] = t
            transforms = list(self._static_set.values())
        self._publisher.publish(make_tf_message(transforms))

    def send_matrix(self, pose: np.ndarray, parent: str, child: str,
                    stamp_ns: Optional[int] = None) -> None:
        """Publish ``T_{parent<-child}`` (4x4) stamped ``stamp_ns`` (default: node clock now)."""
        if stamp_ns is None:
            stamp_ns = self._node.get_clock().now().nanoseconds
        self.send(matrix_to_transform_stamped(pose, parent, child, stamp_ns))

    def destroy(self) -> None:
        if self._lifecycle:
            self._node.destroy_lifecycle_publisher(self._publisher)
        else:
            self._node.destroy_publisher(self._publisher)
