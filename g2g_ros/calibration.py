"""Rig calibration: per-camera intrinsics and extrinsics from YAML or from ``/tf_static``.

YAML layout (``load_rig_calibration`` / ``save_rig_calibration``)::

    base_frame: base_link
    cameras:
      - name: cam0
        frame_id: cam0_optical_frame      # optional, default <name>_optical_frame
        width: 640
        height: 480
        K: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]        # or 9 numbers, row-major
        T_base_cam: [[...], [...], [...], [0, 0, 0, 1]]   # 4x4 camera(optical) -> base
        # or instead of T_base_cam:  translation: [x, y, z]   rotation_xyzw: [x, y, z, w]

``T_base_cam`` maps points in the camera's optical frame (OpenCV axes: x right, y down,
z forward) into the base frame, i.e. it is the TF transform ``base_link -> <cam>_optical_frame``.
Everything is validated on load: finite values, orthonormal rotations with det +1, positive
focal lengths and image sizes, unique camera names and frame ids.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from g2g_model.geometry import is_rotation, make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix

#: Rotations whose ``R^T R`` differs from identity by more than this are rejected.
ROTATION_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class CameraCalibration:
    """One camera of the rig. ``K`` [3, 3], ``size`` (width, height), ``T_base_cam`` [4, 4]."""

    name: str
    frame_id: str
    K: np.ndarray
    size: Tuple[int, int]
    T_base_cam: np.ndarray


@dataclasses.dataclass(frozen=True)
class RigCalibration:
    """A calibrated rig; ``source`` says where it came from (a path or ``/tf_static``)."""

    base_frame: str
    cameras: Tuple[CameraCalibration, ...]
    source: str = ""

    @property
    def names(self) -> List[str]:
        return [c.name for c in self.cameras]

    def camera(self, name: str) -> CameraCalibration:
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise ValueError(f"no camera {name!r} in the rig; cameras: {self.names}")

    def extrinsics(self) -> np.ndarray:
        """``T_base_cam`` of every camera, ``[N, 4, 4]``."""
        return np.stack([c.T_base_cam for c in self.cameras])

    def intrinsics(self) -> np.ndarray:
        """``K`` of every camera, ``[N, 3, 3]``."""
        return np.stack([c.K for c in self.cameras])


def _matrix(value: Any, shape: Tuple[int, int], where: str) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: not a numeric matrix ({exc})") from None
    if array.size != shape[0] * shape[1]:
        raise ValueError(f"{where}: expected {shape[0]}x{shape[1]} values, got {array.size}")
    array = array.reshape(shape)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{where}: values must be finite, got {array.tolist()}")
    return array


def validate_camera(cam: CameraCalibration) -> CameraCalibration:
    """Check one camera; returns it (with float64 arrays) or raises ``ValueError``."""
    where = f"camera {cam.name!r}"
    if not cam.name or not cam.frame_id:
        raise ValueError(f"{where}: name and frame_id must be non-empty")
    K = _matrix(cam.K, (3, 3), f"{where} K")
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise ValueError(f"{where} K: focal lengths must be > 0, got fx={K[0, 0]} fy={K[1, 1]}")
    if not np.allclose(K[2], [0, 0, 1]) or K[1, 0] != 0:
        raise ValueError(f"{where} K: expected [[fx, s, cx], [0, fy, cy], [0, 0, 1]], got "
                         f"{K.tolist()}")
    width, height = (int(v) for v in cam.size)
    if width <= 0 or height <= 0:
        raise ValueError(f"{where}: size must be positive, got {width}x{height}")
    T = _matrix(cam.T_base_cam, (4, 4), f"{where} T_base_cam")
    if not np.allclose(T[3], [0, 0, 0, 1]):
        raise ValueError(f"{where} T_base_cam: last row must be [0, 0, 0, 1], got {T[3].tolist()}")
    if not is_rotation(T[:3, :3], atol=ROTATION_TOLERANCE):
        raise ValueError(
            f"{where} T_base_cam: rotation is not orthonormal with det +1 "
            f"(max |R^T R - I| = {np.abs(T[:3, :3].T @ T[:3, :3] - np.eye(3)).max():.2e}, "
            f"det = {np.linalg.det(T[:3, :3]):.6f})"
        )
    return dataclasses.replace(cam, K=K, size=(width, height), T_base_cam=T)


def validate_rig(rig: RigCalibration) -> RigCalibration:
    """Validate every camera and the uniqueness of names / frame ids."""
    if not rig.base_frame:
        raise ValueError("rig base_frame must be non-empty")
    if not rig.cameras:
        raise ValueError("rig has no cameras")
    cameras = tuple(validate_camera(c) for c in rig.cameras)
    for field in ("name", "frame_id"):
        values = [getattr(c, field) for c in cameras]
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            raise ValueError(f"rig camera {field}s must be unique, repeated: {dupes}")
    return dataclasses.replace(rig, cameras=cameras)


def rig_from_dict(data: Mapping[str, Any], source: str = "") -> RigCalibration:
    """Parse the YAML layout of the module docstring (already loaded into a dict)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("cameras"), list):
        raise ValueError(f"{source or 'calibration'}: expected a mapping with a 'cameras' list")
    cameras = []
    for index, entry in enumerate(data["cameras"]):
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise ValueError(f"{source}: cameras[{index}] must be a mapping with a 'name'")
        name = str(entry["name"])
        where = f"{source}: camera {name!r}"
        missing = [k for k in ("width", "height", "K") if k not in entry]
        if missing:
            raise ValueError(f"{where}: missing fields {missing}")
        if "T_base_cam" in entry:
            T = entry["T_base_cam"]
        elif "translation" in entry and "rotation_xyzw" in entry:
            quat = _matrix(entry["rotation_xyzw"], (1, 4), f"{where} rotation_xyzw")[0]
            if abs(np.linalg.norm(quat) - 1.0) > 1e-3:
                raise ValueError(f"{where} rotation_xyzw: not a unit quaternion {quat.tolist()}")
            trans = _matrix(entry["translation"], (1, 3), f"{where} translation")[0]
            T = make_pose(quat_xyzw_to_matrix(quat), trans)
        else:
            raise ValueError(f"{where}: needs T_base_cam or translation + rotation_xyzw")
        cameras.append(CameraCalibration(
            name=name,
            frame_id=str(entry.get("frame_id", f"{name}_optical_frame")),
            K=entry["K"],
            size=(entry["width"], entry["height"]),
            T_base_cam=T,
        ))
    try:
        return validate_rig(RigCalibration(
            base_frame=str(data.get("base_frame", "base_link")), cameras=tuple(cameras),
            source=source,
        ))
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}" if source else str(exc)) from None


