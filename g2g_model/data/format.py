"""The on-disk trajectory format: writer and validating reader.

docs/DATASET_FORMAT.md is the single description of the layout; in short, one directory per
trajectory::

    <traj>/meta.json                    format, version, counts, ``"complete": true`` (last)
    <traj>/rig.yaml                     cameras: name, width, height, K 3x3, T_body_cam 4x4
    <traj>/poses.csv                    timestamp_ns,x,y,z,qx,qy,qz,qw (world_T_body per frame)
    <traj>/images/<cam>/<index:06d>.png RGB uint8, index = row of poses.csv (0-based)
    <traj>/depth/<cam>/<index:06d>.png  optional, uint16 millimetres, 0 = no measurement

Atomicity: :class:`TrajectoryWriter` writes into a hidden sibling directory
``.<name>.partial`` and renames it into place only after ``meta.json`` (with ``complete: true``)
has been written there, so an interrupted run never leaves a directory that looks complete.
:func:`is_complete` is what resumable tools check before skipping a trajectory.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

import cv2
import numpy as np

from g2g_model.data.rig import Rig, load_rig, save_rig
from g2g_model.geometry import make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix

LOG = logging.getLogger(__name__)

FORMAT_NAME = "g2g-trajectory"
FORMAT_VERSION = 1
POSES_HEADER = "timestamp_ns,x,y,z,qx,qy,qz,qw"
DEPTH_SCALE = 1000.0  # stored depth units per metre (uint16 millimetres)
MAX_DEPTH_M = 65.535
META_FILE, RIG_FILE, POSES_FILE = "meta.json", "rig.yaml", "poses.csv"


def frame_file(index: int) -> str:
    """File name of frame ``index`` inside ``images/<cam>/`` and ``depth/<cam>/``."""
    return f"{index:06d}.png"


def partial_dir(path: Path) -> Path:
    """Hidden sibling where a trajectory is written before it is renamed into place."""
    path = Path(path)
    return path.parent / f".{path.name}.partial"


def is_complete(path: str | os.PathLike) -> bool:
    """True when ``path/meta.json`` exists and says ``complete: true``."""
    meta = Path(path) / META_FILE
    try:
        return bool(json.loads(meta.read_text()).get("complete", False))
    except (OSError, ValueError, AttributeError):
        return False


def depth_to_mm(depth_m: np.ndarray, where: str) -> np.ndarray:
    """Metric depth ``[H,W]`` float -> uint16 mm; <= 0, inf or > 65.535 m become 0 (invalid)."""
    depth_m = np.asarray(depth_m, dtype=np.float64)
    if np.isnan(depth_m).any():
        raise ValueError(f"{where}: depth contains NaN ({int(np.isnan(depth_m).sum())} pixels)")
    valid = np.isfinite(depth_m) & (depth_m > 0) & (depth_m * DEPTH_SCALE < 65535.5)
    out = np.zeros(depth_m.shape, dtype=np.uint16)
    out[valid] = np.round(depth_m[valid] * DEPTH_SCALE).astype(np.uint16)
    return out


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class TrajectoryWriter:
    """Stream frames of one rig trajectory to disk; finalise atomically.

    Use as a context manager: on normal exit the trajectory is finalised (meta.json last, then
    renamed into place); on an exception the partial directory is removed.

    Args:
        path: final trajectory directory.
        rig: the cameras; every frame must provide an image for each of them.
        with_depth: whether every frame provides depth for every camera.
        overwrite: replace an existing complete trajectory at ``path``.
        meta: extra JSON-serialisable fields for meta.json (source, seeds, ...).
    """

    def __init__(self, path: str | os.PathLike, rig: Rig, with_depth: bool = False,
                 overwrite: bool = False, meta: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        rig.check_folder_names(str(self.path))
        self.rig = rig
        self.with_depth = with_depth
        self.overwrite = overwrite
        self.meta = dict(meta or {})
        if self.path.exists() and not overwrite:
            raise ValueError(f"{self.path}: already exists (pass overwrite=True to replace it)")
        self.tmp = partial_dir(self.path)
        if self.tmp.exists():
            LOG.info("removing stale partial trajectory %s", self.tmp)
            shutil.rmtree(self.tmp)
        for cam in rig.names:
            (self.tmp / "images" / cam).mkdir(parents=True)
            if with_depth:
                (self.tmp / "depth" / cam).mkdir(parents=True)
        self._rows: list[str] = []
        self._last_stamp: int | None = None
        self._closed = False
        # PNG encoding releases the GIL: encode in background threads while the caller renders.
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._pending: list[Future] = []

    def _write(self, path: Path, image: np.ndarray) -> None:
        if not cv2.imwrite(str(path), image, [cv2.IMWRITE_PNG_COMPRESSION, 1]):
            raise ValueError(f"{path}: could not be written")

    def _drain(self, limit: int) -> None:
        """Wait until at most ``limit`` writes are pending; re-raise the first failure."""
        while len(self._pending) > limit:
            self._pending.pop(0).result()

    @property
    def num_frames(self) -> int:
        return len(self._rows)

    def add_frame(self, timestamp_ns: int, world_T_body: np.ndarray,
                  images: Mapping[str, np.ndarray],
                  depths: Mapping[str, np.ndarray] | None = None) -> int:
        """Append one frame and return its index.

        Args:
            timestamp_ns: integer nanoseconds, strictly increasing.
            world_T_body: ``[4,4]`` rigid body pose.
            images: camera name -> RGB uint8 ``[H,W,3]`` of the camera's size.
            depths: camera name -> metric depth ``[H,W]`` (required iff ``with_depth``).
        """
        if self._closed:
            raise ValueError(f"{self.path}: writer already closed")
        index = len(self._rows)
        where = f"{self.path} frame {index}"
        stamp = int(timestamp_ns)
        if self._last_stamp is not None and stamp <= self._last_stamp:
            raise ValueError(f"{where}: timestamp_ns {stamp} not after {self._last_stamp}")
        pose = np.asarray(world_T_body, dtype=np.float64)
        if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
            raise ValueError(f"{where}: world_T_body must be a finite 4x4, got {pose}")
        if set(images) != set(self.rig.names):
            raise ValueError(f"{where}: images for {sorted(images)}, rig has {self.rig.names}")
        if self.with_depth and (depths is None or set(depths) != set(self.rig.names)):
            raise ValueError(f"{where}: depth required for every camera {self.rig.names}")
        # Check everything before writing anything, so a rejected frame leaves no files.
        encoded = []
        for cam in self.rig.cameras:
            img = np.asarray(images[cam.name])
            if img.dtype != np.uint8 or img.shape != (cam.height, cam.width, 3):
                raise ValueError(f"{where}: image {cam.name!r} must be uint8 "
                                 f"[{cam.height},{cam.width},3], got {img.dtype} {img.shape}")
            name = frame_file(index)
            encoded.append((self.tmp / "images" / cam.name / name,
                            np.ascontiguousarray(img[..., ::-1])))
            if self.with_depth:
                dep = np.asarray(depths[cam.name])
                if dep.shape != (cam.height, cam.width):
                    raise ValueError(f"{where}: depth {cam.name!r} must be "
                                     f"[{cam.height},{cam.width}], got {dep.shape}")
                encoded.append((self.tmp / "depth" / cam.name / name,
                                depth_to_mm(dep, f"{where} depth {cam.name!r}")))
        for path, array in encoded:
            self._pending.append(self._pool.submit(self._write, path, array))
        self._drain(64)
        xyz = pose[:3, 3]
        quat = matrix_to_quat_xyzw(pose[:3, :3])
        self._rows.append(",".join([str(stamp)] + [repr(float(v)) for v in (*xyz, *quat)]))
        self._last_stamp = stamp
        return index

    def close(self) -> Path:
        """Write rig.yaml, poses.csv and finally meta.json, then rename into place."""
        if self._closed:
            return self.path
        if not self._rows:
            self.abort()
            raise ValueError(f"{self.path}: refusing to finalise a trajectory with no frames")
        try:
            self._drain(0)
        except Exception:
            self.abort()
            raise
        self._pool.shutdown()
        save_rig(self.rig, self.tmp / RIG_FILE)
        (self.tmp / POSES_FILE).write_text("\n".join([POSES_HEADER] + self._rows) + "\n")
        meta = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "num_frames": len(self._rows),
            "cameras": self.rig.names,
            "has_depth": self.with_depth,
            **self.meta,
            "complete": True,
        }
        _write_text_atomic(self.tmp / META_FILE, json.dumps(meta, indent=1))
        if self.path.exists():
            shutil.rmtree(self.path)
        os.rename(self.tmp, self.path)
        self._closed = True
        LOG.info("wrote %s (%d frames x %d cameras)", self.path, len(self._rows), len(self.rig))
        return self.path

    def abort(self) -> None:
        """Drop everything written so far."""
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_poses_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Parse poses.csv -> ``(timestamps_ns [T] int64, world_T_body [T,4,4])``.

    Raises ``ValueError`` naming the file and 1-based line for a wrong header, a malformed or
    non-finite row, a degenerate quaternion or a timestamp that does not increase.
    """
    if not path.is_file():
        raise ValueError(f"{path}: missing")
    lines = path.read_text().splitlines()
    if not lines or lines[0].strip() != POSES_HEADER:
        raise ValueError(f"{path}:1: header must be {POSES_HEADER!r}")
    stamps, values = [], []
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != 8:
            raise ValueError(f"{path}:{lineno}: expected 8 fields, got {len(fields)}")
        try:
            stamp = int(fields[0])
            row = [float(v) for v in fields[1:]]
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        if not all(math.isfinite(v) for v in row):
            raise ValueError(f"{path}:{lineno}: non-finite pose value {row}")
        qnorm = math.sqrt(sum(v * v for v in row[3:]))
        if abs(qnorm - 1.0) > 1e-3:
            raise ValueError(f"{path}:{lineno}: quaternion norm {qnorm:.6f} is not 1")
        if stamps and stamp <= stamps[-1]:
            raise ValueError(f"{path}:{lineno}: timestamp_ns {stamp} is not after {stamps[-1]}")
        stamps.append(stamp)
        values.append(row)
    if not stamps:
        raise ValueError(f"{path}: no pose rows")
    arr = np.array(values)
    return np.array(stamps, dtype=np.int64), make_pose(quat_xyzw_to_matrix(arr[:, 3:]), arr[:, :3])


