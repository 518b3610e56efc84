"""Dataset trajectory (g2g_model.data format) -> rosbag2 MCAP bag (``g2g-bag convert``).

Works for every source of the dataset format (simulator, NCLT, ZJH). Per frame, stamped with the
dataset's timestamp:

* ``<cam>/image_raw`` (``sensor_msgs/Image`` rgb8) or, with ``compressed``,
  ``<cam>/image_raw/compressed`` (``sensor_msgs/CompressedImage`` jpeg), and
  ``<cam>/camera_info``, frame ``<cam>_optical_frame``;
* ``/tf``: the odometry source ``odom -> base_link`` (the ground truth relative to its first pose,
  with a deterministic drift and optional seeded noise: the relocalization input) and the ground
  truth in its own frame pair ``gt_world -> gt_base_link`` (so it never joins the robot's tree);
* ``ground_truth/odometry`` (``nav_msgs/Odometry``, frame ``gt_world``, child ``base_link``).

Once, at the first stamp: ``/tf_static`` (``base_link -> <cam>_optical_frame``, latched QoS) and
``/g2g/metadata`` (``std_msgs/String`` JSON: dataset, date, cameras, source path, odometry
settings), also stored in the bag's custom metadata under ``g2g.metadata``.

Messages are built with the same builders as the live dataset player and serialized to CDR by the
ROS client library (the bytes ``ros2 bag record`` would store); connections carry the Kilted
message definitions and hashes from :func:`bag_typestore`.
"""

from __future__ import annotations

import datetime
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from tqdm import tqdm

from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_ros.bags.typestore import (
    GT_BASE_FRAME, GT_ODOM_TOPIC, GT_WORLD_FRAME, METADATA_TOPIC, TF_STATIC_TOPIC, TF_TOPIC,
    bag_qos, bag_typestore,
)
from g2g_ros.calibration import camera_info_msg
from g2g_ros.conversions import matrix_to_pose, matrix_to_transform_stamped, to_stamp
from g2g_ros.dataset_publisher import drifted_odometry
from g2g_ros.image_conversion import image_msg, rgb_to_compressed_fields
from g2g_ros.tf_buffer import make_tf_message

LOG = logging.getLogger(__name__)
METADATA_KEY = "g2g.metadata"


@dataclass
class OdometrySource:
    """How the ``odom -> base_link`` input is derived from the ground truth.

    ``drift_per_m`` / ``yaw_drift_deg_per_m``: deterministic drift (see
    :func:`g2g_ros.dataset_publisher.drifted_odometry`); ``noise_trans_m`` / ``noise_rot_deg``:
    standard deviation of a seeded per-step perturbation (a random walk).
    """

    drift_per_m: float = 0.0
    yaw_drift_deg_per_m: float = 0.0
    noise_trans_m: float = 0.0
    noise_rot_deg: float = 0.0
    seed: int = 0

    def validate(self) -> None:
        for name in ("noise_trans_m", "noise_rot_deg"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"odometry {name} must be finite and >= 0, got {value}")
        for name in ("drift_per_m", "yaw_drift_deg_per_m"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"odometry {name} must be finite, got {getattr(self, name)}")

    def poses(self, world_T_body: np.ndarray) -> np.ndarray:
        """``[T, 4, 4]`` odometry starting at the identity."""
        odom = drifted_odometry(world_T_body, self.drift_per_m, self.yaw_drift_deg_per_m)
        if self.noise_trans_m == 0 and self.noise_rot_deg == 0:
            return odom
        rng = np.random.default_rng(self.seed)
        out = [odom[0]]
        for i in range(1, len(odom)):
            step = np.linalg.inv(odom[i - 1]) @ odom[i]
            noise = make_pose(axis_angle_to_matrix(rng.normal(0, np.radians(self.noise_rot_deg),
                                                              3)),
                              rng.normal(0, self.noise_trans_m, 3))
            out.append(out[-1] @ step @ noise)
        return np.stack(out)


@dataclass
class ConvertSummary:
    bag: str
    frames: int
    cameras: List[str]
    counts: Dict[str, int] = field(default_factory=dict)
    metadata: Dict[str, object] = field(default_factory=dict)


def _serialize(msg) -> bytes:
    from rclpy.serialization import serialize_message

    return serialize_message(msg)


def bag_metadata(reader, odometry: OdometrySource, compressed: bool) -> Dict[str, object]:
    """The JSON metadata stored in the bag (dataset, date, cameras, source, odometry)."""
    meta = reader.meta
    dataset = str(meta.get("dataset") or meta.get("source") or "unknown")
    first = int(reader.timestamps_ns[0])
    date = meta.get("date") or datetime.datetime.fromtimestamp(
        first / 1e9, tz=datetime.timezone.utc).isoformat()
    return {
        "format": "g2g-bag", "version": 1, "dataset": dataset, "date": str(date),
        "cameras": list(reader.cameras), "source_path": str(Path(reader.path).resolve()),
        "num_frames": int(reader.num_frames), "compressed": bool(compressed),
        "odometry": asdict(odometry), "ground_truth_frames": [GT_WORLD_FRAME, GT_BASE_FRAME],
        "dataset_meta": meta,
    }


