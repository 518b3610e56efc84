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

Messages are built with the same builders as the live dataset player and written by
:class:`~g2g_ros.bags.bag_writer.G2GBagWriter`.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
from tqdm import tqdm

from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_ros.bags.bag_writer import G2GBagWriter
from g2g_ros.bags.typestore import GT_BASE_FRAME, GT_WORLD_FRAME
from g2g_ros.calibration import camera_info_msg
from g2g_ros.dataset_publisher import drifted_odometry
from g2g_ros.image_conversion import image_msg, jpeg_msg

LOG = logging.getLogger(__name__)


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
    meta = bag_metadata(reader, odometry, compressed)
    with G2GBagWriter(out, meta) as writer:
        c_img, c_info = {}, {}
        for cam in cams:
            if compressed:
                c_img[cam] = writer.add(f"{cam}/image_raw/compressed",
                                        "sensor_msgs/msg/CompressedImage")
            else:
                c_img[cam] = writer.add(f"{cam}/image_raw", "sensor_msgs/msg/Image")
            c_info[cam] = writer.add(f"{cam}/camera_info", "sensor_msgs/msg/CameraInfo")
        writer.write_start(int(stamps[0]), {f"{c}_optical_frame": reader.rig[c].T_body_cam
                                            for c in cams}, base_frame)
        for i in tqdm(range(reader.num_frames), desc=f"convert {Path(traj).name}",
                      unit="frame", disable=not progress):
            stamp = int(stamps[i])
            writer.write_poses(stamp, odom[i], gt[i], base_frame, odom_frame)
            for cam in cams:
                spec = reader.rig[cam]
                frame = f"{cam}_optical_frame"
                rgb = reader.image(cam, i)
                img = (jpeg_msg(rgb, frame, stamp, jpeg_quality) if compressed
                       else image_msg(rgb, frame, stamp))
                writer.write(c_info[cam], stamp, camera_info_msg(spec.K, spec.width,
                                                                 spec.height, frame, stamp))
                writer.write(c_img[cam], stamp, img)
    LOG.info("wrote %s: %d frames, %d cameras", out, reader.num_frames, len(cams))
    return ConvertSummary(str(out), reader.num_frames, cams, writer.counts, meta)
