"""Rig description: the calibrated cameras of one rig, the one description of a rig in the
repository (dataset format, converters, simulator, maps and the ROS nodes; ``g2g_ros.calibration``
adds what only ROS has: extrinsics from ``/tf_static``, ``camera_info`` conversion).

Each camera has a name, a pinhole matrix ``K [3,3]`` (pixel centres at integer coordinates, the
OpenCV convention), an image size, ``T_body_cam [4,4]`` and an optical frame id (default
``<name>_optical_frame``). ``T_body_cam`` is the camera-to-body transform with the camera in
OpenCV axes (x right, y down, z forward) and the body frame chosen by the dataset (REP-103 x
forward, y left, z up for the simulator and the converters); for the ROS nodes the body frame is
the rig's ``base_frame`` (``base_link``), so ``T_body_cam`` is the TF transform
``base_link -> <cam>_optical_frame``. Camera poses in the world follow as
``world_T_cam = world_T_body @ T_body_cam``.

Two YAML layouts, one parser (:meth:`Rig.from_dict`, :func:`load_rig`) and one writer
(:meth:`Rig.to_dict`, :func:`save_rig`):

* the dataset's ``rig.yaml`` (docs/DATASET_FORMAT.md): per camera ``name, width, height, K,
  T_body_cam``; the names are folder names there (``[A-Za-z0-9_-]``);
* the ROS nodes' calibration file (``calibration=True``)::

    base_frame: base_link
    cameras:
      - name: cam0
        frame_id: cam0_optical_frame      # optional, default <name>_optical_frame
        width: 640
        height: 480
        K: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]        # or 9 numbers, row-major
        T_base_cam: [[...], [...], [...], [0, 0, 0, 1]]   # 4x4 camera(optical) -> base
        # or instead of T_base_cam:  translation: [x, y, z]   rotation_xyzw: [x, y, z, w]
        distortion_model: plumb_bob                        # optional (default: a pinhole):
        distortion_coefficients: [k1, k2, t1, t2, k3]      # the lens, as in camera_info

  The nodes rectify a distorted camera's images (:mod:`g2g_model.cameras.lens`, the same as
  for a ``camera_info`` with that model); a dataset's cameras are pinholes.

Everything is validated: finite values, orthonormal rotations with det +1 (within
:data:`ROTATION_ATOL`, or :data:`CALIBRATION_ROTATION_ATOL` for a ROS calibration), positive
focal lengths and image sizes, unique camera names and frame ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from g2g_model.geometry import is_rotation, make_pose, quat_xyzw_to_matrix

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")

#: Rotations whose ``R^T R`` differs from identity by more than this are rejected (datasets).
ROTATION_ATOL = 1e-3
#: The same for a ROS calibration (YAML file or ``/tf_static``): calibrations are exact.
CALIBRATION_ROTATION_ATOL = 1e-4


class UnknownCamera(KeyError, ValueError):
    """A camera name that is not in the rig (a ``KeyError`` and a ``ValueError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def check_intrinsics(K: np.ndarray, width: int, height: int, what: str) -> None:
    """Raise ``ValueError`` unless ``K`` is a finite pinhole ``[[fx, s, cx], [0, fy, cy],
    [0, 0, 1]]`` with ``fx, fy > 0`` and the image size is positive; ``what`` names the camera."""
    K = np.asarray(K)
    if K.shape != (3, 3) or not np.all(np.isfinite(K)):
        raise ValueError(f"{what} K must be a finite 3x3, got {K.tolist()}")
    if K[0, 0] <= 0 or K[1, 1] <= 0 or not np.allclose(K[2], [0, 0, 1]) or K[1, 0] != 0:
        raise ValueError(f"{what} K needs focal lengths fx, fy > 0 and the form [[fx, s, cx], "
                         f"[0, fy, cy], [0, 0, 1]], got {K.tolist()}")
    if width <= 0 or height <= 0:
        raise ValueError(f"{what}: size must be positive, got size {width}x{height}")


@dataclass
class CameraSpec:
    """One camera: ``K [3,3]``, ``width``/``height`` in pixels, ``T_body_cam [4,4]``, the
    optical ``frame_id`` (``None``: ``<name>_optical_frame``) and its lens distortion
    (``distortion_model`` and ``distortion_coefficients`` as in ``sensor_msgs/CameraInfo``;
    ``""`` and none: a pinhole; the models of :mod:`g2g_model.cameras.lens`). A dataset's
    cameras are pinholes (its converters rectify); a calibration file may name a lens."""

    name: str
    K: np.ndarray
    width: int
    height: int
    T_body_cam: np.ndarray = field(default_factory=lambda: np.eye(4))
    frame_id: Optional[str] = None
    distortion_model: str = ""
    distortion_coefficients: tuple = ()

    def __post_init__(self) -> None:
        self.K = np.asarray(self.K, dtype=np.float64)
        self.T_body_cam = np.asarray(self.T_body_cam, dtype=np.float64)
        self.width = int(self.width)
        self.height = int(self.height)
        self.frame_id = f"{self.name}_optical_frame" if self.frame_id is None else self.frame_id
        self.distortion_model = str(self.distortion_model)
        self.distortion_coefficients = tuple(float(v) for v in self.distortion_coefficients)
        self.validate()

    @property
    def is_pinhole(self) -> bool:
        """No lens distortion (no model named, no non-zero coefficient)."""
        return not self.distortion_model and not any(self.distortion_coefficients)

    def lens(self):
        """The camera's :class:`g2g_model.cameras.lens.Lens` (its model, K, D and size)."""
        from g2g_model.cameras.lens import Lens  # the lens module reads this one's checks

        return Lens(self.distortion_model, self.K, np.asarray(self.distortion_coefficients),
                    self.width, self.height, f"camera {self.name!r}")

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)``."""
        return self.width, self.height

    def validate(self, rotation_atol: float = ROTATION_ATOL) -> "CameraSpec":
        """Raise ``ValueError`` naming the camera and the field when it is malformed."""
        what = f"camera {self.name!r}"
        if not self.name or not self.frame_id:
            raise ValueError(f"{what}: name and frame_id must be non-empty")
        check_intrinsics(self.K, self.width, self.height, what)
        if not self.is_pinhole:
            self.lens()  # an unsupported model or a D of the wrong length, named
        t = self.T_body_cam
        if t.shape != (4, 4) or not np.all(np.isfinite(t)) or not np.allclose(t[3], [0, 0, 0, 1]):
            raise ValueError(f"{what} T_body_cam must be a finite 4x4 with last row [0, 0, 0, 1]")
        if not is_rotation(t[:3, :3], atol=rotation_atol):
            r = t[:3, :3]
            raise ValueError(
                f"{what} T_body_cam: not a rotation (orthonormal with det +1 within "
                f"{rotation_atol:g}): max |R^T R - I| = {np.abs(r.T @ r - np.eye(3)).max():.2e}, "
                f"det = {np.linalg.det(r):.6f}")
        return self


@dataclass
class Rig:
    """An ordered list of :class:`CameraSpec` with unique names and frame ids; ``base_frame``
    is the body's ROS frame, ``source`` says where the rig came from (a file, ``/tf_static``)."""

    cameras: list[CameraSpec]
    base_frame: str = "base_link"
    source: str = ""

    def __post_init__(self) -> None:
        self.cameras = list(self.cameras)
        if not self.cameras:
            raise ValueError("rig: needs at least one camera")
        if not self.base_frame:
            raise ValueError("rig: base_frame must be non-empty")
        for attr in ("name", "frame_id"):
            values = [getattr(c, attr) for c in self.cameras]
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"rig: camera {attr}s must be unique, repeated: {repeated}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.cameras]

    def __len__(self) -> int:
        return len(self.cameras)

    def __getitem__(self, name: str) -> CameraSpec:
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise UnknownCamera(f"no camera {name!r} in rig {self.names}")

    def T_body_cams(self) -> np.ndarray:
        """``[N,4,4]`` camera-to-body transforms in rig order."""
        return np.stack([c.T_body_cam for c in self.cameras])

    def intrinsics(self) -> np.ndarray:
        """``[N,3,3]`` pinhole matrices in rig order."""
        return np.stack([c.K for c in self.cameras])

    def validate(self, rotation_atol: float = ROTATION_ATOL) -> "Rig":
        """Check every camera again, e.g. with the tighter :data:`CALIBRATION_ROTATION_ATOL`."""
        for cam in self.cameras:
            cam.validate(rotation_atol)
        return self

    def check_folder_names(self, where: str = "rig") -> None:
        """The dataset format's rule: camera names are folder names, ``[A-Za-z0-9_-]``."""
        for name in self.names:
            if not set(name) <= _NAME_CHARS:
                raise ValueError(f"{where}: camera name {name!r} must be non-empty "
                                 f"[A-Za-z0-9_-]")

    def to_dict(self, calibration: bool = False) -> dict[str, Any]:
        """The dataset's ``rig.yaml`` layout (plain lists, YAML-safe); with ``calibration``,
        the ROS calibration file's (base frame, frame ids, ``T_base_cam``)."""
        cameras = []
        for c in self.cameras:
            entry: dict[str, Any] = {"name": c.name}
            if calibration:
                entry["frame_id"] = c.frame_id
            entry.update(width=c.width, height=c.height, K=c.K.tolist())
            entry["T_base_cam" if calibration else "T_body_cam"] = c.T_body_cam.tolist()
            if not c.is_pinhole:
                entry.update(distortion_model=c.distortion_model,
                             distortion_coefficients=list(c.distortion_coefficients))
            cameras.append(entry)
        return {"base_frame": self.base_frame, "cameras": cameras} if calibration else {
            "cameras": cameras}

    @classmethod
    def from_dict(cls, data: Any, where: str = "rig", calibration: bool = False) -> "Rig":
        """Inverse of :meth:`to_dict`. Either layout may give ``K`` as 9 numbers and the
        extrinsics as ``translation`` + ``rotation_xyzw``; errors name ``where`` and the
        camera. The dataset layout also checks :meth:`check_folder_names`."""
        if not isinstance(data, Mapping) or not isinstance(data.get("cameras"), list):
            raise ValueError(f"{where}: expected a mapping with a 'cameras' list")
        key = "T_base_cam" if calibration else "T_body_cam"
        try:
            rig = cls([_camera_from_dict(entry, index, key, lens=calibration)
                       for index, entry in enumerate(data["cameras"])],
                      base_frame=str(data.get("base_frame", "base_link")),
                      source=where if calibration else "")
            if calibration:
                rig.validate(CALIBRATION_ROTATION_ATOL)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if not calibration:
            rig.check_folder_names(where)
        return rig


