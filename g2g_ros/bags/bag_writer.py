"""Writing a G2G bag: the rosbag2 MCAP layout the nodes, ``g2g-bag play`` and ``g2g-eval-bag``
read, shared by every converter (:mod:`.convert` for datasets, :mod:`.ros1` for ROS 1 bags).

A :class:`G2GBagWriter` holds the connections of the fixed topics -- ``/g2g/metadata`` and
``/tf_static`` (latched), ``/tf`` and ``ground_truth/odometry`` -- plus any a converter adds
(images, camera_info), counts the messages per topic, and writes the per-stamp pose streams:
the odometry input ``odom -> base_link`` and the ground truth (``gt_world -> gt_base_link`` on
``/tf``, a tree of its own, and ``nav_msgs/Odometry`` in ``gt_world``, child ``base_link``).
Messages are rclpy messages serialized to CDR by the ROS client library (the bytes
``ros2 bag record`` would store); connections carry the Kilted message definitions and hashes
from :func:`bag_typestore`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from g2g_ros.bags.typestore import (
    GT_BASE_FRAME, GT_ODOM_TOPIC, GT_WORLD_FRAME, METADATA_TOPIC, TF_STATIC_TOPIC, TF_TOPIC,
    bag_qos, bag_typestore,
)
from g2g_ros.conversions import matrix_to_pose, matrix_to_transform_stamped, to_stamp
from g2g_ros.tf_buffer import make_tf_message

#: Key of the converter's JSON metadata in the bag's custom metadata (``metadata.yaml``).
METADATA_KEY = "g2g.metadata"


def serialize(msg) -> bytes:
    """CDR bytes of an rclpy message."""
    from rclpy.serialization import serialize_message

    return serialize_message(msg)


class G2GBagWriter:
    """An open bag directory ``out`` (``metadata.yaml`` + one ``.mcap``); use as a context
    manager, or call :meth:`close`.

    Raises:
        ValueError: ``out`` exists already.
    """

    def __init__(self, out: str | Path, metadata: Mapping[str, object]):
        out = Path(out)
        if out.exists():
            raise ValueError(f"output {out} already exists; choose a new bag path")
        self.path = out
        self.metadata = dict(metadata)
        self.store = bag_typestore()
        self.counts: Dict[str, int] = {}
        self._writer = Writer(out, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.set_custom_data(METADATA_KEY, json.dumps(self.metadata))
        self._writer.open()
        self._meta = self.add(METADATA_TOPIC, "std_msgs/msg/String", latched=True)
        self._static = self.add(TF_STATIC_TOPIC, "tf2_msgs/msg/TFMessage", latched=True)
        self._tf = self.add(TF_TOPIC, "tf2_msgs/msg/TFMessage")
        self._gt = self.add(GT_ODOM_TOPIC, "nav_msgs/msg/Odometry")

    def __enter__(self) -> "G2GBagWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._writer.close()

    def add(self, topic: str, msgtype: str, latched: bool = False):
        """A new connection (reliable; ``latched``: transient local, depth 1)."""
        conn = self._writer.add_connection(topic, msgtype, typestore=self.store,
                                           offered_qos_profiles=[bag_qos(latched)])
        self.counts[topic] = 0
        return conn

    def write(self, conn, stamp_ns: int, msg) -> None:
        """One rclpy message at log time ``stamp_ns``."""
        self._writer.write(conn, int(stamp_ns), serialize(msg))
        self.counts[conn.topic] += 1

    def write_start(self, stamp_ns: int, base_T_cams: Mapping[str, np.ndarray],
                    base_frame: str = "base_link") -> None:
        """The metadata and the rig (``base_frame -> <frame>`` per entry of ``base_T_cams``,
        frame id -> 4x4) on ``/tf_static``, once, at the first stamp."""
        from std_msgs.msg import String

        self.write(self._meta, stamp_ns, String(data=json.dumps(self.metadata)))
        self.write(self._static, stamp_ns, make_tf_message([
            matrix_to_transform_stamped(T, base_frame, frame, stamp_ns)
            for frame, T in base_T_cams.items()]))

    def write_poses(self, stamp_ns: int, odom_T_base: Optional[np.ndarray],
                    world_T_base: Optional[np.ndarray], base_frame: str = "base_link",
                    odom_frame: str = "odom") -> None:
        """At ``stamp_ns``: the odometry input and the ground truth on ``/tf`` (either may be
        ``None``: left out) and the ground truth on ``ground_truth/odometry``."""
        from nav_msgs.msg import Odometry

        transforms: Sequence = []
        if odom_T_base is not None:
            transforms = [matrix_to_transform_stamped(odom_T_base, odom_frame, base_frame,
                                                      stamp_ns)]
        if world_T_base is not None:
            transforms = list(transforms) + [matrix_to_transform_stamped(
                world_T_base, GT_WORLD_FRAME, GT_BASE_FRAME, stamp_ns)]
        if transforms:
            self.write(self._tf, stamp_ns, make_tf_message(transforms))
        if world_T_base is None:
            return
        msg = Odometry()
        msg.header.stamp = to_stamp(int(stamp_ns))
        msg.header.frame_id = GT_WORLD_FRAME
        msg.child_frame_id = base_frame
        matrix_to_pose(world_T_base, msg.pose.pose)
        self.write(self._gt, stamp_ns, msg)