def convert_trajectory(traj: str | Path, out: str | Path, compressed: bool = False,
                       odometry: Optional[OdometrySource] = None, jpeg_quality: int = 95,
                       base_frame: str = "base_link", odom_frame: str = "odom",
                       progress: bool = True) -> ConvertSummary:
    """Write the bag directory ``out`` (rosbag2 layout: ``metadata.yaml`` + one ``.mcap``).

    Raises:
        ValueError: unreadable trajectory, existing ``out`` or bad odometry settings.
    """
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import String

    from g2g_model.data.format import TrajectoryReader

    odometry = odometry or OdometrySource()
    odometry.validate()
    if not 1 <= jpeg_quality <= 100:
        raise ValueError(f"jpeg_quality must be in [1, 100], got {jpeg_quality}")
    out = Path(out)
    if out.exists():
        raise ValueError(f"output {out} already exists; choose a new bag path")
    reader = TrajectoryReader(traj)
    cams = list(reader.cameras)
    stamps = reader.timestamps_ns.astype(np.int64)
    gt = reader.world_T_body
    odom = odometry.poses(gt)
    store = bag_typestore()
    meta = bag_metadata(reader, odometry, compressed)
    writer = Writer(out, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_custom_data(METADATA_KEY, json.dumps(meta))
    counts: Dict[str, int] = {}

    def add(topic: str, msgtype: str, latched: bool = False):
        conn = writer.add_connection(topic, msgtype, typestore=store,
                                     offered_qos_profiles=[bag_qos(latched)])
        counts[topic] = 0
        return conn

    def write(conn, stamp: int, msg) -> None:
        writer.write(conn, int(stamp), _serialize(msg))
        counts[conn.topic] += 1

    writer.open()
    try:
        c_meta = add(METADATA_TOPIC, "std_msgs/msg/String", latched=True)
        c_static = add(TF_STATIC_TOPIC, "tf2_msgs/msg/TFMessage", latched=True)
        c_tf = add(TF_TOPIC, "tf2_msgs/msg/TFMessage")
        c_gt = add(GT_ODOM_TOPIC, "nav_msgs/msg/Odometry")
        c_img, c_info = {}, {}
        for cam in cams:
            if compressed:
                c_img[cam] = add(f"{cam}/image_raw/compressed", "sensor_msgs/msg/CompressedImage")
            else:
                c_img[cam] = add(f"{cam}/image_raw", "sensor_msgs/msg/Image")
            c_info[cam] = add(f"{cam}/camera_info", "sensor_msgs/msg/CameraInfo")
        t0 = int(stamps[0])
        write(c_meta, t0, String(data=json.dumps(meta)))
        write(c_static, t0, make_tf_message([
            matrix_to_transform_stamped(reader.rig[c].T_body_cam, base_frame,
                                        f"{c}_optical_frame", t0) for c in cams]))
        for i in tqdm(range(reader.num_frames), desc=f"convert {Path(traj).name}",
                      unit="frame", disable=not progress):
            stamp = int(stamps[i])
            write(c_tf, stamp, make_tf_message([
                matrix_to_transform_stamped(odom[i], odom_frame, base_frame, stamp),
                matrix_to_transform_stamped(gt[i], GT_WORLD_FRAME, GT_BASE_FRAME, stamp)]))
            for cam in cams:
                spec = reader.rig[cam]
                frame = f"{cam}_optical_frame"
                rgb = reader.image(cam, i)
                if compressed:
                    img = CompressedImage(**rgb_to_compressed_fields(rgb, "jpeg", jpeg_quality))
                    img.header.stamp = to_stamp(stamp)
                    img.header.frame_id = frame
                else:
                    img = image_msg(rgb, frame, stamp)
                write(c_info[cam], stamp, camera_info_msg(spec.K, spec.width, spec.height,
                                                          frame, stamp))
                write(c_img[cam], stamp, img)
            msg = Odometry()
            msg.header.stamp = to_stamp(stamp)
            msg.header.frame_id = GT_WORLD_FRAME
            msg.child_frame_id = base_frame
            matrix_to_pose(gt[i], msg.pose.pose)
            write(c_gt, stamp, msg)
    except BaseException:
        writer.close()
        raise
    writer.close()
    LOG.info("wrote %s: %d frames, %d cameras", out, reader.num_frames, len(cams))
    return ConvertSummary(str(out), reader.num_frames, cams, counts, meta)