def _matrix(value: Any, shape: tuple[int, int], where: str) -> np.ndarray:
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


def _distortion_from_dict(entry: Mapping, what: str, lens: bool) -> tuple[str, tuple]:
    """``(distortion_model, distortion_coefficients)`` of a camera entry; the coefficients may
    be a list or the camera calibration file's ``{rows, cols, data}``. Without ``lens`` (a
    dataset's rig) only a pinhole is accepted."""
    model = str(entry.get("distortion_model", "") or "")
    coeffs = entry.get("distortion_coefficients", [])
    if isinstance(coeffs, Mapping):
        coeffs = coeffs.get("data", [])
    try:
        values = tuple(float(v) for v in coeffs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} distortion_coefficients must be numbers ({exc})") from None
    if not lens and (model or any(values)):
        raise ValueError(f"{what}: a dataset's images are pinhole images (its converters "
                         f"rectify them), got distortion_model {model!r} with "
                         f"{list(values)}")
    return model, values


def _camera_from_dict(entry: Any, index: int, key: str, lens: bool = False) -> CameraSpec:
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ValueError(f"cameras[{index}] must be a mapping with a 'name'")
    name = str(entry["name"])
    what = f"camera {name!r}"
    missing = [k for k in ("width", "height", "K") if k not in entry]
    if missing:
        raise ValueError(f"{what}: missing fields {missing}")
    if key in entry:
        T = _matrix(entry[key], (4, 4), f"{what} {key}")
    elif "translation" in entry and "rotation_xyzw" in entry:
        quat = _matrix(entry["rotation_xyzw"], (1, 4), f"{what} rotation_xyzw")[0]
        if abs(np.linalg.norm(quat) - 1.0) > 1e-3:
            raise ValueError(f"{what} rotation_xyzw: not a unit quaternion {quat.tolist()}")
        trans = _matrix(entry["translation"], (1, 3), f"{what} translation")[0]
        T = make_pose(quat_xyzw_to_matrix(quat), trans)
    else:
        raise ValueError(f"{what}: needs {key} or translation + rotation_xyzw")
    try:
        width, height = int(entry["width"]), int(entry["height"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: width and height must be integers ({exc})") from None
    frame_id = entry.get("frame_id")
    model, coefficients = _distortion_from_dict(entry, what, lens)
    return CameraSpec(name=name, K=_matrix(entry["K"], (3, 3), f"{what} K"), width=width,
                      height=height, T_body_cam=T,
                      frame_id=None if frame_id is None else str(frame_id),
                      distortion_model=model, distortion_coefficients=coefficients)


def load_rig(path: str | Path, calibration: bool = False) -> Rig:
    """Read and validate a rig file: the dataset's ``rig.yaml``, or with ``calibration`` a ROS
    calibration file. Errors name the file and the camera."""
    import yaml

    path = Path(path)
    if not path.is_file():
        kind = "calibration" if calibration else "rig"
        raise ValueError(f"{path}: missing ({kind} file {str(path)!r} does not exist)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    return Rig.from_dict(data, where=str(path), calibration=calibration)


def save_rig(rig: Rig, path: str | Path, calibration: bool = False) -> None:
    """Write ``rig`` in the layout :func:`load_rig` reads (a calibration is validated first)."""
    import yaml

    if calibration:
        rig.validate(CALIBRATION_ROTATION_ATOL)
    Path(path).write_text(yaml.safe_dump(rig.to_dict(calibration), sort_keys=False))


def pinhole_K(width: int, height: int, hfov_deg: float) -> np.ndarray:
    """Square-pixel ``K [3,3]`` with the principal point at the image centre for ``hfov_deg``."""
    if not 0.0 < hfov_deg < 180.0:
        raise ValueError(f"hfov_deg must be in (0, 180), got {hfov_deg}")
    f = 0.5 * width / np.tan(np.radians(hfov_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


# Camera looking along body +x (REP-103 body: x forward, y left, z up; OpenCV camera: x right,
# y down, z forward): columns are the camera axes expressed in the body frame.
R_BODY_CAM_FORWARD = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
