"""Convert one NCLT recording (one date, raw Ladybug3 layout) into the dataset format.

Expected input (the layout of the NCLT downloads, unpacked under one root)::

    <root>/<date>/lb3/Cam{0..5}/<utime>.tiff      1616x1232 raw images (utime in microseconds)
    <root>/cam_params/K_cam{n}.csv                3x3 pinhole matrix of the undistorted image
    <root>/cam_params/x_lb3_c{n}.csv              x,y,z,roll,pitch,yaw (m, deg): camera in LB3
    <root>/cam_params/U2D_Cam{n}_1616X1232.txt    undistortion map (header with width, height;
                                                  then lines "row col src_row src_col")
    <root>/groundtruth_<date>.csv                 utime,x,y,z,roll,pitch,yaw (us, m, rad)

Conventions handled here (the NCLT development kit's, :mod:`g2g_model.data.nclt_calibration`):
6-vectors map to ``[R | t]`` with ``R = Rz(yaw) Ry(pitch) Rx(roll)``; the body <- LB3 offset is
the published ``x_body_lb3``; ground truth rows with NaN are dropped. Calibration (K, x_lb3_c)
describes the undistorted, *unrotated* image; the cameras are mounted sideways, so after
undistortion each image is rotated 90 deg clockwise and K and T_body_cam are rotated with it.
NCLT's body and world frames have z down; both are flipped about x into REP-103 (x forward,
y left, z up), which changes no relative camera geometry. Cam0 looks at the sky and is left out
by default; Cam5 faces forward. Each camera's calibration files are compared with NCLT's
published values and every difference is logged as a warning. Images are optionally scaled
(K follows).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Callable, Sequence

import cv2
import numpy as np

from g2g_model.data.format import TrajectoryWriter
from g2g_model.data.nclt_calibration import (
    IMAGE_WH, RING_CAMERAS, X_BODY_LB3, calibration_differences, ssc_to_pose,
)
from g2g_model.data.pose_interp import interpolate_poses
from g2g_model.data.rig import CameraSpec, Rig
from g2g_model.geometry import make_pose

LOG = logging.getLogger(__name__)

DEFAULT_CAMERAS = RING_CAMERAS
# z-down (x forward, y right) <-> REP-103 (x forward, y left, z up): a rotation of pi about x.
FLIP = np.diag([1.0, -1.0, -1.0, 1.0])
# Camera axes after rotating the image 90 deg clockwise, expressed in the unrotated camera frame:
# new x = -old y, new y = old x, z unchanged.
R_OLD_NEW = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def _read_numbers(path: Path, count: int | None = None) -> np.ndarray:
    if not path.is_file():
        raise ValueError(f"{path}: missing")
    text = path.read_text().replace(",", " ").split()
    try:
        values = np.array([float(v) for v in text])
    except ValueError as exc:
        raise ValueError(f"{path}: not numeric: {exc}") from exc
    if count is not None and len(values) != count:
        raise ValueError(f"{path}: expected {count} numbers, got {len(values)}")
    return values


def read_u2d(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Undistortion maps ``(map_x, map_y)`` ``[H,W]`` float32 for ``cv2.remap``."""
    if not path.is_file():
        raise ValueError(f"{path}: missing")
    with open(path) as fh:
        header = fh.readline()
        dims = [int(v) for v in re.findall(r"\d+", header)]
        if len(dims) < 2:
            raise ValueError(f"{path}:1: header must give width and height, got {header!r}")
        width, height = dims[0], dims[1]
        data = np.loadtxt(fh, dtype=np.float64, ndmin=2)
    if data.shape != (width * height, 4):
        raise ValueError(f"{path}: expected {width * height} rows of 4 numbers, got {data.shape}")
    rows, cols = data[:, 0].astype(np.int64), data[:, 1].astype(np.int64)
    if rows.min() < 0 or rows.max() >= height or cols.min() < 0 or cols.max() >= width:
        raise ValueError(f"{path}: pixel index outside {width}x{height}")
    map_x = np.zeros((height, width), np.float32)
    map_y = np.zeros((height, width), np.float32)
    map_y[rows, cols] = data[:, 2]
    map_x[rows, cols] = data[:, 3]
    return map_x, map_y


