"""`g2g-play-dataset TRAJ`: publish a dataset trajectory (g2g_model.data format) on ROS topics,
live, as the robot's drivers would (a bag is replayed by `g2g-bag play`, g2g_ros/bags/player.py).

Per frame: ``<cam>/image_raw`` (``<cam>/image_raw/compressed`` with ``--encoding jpeg``) +
``<cam>/camera_info`` for every camera, TF
``<odom_frame> -> <base_frame>`` (the trajectory relative to its first pose, optionally with a
simulated odometry drift), and the ground truth as ``nav_msgs/Odometry`` on
``ground_truth/odometry`` (frame ``gt_world``). The rig extrinsics go once to ``/tf_static``
(``<base_frame> -> <cam>_optical_frame``). With ``--clock`` it also publishes ``/clock`` for
``use_sim_time`` nodes and keeps the dataset's own stamps; otherwise stamps are shifted to start
at the current wall time. ``--no-odom-tf`` leaves ``<odom_frame> -> <base_frame>`` to another node
(e.g. ``rig_odometry``): a frame has one parent, and the nodes' TF buffers refuse a second one
while the first streams.

Used by the integration tests and the demo.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose
from g2g_ros.calibration import camera_info_msg
from g2g_ros.conversions import matrix_to_pose, matrix_to_transform_stamped, to_stamp
from g2g_ros.image_conversion import image_msg, jpeg_msg
from g2g_ros.qos import prefer_large_shm_profile
from g2g_ros.tf_broadcaster import TransformBroadcaster

#: ``--encoding`` value that publishes JPEG ``CompressedImage`` instead of ``Image``.
JPEG = "jpeg"


def drifted_odometry(world_T_body: np.ndarray, drift_per_m: float = 0.0,
                     yaw_drift_deg_per_m: float = 0.0) -> np.ndarray:
    """Odometry ``[T, 4, 4]`` starting at the identity, with a deterministic drift.

    Each step's translation is scaled by ``1 + drift_per_m`` and its heading rotated by
    ``yaw_drift_deg_per_m`` per metre travelled: an odometry source whose error grows with
    distance, like wheel or visual odometry.
    """
    out = [np.eye(4)]
    for i in range(1, len(world_T_body)):
        step = invert_pose(world_T_body[i - 1]) @ world_T_body[i]
        dist = float(np.linalg.norm(step[:3, 3]))
        err = make_pose(axis_angle_to_matrix([0, 0, np.radians(yaw_drift_deg_per_m * dist)]),
                        step[:3, 3] * drift_per_m)
        out.append(out[-1] @ step @ err)
    return np.stack(out)


class DatasetPublisher(Node):
    """Publishes one trajectory frame per timer tick (see the module docstring)."""

    def __init__(self, path: str, rate_hz: float = 10.0, odom_frame: str = "odom",
                 base_frame: str = "base_link", clock: bool = False, loop: bool = False,
                 drift_per_m: float = 0.0, yaw_drift_deg_per_m: float = 0.0,
                 encoding: str = "rgb8", cameras: Optional[List[str]] = None,
                 start: int = 0, count: int = 0, stride: int = 1,
                 corrupt_encoding: Optional[List[str]] = None, wait_subscribers_s: float = 10.0,
                 future_frames: int = 0, future_offset_s: float = 86400.0,
                 odom_tf: bool = True):
        super().__init__("g2g_dataset_player")
        from g2g_model.data.format import TrajectoryReader
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image

        self.reader = TrajectoryReader(path)
        self.cameras = cameras or self.reader.cameras
        self.odom_frame, self.base_frame, self.encoding = odom_frame, base_frame, encoding
        self.odom_tf = odom_tf
        n = self.reader.num_frames
        stop = n if count <= 0 else min(n, start + count * stride)
        self.indices = list(range(start, stop, stride))
        if not self.indices:
            raise ValueError(f"no frames to play in {path} (start {start}, count {count})")
        wtb = self.reader.world_T_body[self.indices]
        self.odom = drifted_odometry(wtb, drift_per_m, yaw_drift_deg_per_m)
        self.gt = wtb
        stamps = self.reader.timestamps_ns[self.indices].astype(np.int64)
        self.stamps = stamps if clock else stamps - stamps[0] + time.time_ns()
        self.loop, self.clock = loop, clock
        # Fault injection for tests: these cameras' images are labelled with an unsupported
        # encoding (the bytes stay RGB), as a misconfigured driver would send them.
        self.corrupt = set(corrupt_encoding or [])
        # Fault injection: the first `future_frames` frames are stamped `future_offset_s` ahead
        # (images, camera_info, TF), while /clock keeps the true time.
        self.future_frames, self.future_offset_ns = future_frames, int(future_offset_s * 1e9)
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.image_pubs: Dict[str, object] = {}
        self.info_pubs: Dict[str, object] = {}
        for cam in self.cameras:
            self.image_pubs[cam] = (
                self.create_publisher(CompressedImage, f"{cam}/image_raw/compressed", qos)
                if encoding == JPEG else self.create_publisher(Image, f"{cam}/image_raw", qos))
            self.info_pubs[cam] = self.create_publisher(CameraInfo, f"{cam}/camera_info", qos)
        self.gt_pub = self.create_publisher(Odometry, "ground_truth/odometry", qos)
        self.clock_pub = self.create_publisher(Clock, "/clock", 10) if clock else None
        self.tf = TransformBroadcaster(self)
        self.tf_static = TransformBroadcaster(self, static=True)
        self.tf_static.send([
            matrix_to_transform_stamped(self.reader.rig[c].T_body_cam, base_frame,
                                        f"{c}_optical_frame", int(self.stamps[0]))
            for c in self.reader.cameras])
        self.position = 0
        self.published = 0
        self.finished = False
        # Frames sent before discovery has matched a subscriber are lost (volatile QoS): wait
        # (bounded) until every image topic has one, so that replays do not depend on load.
        self._wait_until = time.monotonic() + wait_subscribers_s
        self.create_timer(1.0 / rate_hz, self._tick)

    def publish_frame(self, k: int) -> None:
        from nav_msgs.msg import Odometry
        from rosgraph_msgs.msg import Clock

        i, stamp = self.indices[k], int(self.stamps[k])
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=to_stamp(stamp)))
        if self.published < self.future_frames:
            stamp += self.future_offset_ns
        if self.odom_tf:
            self.tf.send(matrix_to_transform_stamped(self.odom[k], self.odom_frame,
                                                     self.base_frame, stamp))
        for cam in self.cameras:
            spec = self.reader.rig[cam]
            frame = f"{cam}_optical_frame"
            self.info_pubs[cam].publish(camera_info_msg(spec.K, spec.width, spec.height, frame,
                                                        stamp))
            if self.encoding == JPEG:
                self.image_pubs[cam].publish(jpeg_msg(self.reader.image(cam, i), frame, stamp))
                continue
            img = image_msg(self.reader.image(cam, i), frame, stamp, self.encoding)
            if cam in self.corrupt:
                img.encoding = "yuv422_yuy2"
            self.image_pubs[cam].publish(img)
        gt = Odometry()
        gt.header.stamp = to_stamp(stamp)
        gt.header.frame_id = "gt_world"
        gt.child_frame_id = self.base_frame
        matrix_to_pose(self.gt[k], gt.pose.pose)
        self.gt_pub.publish(gt)
        self.published += 1

    ACK_WAIT_S = 10.0

    def wait_for_acks(self) -> bool:
        """Before exiting: until the subscribers acknowledged every frame (at most
        ``ACK_WAIT_S``). Exiting right after the last frame lost the frames a loaded
        subscriber had not received yet (all of them when the first sends needed repair)."""
        from g2g_ros.spinning import wait_for_all_acked

        pubs = [*self.image_pubs.values(), *self.info_pubs.values(), self.gt_pub,
                self.tf.publisher, *([self.clock_pub] if self.clock_pub is not None else [])]
        return wait_for_all_acked(pubs, lambda t: rclpy.spin_once(self, timeout_sec=t),
                                  self.ACK_WAIT_S)

    def _tick(self) -> None:
        if self.finished:
            return
        if self.position == 0 and self._wait_until is not None:
            ready = all(p.get_subscription_count() > 0 for p in self.image_pubs.values())
            if not ready and time.monotonic() < self._wait_until:
                return
            self._wait_until = None
        if self.position >= len(self.indices):
            if not self.loop:
                self.finished = True
                return
            # Looping restarts time after the last stamp so stamps keep increasing.
            span = int(self.stamps[-1] - self.stamps[0]) + int(1e8)
            self.stamps = self.stamps + span
            self.position = 0
        self.publish_frame(self.position)
        self.position += 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="g2g-play-dataset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="trajectory directory (g2g_model.data format)")
    parser.add_argument("--rate", type=float, default=10.0, help="frames per second")
    parser.add_argument("--odom-frame", default="odom")
    parser.add_argument("--base-frame", default="base_link")
    parser.add_argument("--no-odom-tf", action="store_true",
                        help="do not publish odom_frame -> base_frame (another node does)")
    parser.add_argument("--clock", action="store_true", help="publish /clock, keep dataset time")
    parser.add_argument("--loop", action="store_true")
    parser.add_argument("--drift", type=float, default=0.0, help="odometry scale drift per m")
    parser.add_argument("--yaw-drift", type=float, default=0.0, help="deg of heading per m")
    parser.add_argument("--encoding", default="rgb8",
                        help=f"image encoding (rgb8, bgr8, mono8, ...) or {JPEG!r}: a JPEG "
                             "CompressedImage on <cam>/image_raw/compressed")
    parser.add_argument("--cameras", nargs="*", default=None)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=0, help="frames to play (0 = all)")
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--exit-when-done", action="store_true",
                        help="exit after the last frame, once every subscriber acknowledged it "
                        "(at most 10 s)")
    parser.add_argument("--wait-subscribers", type=float, default=10.0, metavar="S",
                        help="wait up to S seconds for a subscriber on every image topic")
    parser.add_argument("--corrupt-encoding", nargs="*", default=None, metavar="CAM",
                        help="fault injection: label these cameras' images with a bad encoding")
    parser.add_argument("--future-frames", type=int, default=0, metavar="N",
                        help="fault injection: stamp the first N frames ahead of /clock")
    parser.add_argument("--future-offset", type=float, default=86400.0, metavar="S",
                        help="how far ahead (seconds) for --future-frames")
    opts, ros_args = parser.parse_known_args(argv)
    prefer_large_shm_profile()
    rclpy.init(args=[sys.argv[0]] + ros_args)
    node = None
    try:
        node = DatasetPublisher(
            opts.path, opts.rate, opts.odom_frame, opts.base_frame, opts.clock, opts.loop,
            opts.drift, opts.yaw_drift, opts.encoding, opts.cameras, opts.start, opts.count,
            opts.stride, opts.corrupt_encoding, opts.wait_subscribers, opts.future_frames,
            opts.future_offset, odom_tf=not opts.no_odom_tf)
        while rclpy.ok() and not (opts.exit_when_done and node.finished):
            rclpy.spin_once(node, timeout_sec=0.05)
        if rclpy.ok() and not node.wait_for_acks():
            print("g2g-play-dataset: not every subscriber acknowledged the last frames within "
                  f"{node.ACK_WAIT_S:.0f} s", file=sys.stderr)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ValueError as exc:
        print(f"g2g-play-dataset: {exc}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
