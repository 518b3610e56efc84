"""The ROS side of a rig's calibration: extrinsics from ``/tf_static``, ``sensor_msgs/CameraInfo``
<-> intrinsics, and the start-up log lines.

The rig itself (cameras, intrinsics, extrinsics, validation, the calibration YAML file) is
:class:`g2g_model.data.rig.Rig`; a rig's ``T_body_cam`` is the TF transform
``base_link -> <cam>_optical_frame``.
"""

from __future__ import annotations

import math
from typing import Any, List, Mapping, Optional, Tuple

import numpy as np

from g2g_model.cameras.lens import NO_MODEL, Lens
from g2g_model.data.rig import CALIBRATION_ROTATION_ATOL, CameraSpec, Rig
from g2g_model.geometry import matrix_to_quat_xyzw
from g2g_ros.conversions import to_stamp


def rig_from_tf(
    buffer: Any,
    intrinsics: Mapping[str, Tuple[np.ndarray, Tuple[int, int]]],
    base_frame: str = "base_link",
    frame_ids: Optional[Mapping[str, str]] = None,
) -> Rig:
    """Extrinsics from a :class:`~g2g_ros.tf_buffer.TFBuffer` filled from ``/tf_static``.

    Args:
        buffer: the TF buffer; ``T_body_cam`` = ``lookup_transform(base_frame, frame_id)``
            at the latest common time.
        intrinsics: camera name (rig order) -> (K [3, 3], (width, height)), e.g. from
            a :class:`~g2g_ros.camera_calibrations.CameraCalibrations` (the rectified K).
        frame_ids: camera name -> optical frame id; default ``<name>_optical_frame``.

    Raises:
        TFError subclasses when a frame is missing; ValueError when the result is invalid.
    """
    frame_ids = dict(frame_ids or {})
    cameras = []
    for name, (K, size) in intrinsics.items():
        frame_id = frame_ids.get(name, f"{name}_optical_frame")
        T = buffer.lookup_transform(base_frame, frame_id, 0)
        cameras.append(CameraSpec(name=name, K=K, width=size[0], height=size[1], T_body_cam=T,
                                  frame_id=frame_id))
    rig = Rig(cameras, base_frame=base_frame, source="/tf_static")
    return rig.validate(CALIBRATION_ROTATION_ATOL)


def camera_info_to_lens(info: Any, what: str = "camera info") -> Lens:
    """CameraInfo-like (``width``, ``height``, ``k`` (ROS 2) or ``K`` (ROS 1 / rosbags), 9
    values, ``d`` / ``D`` and ``distortion_model``) -> :class:`~g2g_model.cameras.lens.Lens`.

    Raises:
        ValueError: non-finite K, non-positive focal lengths or image size, a K that is not
            ``[[fx, s, cx], [0, fy, cy], [0, 0, 1]]``, a principal point outside the image, or
            (:class:`~g2g_model.cameras.lens.UnsupportedLens`) a distortion model that is not
            supported or a ``D`` of the wrong length; the message names ``what``.
    """
    k = _first_field(info, "k", "K")
    if k is None:
        raise ValueError(f"{what} has no 'k' (or 'K') field")
    k = np.asarray(k, dtype=np.float64).reshape(-1)
    if k.size != 9:
        raise ValueError(f"{what}: K must have 9 values, got {k.size}")
    d = _first_field(info, "d", "D")
    d = np.asarray([] if d is None else d, dtype=np.float64)
    return Lens(str(getattr(info, "distortion_model", NO_MODEL)), k.reshape(3, 3), d,
                int(info.width), int(info.height), what)


def _first_field(msg: Any, *names: str) -> Any:
    """The first of the fields ``names`` that ``msg`` has (ROS 2 lower case, ROS 1 upper)."""
    for name in names:
        value = getattr(msg, name, None)
        if value is not None:
            return value
    return None


def camera_info_msg(K: np.ndarray, width: int, height: int, frame_id: str, stamp_ns: int):
    """A ``sensor_msgs/CameraInfo`` (rclpy) of a pinhole camera without distortion."""
    from sensor_msgs.msg import CameraInfo

    info = CameraInfo()
    info.header.stamp = to_stamp(stamp_ns)
    info.header.frame_id = frame_id
    info.width, info.height = int(width), int(height)
    info.distortion_model = "plumb_bob"
    info.d = [0.0] * 5
    info.k = [float(v) for v in np.asarray(K, float).reshape(-1)]
    info.r = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    P = np.zeros((3, 4))
    P[:, :3] = K
    info.p = [float(v) for v in P.reshape(-1)]
    return info


def format_rig_log_lines(rig: Rig) -> List[str]:
    """One human-readable line per camera, for logging the calibration once at start-up."""
    lines = []
    for cam in rig.cameras:
        K, T = cam.K, cam.T_body_cam
        quat = matrix_to_quat_xyzw(T[:3, :3])
        hfov = math.degrees(2 * math.atan2(cam.width / 2, K[0, 0]))
        lines.append(
            f"camera {cam.name} ({cam.frame_id}) {cam.width}x{cam.height} "
            f"fx={K[0, 0]:.2f} fy={K[1, 1]:.2f} cx={K[0, 2]:.2f} cy={K[1, 2]:.2f} "
            f"hfov={hfov:.1f}deg | {rig.base_frame}<-cam t=[{T[0, 3]:+.4f} {T[1, 3]:+.4f} "
            f"{T[2, 3]:+.4f}] m q_xyzw=[{quat[0]:+.4f} {quat[1]:+.4f} {quat[2]:+.4f} "
            f"{quat[3]:+.4f}] (from {rig.source or 'memory'})"
            + ("" if cam.is_pinhole else f", lens {cam.lens().describe()}")
        )
    return lines