class TrajectoryReader:
    """Open and validate one trajectory directory.

    Opening checks meta.json (complete, format, version), rig.yaml, poses.csv (every row) and
    that every image (and depth) file exists. Image sizes and dtypes are checked on every load;
    :meth:`validate_files` loads all of them once.

    Attributes:
        rig: :class:`Rig`.
        timestamps_ns: ``[T]`` int64.
        world_T_body: ``[T,4,4]``.
        has_depth: whether depth/<cam>/ exists for every frame.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise ValueError(f"{self.path}: not a directory")
        meta_path = self.path / META_FILE
        if not meta_path.is_file():
            raise ValueError(f"{meta_path}: missing (trajectory incomplete or not one)")
        try:
            self.meta = json.loads(meta_path.read_text())
        except ValueError as exc:
            raise ValueError(f"{meta_path}: not valid JSON: {exc}") from exc
        if not isinstance(self.meta, dict) or self.meta.get("complete") is not True:
            raise ValueError(f"{meta_path}: 'complete' is not true (partially written dataset)")
        if self.meta.get("format") != FORMAT_NAME or self.meta.get("version") != FORMAT_VERSION:
            raise ValueError(f"{meta_path}: format {self.meta.get('format')!r} version "
                             f"{self.meta.get('version')!r}, expected {FORMAT_NAME!r} "
                             f"{FORMAT_VERSION}")
        self.rig = load_rig(self.path / RIG_FILE)
        self.timestamps_ns, self.world_T_body = read_poses_csv(self.path / POSES_FILE)
        if self.meta.get("num_frames") != len(self.timestamps_ns):
            raise ValueError(f"{meta_path}: num_frames {self.meta.get('num_frames')} but "
                             f"{POSES_FILE} has {len(self.timestamps_ns)} rows")
        self.has_depth = bool(self.meta.get("has_depth", False))
        kinds = ["images"] + (["depth"] if self.has_depth else [])
        for kind in kinds:
            for cam in self.rig.names:
                folder = self.path / kind / cam
                present = set(os.listdir(folder)) if folder.is_dir() else set()
                for i in range(self.num_frames):
                    if frame_file(i) not in present:
                        raise ValueError(f"{folder / frame_file(i)}: missing (frame {i}, "
                                         f"{POSES_FILE} line {i + 2})")

    @property
    def num_frames(self) -> int:
        return len(self.timestamps_ns)

    @property
    def cameras(self) -> list[str]:
        return self.rig.names

    def world_T_cam(self, cam: str) -> np.ndarray:
        """``[T,4,4]`` camera-to-world poses of camera ``cam``."""
        return self.world_T_body @ self.rig[cam].T_body_cam

    def rig_group(self, frames: Sequence[int]):
        """Every camera of the rig at the frame indices ``frames`` as one
        :class:`~g2g_model.estimation.groups.Group` (camera-major; world poses)."""
        from g2g_model.estimation.groups import Group

        images, ks, poses = [], [], []
        for cam in self.cameras:
            world_T_cam = self.world_T_cam(cam)
            for i in frames:
                images.append(self.image(cam, i))
                ks.append(self.rig[cam].K)
                poses.append(world_T_cam[i])
        return Group(images=images, intrinsics=np.stack(ks), cam_to_world=np.stack(poses))

    def image_path(self, cam: str, index: int) -> Path:
        return self.path / "images" / cam / frame_file(index)

    def depth_path(self, cam: str, index: int) -> Path:
        return self.path / "depth" / cam / frame_file(index)

    def image(self, cam: str, index: int) -> np.ndarray:
        """RGB uint8 ``[H,W,3]``; ``ValueError`` naming the file if unreadable or mis-sized."""
        spec = self.rig[cam]
        path = self.image_path(cam, index)
        img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        if img is None:
            raise ValueError(f"{path}: unreadable image")
        if img.dtype != np.uint8 or img.shape != (spec.height, spec.width, 3):
            raise ValueError(f"{path}: expected uint8 [{spec.height},{spec.width},3] for camera "
                             f"{cam!r}, got {img.dtype} {img.shape}")
        return np.ascontiguousarray(img[..., ::-1])

    def depth(self, cam: str, index: int) -> np.ndarray:
        """Metric depth float32 ``[H,W]`` in metres, 0 where there is no measurement."""
        if not self.has_depth:
            raise ValueError(f"{self.path}: trajectory has no depth")
        spec = self.rig[cam]
        path = self.depth_path(cam, index)
        dep = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        if dep is None:
            raise ValueError(f"{path}: unreadable depth image")
        if dep.dtype != np.uint16 or dep.shape != (spec.height, spec.width):
            raise ValueError(f"{path}: expected uint16 [{spec.height},{spec.width}] depth for "
                             f"camera {cam!r}, got {dep.dtype} {dep.shape}")
        return dep.astype(np.float32) / np.float32(DEPTH_SCALE)

    def validate_files(self) -> None:
        """Load every image (and depth) once to check readability, size and dtype."""
        for cam in self.rig.names:
            for i in range(self.num_frames):
                self.image(cam, i)
                if self.has_depth:
                    self.depth(cam, i)


def find_trajectories(root: str | os.PathLike) -> list[Path]:
    """Complete trajectory directories at or below ``root``, sorted (partial and hidden ones
    skipped), following directory links (collections of links to scenes) to each real one once."""
    root = Path(root)
    if is_complete(root):
        return [root]
    found, seen = [], set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        again = real in seen   # reached again (a link loop, two links): not walked twice
        seen.add(real)
        dirnames[:] = [] if again else sorted(d for d in dirnames if not d.startswith("."))
        if not again and META_FILE in filenames and is_complete(Path(dirpath)):
            found.append(Path(dirpath))
    return sorted(found)
