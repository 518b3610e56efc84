"""Rig description: the calibrated cameras of one trajectory.

Each camera has a name, a pinhole matrix ``K [3,3]`` (pixel centres at integer coordinates, the
OpenCV convention), an image size and ``T_body_cam [4,4]``: the camera-to-body transform with the
camera in OpenCV axes (x right, y down, z forward) and the body frame chosen by the dataset
(REP-103 x forward, y left, z up for the simulator and the converters). Camera poses in the world
follow as ``world_T_cam = world_T_body @ T_body_cam``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from g2g_model.geometry import is_rotation

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass
class CameraSpec:
    """One camera: ``K [3,3]``, ``width``/``height`` in pixels, ``T_body_cam [4,4]``."""

    name: str
    K: np.ndarray
    width: int
    height: int
    T_body_cam: np.ndarray = field(default_factory=lambda: np.eye(4))

    def __post_init__(self) -> None:
        self.K = np.asarray(self.K, dtype=np.float64)
        self.T_body_cam = np.asarray(self.T_body_cam, dtype=np.float64)
        self.width = int(self.width)
        self.height = int(self.height)
        self.validate()

    def validate(self, where: str = "rig") -> None:
        """Raise ``ValueError`` naming the field when the camera is malformed."""
        if not self.name or not set(self.name) <= _NAME_CHARS:
            raise ValueError(f"{where}: camera name {self.name!r} must be non-empty [A-Za-z0-9_-]")
        if self.K.shape != (3, 3) or not np.all(np.isfinite(self.K)):
            raise ValueError(f"{where}: camera {self.name!r} K must be a finite 3x3, got {self.K}")
        if self.K[0, 0] <= 0 or self.K[1, 1] <= 0 or not np.allclose(self.K[2], [0, 0, 1]):
            raise ValueError(f"{where}: camera {self.name!r} K needs fx, fy > 0 and last row "
                             f"[0, 0, 1], got {self.K.tolist()}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"{where}: camera {self.name!r} size {self.width}x{self.height}")
        t = self.T_body_cam
        if t.shape != (4, 4) or not np.all(np.isfinite(t)) or not np.allclose(t[3], [0, 0, 0, 1]):
            raise ValueError(f"{where}: camera {self.name!r} T_body_cam must be a finite 4x4 "
                             f"with last row [0, 0, 0, 1]")
        if not is_rotation(t[:3, :3]):
            raise ValueError(f"{where}: camera {self.name!r} T_body_cam: not a rotation")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "width": self.width,
            "height": self.height,
            "K": self.K.tolist(),
            "T_body_cam": self.T_body_cam.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "rig") -> "CameraSpec":
        missing = [k for k in ("name", "K", "width", "height", "T_body_cam") if k not in data]
        if missing:
            raise ValueError(f"{where}: camera entry {data.get('name', '?')!r} lacks {missing}")
        try:
            return cls(name=str(data["name"]), K=np.array(data["K"], dtype=np.float64),
                       width=data["width"], height=data["height"],
                       T_body_cam=np.array(data["T_body_cam"], dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: camera {data.get('name', '?')!r}: {exc}") from exc


@dataclass
class Rig:
    """An ordered list of :class:`CameraSpec` with unique names."""

    cameras: list[CameraSpec]

    def __post_init__(self) -> None:
        if not self.cameras:
            raise ValueError("rig: needs at least one camera")
        names = [c.name for c in self.cameras]
        if len(set(names)) != len(names):
            raise ValueError(f"rig: camera names must be unique, got {names}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.cameras]

    def __len__(self) -> int:
        return len(self.cameras)

    def __getitem__(self, name: str) -> CameraSpec:
        for cam in self.cameras:
            if cam.name == name:
                return cam
        raise KeyError(f"no camera {name!r} in rig {self.names}")

    def T_body_cams(self) -> np.ndarray:
        """``[N,4,4]`` camera-to-body transforms in rig order."""
        return np.stack([c.T_body_cam for c in self.cameras])

    def intrinsics(self) -> np.ndarray:
        """``[N,3,3]`` pinhole matrices in rig order."""
        return np.stack([c.K for c in self.cameras])

    def to_dict(self) -> dict[str, Any]:
        return {"cameras": [c.to_dict() for c in self.cameras]}

    @classmethod
    def from_dict(cls, data: Any, where: str = "rig") -> "Rig":
        if not isinstance(data, dict) or not isinstance(data.get("cameras"), list):
            raise ValueError(f"{where}: expected a mapping with a 'cameras' list")
        return cls([CameraSpec.from_dict(c, where) for c in data["cameras"]])


def pinhole_K(width: int, height: int, hfov_deg: float) -> np.ndarray:
    """Square-pixel ``K [3,3]`` with the principal point at the image centre for ``hfov_deg``."""
    if not 0.0 < hfov_deg < 180.0:
        raise ValueError(f"hfov_deg must be in (0, 180), got {hfov_deg}")
    f = 0.5 * width / np.tan(np.radians(hfov_deg) / 2.0)
    return np.array([[f, 0.0, (width - 1) / 2.0], [0.0, f, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


# Camera looking along body +x (REP-103 body: x forward, y left, z up; OpenCV camera: x right,
# y down, z forward): columns are the camera axes expressed in the body frame.
R_BODY_CAM_FORWARD = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