def rig_to_dict(rig: RigCalibration) -> Dict[str, Any]:
    """Inverse of :func:`rig_from_dict` (plain lists, YAML-safe)."""
    return {
        "base_frame": rig.base_frame,
        "cameras": [
            {
                "name": c.name,
                "frame_id": c.frame_id,
                "width": int(c.size[0]),
                "height": int(c.size[1]),
                "K": np.asarray(c.K, dtype=float).tolist(),
                "T_base_cam": np.asarray(c.T_base_cam, dtype=float).tolist(),
            }
            for c in rig.cameras
        ],
    }


def load_rig_calibration(path: Union[str, Path]) -> RigCalibration:
    """Read and validate a YAML calibration file; errors name the file and the camera."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"calibration file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"calibration file {str(path)!r} is not valid YAML: {exc}") from None
    return rig_from_dict(data, source=str(path))


def save_rig_calibration(rig: RigCalibration, path: Union[str, Path]) -> None:
    import yaml

    Path(path).write_text(yaml.safe_dump(rig_to_dict(validate_rig(rig)), sort_keys=False))


def rig_from_tf(
    buffer: Any,
    intrinsics: Mapping[str, Tuple[np.ndarray, Tuple[int, int]]],
    base_frame: str = "base_link",
    frame_ids: Optional[Mapping[str, str]] = None,
) -> RigCalibration:
    """Extrinsics from a :class:`~g2g_ros.tf_buffer.TFBuffer` filled from ``/tf_static``.

    Args:
        buffer: the TF buffer; ``T_base_cam`` = ``lookup_transform(base_frame, frame_id)``
            at the latest common time.
        intrinsics: camera name (rig order) -> (K [3, 3], (width, height)), e.g. from
            :func:`g2g_ros.image_conversion.camera_info_to_intrinsics`.
        frame_ids: camera name -> optical frame id; default ``<name>_optical_frame``.

    Raises:
        TFError subclasses when a frame is missing; ValueError when the result is invalid.
    """
    frame_ids = dict(frame_ids or {})
    cameras = []
    for name, (K, size) in intrinsics.items():
        frame_id = frame_ids.get(name, f"{name}_optical_frame")
        T = buffer.lookup_transform(base_frame, frame_id, 0)
        cameras.append(CameraCalibration(name=name, frame_id=frame_id, K=K, size=tuple(size),
                                         T_base_cam=T))
    return validate_rig(RigCalibration(base_frame=base_frame, cameras=tuple(cameras),
                                       source="/tf_static"))


def format_rig_log_lines(rig: RigCalibration) -> List[str]:
    """One human-readable line per camera, for logging the calibration once at start-up."""
    lines = []
    for cam in rig.cameras:
        K, T = cam.K, cam.T_base_cam
        quat = matrix_to_quat_xyzw(T[:3, :3])
        hfov = math.degrees(2 * math.atan2(cam.size[0] / 2, K[0, 0]))
        lines.append(
            f"camera {cam.name} ({cam.frame_id}) {cam.size[0]}x{cam.size[1]} "
            f"fx={K[0, 0]:.2f} fy={K[1, 1]:.2f} cx={K[0, 2]:.2f} cy={K[1, 2]:.2f} "
            f"hfov={hfov:.1f}deg | {rig.base_frame}<-cam t=[{T[0, 3]:+.4f} {T[1, 3]:+.4f} "
            f"{T[2, 3]:+.4f}] m q_xyzw=[{quat[0]:+.4f} {quat[1]:+.4f} {quat[2]:+.4f} "
            f"{quat[3]:+.4f}] (from {rig.source or 'memory'})"
        )
    return lines
