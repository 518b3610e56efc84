"""Per-camera subscriptions (image or compressed image + camera_info) for the G2G nodes.

Callbacks only hand each CameraInfo to the node's
:class:`~g2g_ros.camera_calibrations.CameraCalibrations` (which checks it) and the raw image
message, with its stamp, to a sink (a synchronizer or a bounded queue). Conversion to RGB and
rectification happen later on the worker, so a wrong encoding or size is reported there (per
camera) without blocking the executor.

An image stamped more than ``max_ahead_s`` ahead of the node's ROS time is dropped here and
counted (``rejected_future``): one such stamp would otherwise become the camera's "last stamp"
and make the per-camera order checks downstream reject every later, correct image. Before the
first /clock (``use_sim_time`` and a ROS time of 0) no stamp can be judged, so images are dropped
and counted (``dropped_no_clock``), reported once ``NO_CLOCK_REPORT_AFTER`` of a camera's
images were: letting them through raced the player's first /clock and let a future stamp in.
Dropping, not holding, keeps the contract of an evaluation replay, which sends a group again
when no node answered it (``g2g_ros/bags/player.py``): an image no node used.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from rclpy.node import Node

from g2g_ros.camera_calibrations import CameraCalibrations
from g2g_ros.conversions import stamp_ns
from g2g_ros.qos import sensor_qos


NO_CLOCK_REPORT_AFTER = 10


class CameraInputs:
    """Subscribe ``<cam>/<image_topic>`` and ``<cam>/<camera_info_topic>`` for every camera.

    Args:
        node: owning node (topics are relative, so namespaces and remapping apply).
        cameras: camera names (topic prefixes).
        sink: ``sink(camera, stamp_ns, message)`` called from the subscription callback.
        compressed: subscribe ``CompressedImage`` on ``<cam>/<image_topic>/compressed``.
        reliability: ``best_effort`` (default for sensors) or ``reliable``.
        max_ahead_s: drop images stamped further ahead of the node's ROS time (None or 0: off);
            while the ROS time is 0 (before the first /clock) images are dropped, not judged.
        on_reject: ``on_reject(camera, reason)`` for every dropped image (e.g. to report it).
        calibrations: where each camera_info goes (the node's, kept across activations);
            default: a new one that reports nothing.
    """

    def __init__(self, node: Node, cameras: List[str], sink: Callable[[str, int, object], None],
                 image_topic: str = "image_raw", camera_info_topic: str = "camera_info",
                 compressed: bool = False, reliability: str = "best_effort",
                 callback_group=None, max_ahead_s: Optional[float] = 10.0,
                 on_reject: Optional[Callable[[str, str], None]] = None,
                 calibrations: Optional[CameraCalibrations] = None):
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image

        self.cameras = list(cameras)
        self._sink = sink
        self._lock = threading.Lock()
        self.calibrations = calibrations if calibrations is not None else CameraCalibrations()
        self.received: Dict[str, int] = {c: 0 for c in cameras}
        self.first_stamp: Dict[str, Optional[int]] = {c: None for c in cameras}
        self.last_stamp: Dict[str, Optional[int]] = {c: None for c in cameras}
        self.last_wall: Dict[str, Optional[float]] = {c: None for c in cameras}
        self.subscribed_wall = time.monotonic()  # a camera is awaited from here on (silent)
        self._stamped: Dict[str, int] = {c: 0 for c in cameras}  # images since first_stamp
        self.rejected_future: Dict[str, int] = {c: 0 for c in cameras}
        self.dropped_no_clock: Dict[str, int] = {c: 0 for c in cameras}
        self._clock = node.get_clock()
        self._max_ahead_ns = int(max_ahead_s * 1e9) if max_ahead_s else None
        self._on_reject = on_reject
        # Reliable (a replay): room for 1 s of a 10 Hz camera while the executor is held up,
        # since a reliable subscriber loses what its history overwrites; best effort (live):
        # the newest images only.
        qos = sensor_qos(reliability, depth=10 if reliability == "reliable" else 5)
        self._subs = []
        for cam in self.cameras:
            topic = f"{cam}/{image_topic}" + ("/compressed" if compressed else "")
            msg_type = CompressedImage if compressed else Image
            self._subs.append(node.create_subscription(
                msg_type, topic, self._image_cb(cam), qos, callback_group=callback_group))
            self._subs.append(node.create_subscription(
                CameraInfo, f"{cam}/{camera_info_topic}", self._info_cb(cam), qos,
                callback_group=callback_group))
        self._node = node

    def destroy(self) -> None:
        """Unsubscribe every stream (a deactivated node receives nothing)."""
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs = []

    def _image_cb(self, cam: str):
        def cb(msg):
            stamp = stamp_ns(msg.header.stamp)
            now = self._clock.now().nanoseconds
            if self._max_ahead_ns is not None and now == 0:
                self._no_clock(cam)
                return
            ahead = stamp - now
            ahead = ahead if self._max_ahead_ns is not None and ahead > self._max_ahead_ns \
                else None
            with self._lock:
                self.received[cam] += 1
                if ahead is not None:
                    self.rejected_future[cam] += 1
                else:
                    if self.first_stamp[cam] is None:
                        self.first_stamp[cam] = stamp
                    self._stamped[cam] += 1
                    self.last_stamp[cam] = stamp
                    self.last_wall[cam] = time.monotonic()
            if ahead is not None:
                if self._on_reject is not None:
                    self._on_reject(cam, f"image stamped {ahead * 1e-9:.1f} s ahead of the ROS "
                                    f"time dropped (max_stamp_ahead_s "
                                    f"{self._max_ahead_ns * 1e-9:g})")
                return
            self._sink(cam, stamp, msg)
        return cb

    def _no_clock(self, cam: str) -> None:
        """Drop an image that arrived before the ROS time is known; report a persistent lack."""
        with self._lock:
            self.dropped_no_clock[cam] += 1
            count = self.dropped_no_clock[cam]
        if count % NO_CLOCK_REPORT_AFTER == 0 and self._on_reject is not None:
            self._on_reject(cam, f"{count} images dropped: no ROS time yet (use_sim_time is "
                            f"set and no /clock arrived)")

    def reset_stamps(self) -> None:
        """Forget the stamp history (rates) after a jump back of time; counters are kept."""
        with self._lock:
            for cam in self.cameras:
                self.first_stamp[cam] = self.last_stamp[cam] = None
                self._stamped[cam] = 0

    def _info_cb(self, cam: str):
        def cb(msg):
            self.calibrations.on_camera_info(cam, msg)
        return cb

    def intrinsics(self, cam: str) -> Optional[Tuple[np.ndarray, Tuple[int, int]]]:
        """(K, (width, height)) of the camera's rectified images, or None before a valid
        calibration."""
        return self.calibrations.intrinsics(cam)

    def silent(self, seconds: float) -> Dict[str, Optional[float]]:
        """Cameras with no image for ``seconds`` (wall time): name -> seconds since the last
        image, or None if none arrived in the ``seconds`` since these inputs subscribed (a
        camera is not silent before the node has waited that long for it: a replay or a
        driver starting after the node)."""
        now = time.monotonic()
        with self._lock:
            out = {}
            for cam, last in self.last_wall.items():
                if last is None and now - self.subscribed_wall > seconds:
                    out[cam] = None
                elif last is not None and now - last > seconds:
                    out[cam] = now - last
            return out

    def newest_age_s(self) -> Optional[float]:
        """Seconds (wall time) since the newest image of any camera; None before the first."""
        with self._lock:
            walls = [w for w in self.last_wall.values() if w is not None]
        return time.monotonic() - max(walls) if walls else None

    def rates_hz(self) -> Dict[str, float]:
        """Average receive rate per camera over its stamps since the start or the last
        :meth:`reset_stamps` (0 before two images)."""
        out = {}
        with self._lock:
            for cam in self.cameras:
                first, last, n = self.first_stamp[cam], self.last_stamp[cam], self._stamped[cam]
                out[cam] = (n - 1) / ((last - first) * 1e-9) if (
                    n > 1 and first is not None and last > first) else 0.0
        return out