def read_groundtruth(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(utime_ns [N], world_T_body [N,4,4])`` in NCLT's z-down frames; NaN rows dropped."""
    if not path.is_file():
        raise ValueError(f"{path}: missing")
    stamps, poses = [], []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        fields = line.strip().split(",")
        if not line.strip():
            continue
        if len(fields) != 7:
            raise ValueError(f"{path}:{lineno}: expected 7 fields, got {len(fields)}")
        try:
            values = [float(v) for v in fields]
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        if not np.all(np.isfinite(values)):
            continue
        stamp = int(fields[0]) * 1000
        if stamps and stamp <= stamps[-1]:
            raise ValueError(f"{path}:{lineno}: utime {fields[0]} is not after the previous row")
        stamps.append(stamp)
        poses.append(ssc_to_pose(values[1:], degrees=False))
    if len(stamps) < 2:
        raise ValueError(f"{path}: fewer than two valid ground-truth rows")
    return np.array(stamps, np.int64), np.stack(poses)


def camera_spec(cam: int, K: np.ndarray, lb3_T_cam: np.ndarray, image_wh: tuple[int, int],
                scale: float) -> CameraSpec:
    """Camera ``cam{n}`` upright (its image rotated 90 deg clockwise) and scaled, in the
    REP-103 body frame, from K of the stored ``image_wh`` image and its pose in the LB3."""
    w, h = image_wh
    # Rotate 90 deg clockwise: u' = h - 1 - v, v' = u.
    K_rot = np.array([[K[1, 1], 0.0, h - 1 - K[1, 2]], [0.0, K[0, 0], K[0, 2]], [0, 0, 1.0]])
    new_w, new_h = int(round(h * scale)), int(round(w * scale))
    sx, sy = new_w / h, new_h / w
    K_out = np.array([[K_rot[0, 0] * sx, 0.0, (K_rot[0, 2] + 0.5) * sx - 0.5],
                      [0.0, K_rot[1, 1] * sy, (K_rot[1, 2] + 0.5) * sy - 0.5], [0, 0, 1.0]])
    body_T_cam = ssc_to_pose(X_BODY_LB3, degrees=True) @ lb3_T_cam
    body_T_cam = FLIP @ body_T_cam @ make_pose(R_OLD_NEW, np.zeros(3))
    return CameraSpec(name=f"cam{cam}", K=K_out, width=new_w, height=new_h,
                      T_body_cam=body_T_cam)


def camera_model(cam_params: Path, cam: int, image_wh: tuple[int, int],
                 scale: float) -> tuple[CameraSpec, tuple[np.ndarray, np.ndarray]]:
    """Rotated, scaled camera ``cam{n}`` (REP-103 body) and its undistortion maps; a warning
    for each way its files depart from NCLT's published calibration."""
    K = _read_numbers(cam_params / f"K_cam{cam}.csv", 9).reshape(3, 3)
    lb3_T_cam = ssc_to_pose(_read_numbers(cam_params / f"x_lb3_c{cam}.csv", 6), degrees=True)
    maps = read_u2d(cam_params / f"U2D_Cam{cam}_{IMAGE_WH[0]}X{IMAGE_WH[1]}.txt")
    w, h = image_wh
    if maps[0].shape != (h, w):
        raise ValueError(f"U2D_Cam{cam}: map is {maps[0].shape[::-1]}, images are {w}x{h}")
    for difference in calibration_differences(cam, K, lb3_T_cam, image_wh):
        LOG.warning("%s: %s", cam_params, difference)
    return camera_spec(cam, K, lb3_T_cam, image_wh, scale), maps


def _utimes(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        raise ValueError(f"{folder}: missing camera folder")
    out = {}
    for f in folder.iterdir():
        if f.suffix.lower() in (".tiff", ".tif") and f.stem.isdigit():
            out[int(f.stem)] = f
    return out


def convert_nclt(root: str | Path, date: str, out: str | Path,
                 cameras: Sequence[int] = DEFAULT_CAMERAS, scale: float = 0.25,
                 stride: int = 1, max_frames: int | None = None, overwrite: bool = False,
                 on_frame: Callable[[int, int], None] | None = None) -> Path:
    """Convert the recording of ``date`` under ``root`` into trajectory directory ``out``."""
    root, out = Path(root), Path(out)
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    lb3 = root / date / "lb3"
    files = {c: _utimes(lb3 / f"Cam{c}") for c in cameras}
    common = sorted(set.intersection(*[set(f) for f in files.values()]))
    if not common:
        raise ValueError(f"{lb3}: no timestamp present for all cameras {list(cameras)}")
    gt_stamps, gt_poses = read_groundtruth(root / f"groundtruth_{date}.csv")
    query = np.array(common, np.int64) * 1000
    poses, valid = interpolate_poses(gt_stamps, gt_poses, query, max_gap_ns=500_000_000)
    keep = np.flatnonzero(valid)[::stride]
    if max_frames is not None:
        keep = keep[:max_frames]
    if not len(keep):
        raise ValueError(f"{date}: no image time inside the ground truth")
    first = cv2.imread(str(files[cameras[0]][common[keep[0]]]), cv2.IMREAD_COLOR)
    if first is None:
        raise ValueError(f"{files[cameras[0]][common[keep[0]]]}: unreadable image")
    wh = (first.shape[1], first.shape[0])
    specs, maps = [], {}
    for c in cameras:
        spec, m = camera_model(root / "cam_params", c, wh, scale)
        specs.append(spec)
        maps[spec.name] = m
    rig = Rig(specs)
    LOG.info("NCLT %s: %d frames x %d cameras", date, len(keep), len(rig))
    meta = {"source": "nclt", "date": date, "cameras": [s.name for s in specs], "scale": scale}
    with TrajectoryWriter(out, rig, with_depth=False, overwrite=overwrite, meta=meta) as writer:
        for n, k in enumerate(keep):
            images = {}
            for c, spec in zip(cameras, specs):
                path = files[c][common[k]]
                raw = cv2.imread(str(path), cv2.IMREAD_COLOR)
                if raw is None or (raw.shape[1], raw.shape[0]) != wh:
                    raise ValueError(f"{path}: unreadable or not {wh[0]}x{wh[1]}")
                und = cv2.remap(raw, *maps[spec.name], cv2.INTER_LINEAR)
                rot = cv2.rotate(und, cv2.ROTATE_90_CLOCKWISE)
                if (rot.shape[1], rot.shape[0]) != (spec.width, spec.height):
                    rot = cv2.resize(rot, (spec.width, spec.height), interpolation=cv2.INTER_AREA)
                images[spec.name] = np.ascontiguousarray(rot[..., ::-1])
            writer.add_frame(int(query[k]), FLIP @ poses[k] @ FLIP, images)
            if on_frame is not None:
                on_frame(n, len(keep))
    return out
