"""Convert a ZJH humanoid trajectory (4-camera rig) into the dataset format.

Expected input::

    <root>/Floor_XX/traj_N/cam_{front_left,front_right,left,right}/<sec.usec>.jpg
    <root>/Floor_XX/traj_N/tum_gt.txt       "t x y z qx qy qz qw" (s, m; world_T_body)
    calibration YAML (``--calib``; by default the first of traj_N/calib.yaml,
    Floor_XX/calib.yaml, <root>/calib.yaml):

        cameras:
          front_left:
            K: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]
            dist: [k1, k2, p1, p2, k3]        # OpenCV radial-tangential, optional
            T_body_cam: 4x4 camera-to-body     # OpenCV camera axes, REP-103 body
          front_right: ...

Images of the four cameras are matched to those of the first camera by nearest timestamp within
``slop_ns``; the frame takes the first camera's stamp and the ground truth is interpolated there
(slerp). Images are undistorted to the same K (OpenCV) and optionally scaled (K follows).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Sequence

import cv2
import numpy as np
import yaml

from g2g_model.data.format import TrajectoryWriter
from g2g_model.data.pose_interp import interpolate_poses
from g2g_model.data.rig import CameraSpec, Rig
from g2g_model.geometry import make_pose, quat_xyzw_to_matrix

LOG = logging.getLogger(__name__)

ZJH_CAMERAS = ("front_left", "front_right", "left", "right")


def stamp_from_name(name: str) -> int:
    """``"<sec>.<fraction>"`` -> integer nanoseconds, exactly (no float rounding)."""
    sec, _, frac = name.partition(".")
    if not sec.isdigit() or (frac and not frac.isdigit()) or len(frac) > 9:
        raise ValueError(f"image name {name!r} is not <sec>.<fraction>")
    return int(sec) * 10**9 + int(frac.ljust(9, "0") or 0)


def read_tum(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """TUM trajectory -> ``(stamps_ns [N], world_T_body [N,4,4])``; '#' lines are comments."""
    if not path.is_file():
        raise ValueError(f"{path}: missing")
    stamps, poses = [], []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 8:
            raise ValueError(f"{path}:{lineno}: expected 8 fields, got {len(fields)}")
        try:
            values = np.array([float(v) for v in fields[1:]])
            stamp = stamp_from_name(fields[0]) if "e" not in fields[0].lower() else int(
                round(float(fields[0]) * 1e9))
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{path}:{lineno}: non-finite pose")
        if abs(np.linalg.norm(values[3:]) - 1.0) > 1e-2:
            raise ValueError(f"{path}:{lineno}: quaternion is not unit norm")
        if stamps and stamp <= stamps[-1]:
            raise ValueError(f"{path}:{lineno}: timestamp not after the previous row")
        stamps.append(stamp)
        poses.append(make_pose(quat_xyzw_to_matrix(values[3:]), values[:3]))
    if len(stamps) < 2:
        raise ValueError(f"{path}: fewer than two poses")
    return np.array(stamps, np.int64), np.stack(poses)


def read_calibration(path: Path, cameras: Sequence[str]) -> dict[str, dict]:
    if not path.is_file():
        raise ValueError(f"{path}: missing calibration file")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("cameras"), dict):
        raise ValueError(f"{path}: expected a 'cameras' mapping")
    out = {}
    for cam in cameras:
        entry = data["cameras"].get(cam)
        if entry is None:
            raise ValueError(f"{path}: no calibration for camera {cam!r}")
        K = np.array(entry.get("K"), dtype=np.float64)
        T = np.array(entry.get("T_body_cam"), dtype=np.float64)
        dist = np.array(entry.get("dist", [0, 0, 0, 0, 0]), dtype=np.float64)
        if K.shape != (3, 3) or T.shape != (4, 4) or dist.ndim != 1 or len(dist) not in (4, 5, 8):
            raise ValueError(f"{path}: camera {cam!r} needs K 3x3, T_body_cam 4x4, dist of 4/5/8")
        out[cam] = {"K": K, "T_body_cam": T, "dist": dist}
    return out


def _stamped_images(folder: Path) -> tuple[np.ndarray, list[Path]]:
    if not folder.is_dir():
        raise ValueError(f"{folder}: missing camera folder")
    items = sorted((stamp_from_name(f.stem), f) for f in folder.iterdir()
                   if f.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if not items:
        raise ValueError(f"{folder}: no images")
    return np.array([s for s, _ in items], np.int64), [f for _, f in items]


def _find_calibration(root: Path, floor: str, traj: str) -> Path:
    for cand in (root / floor / traj / "calib.yaml", root / floor / "calib.yaml",
                 root / "calib.yaml"):
        if cand.is_file():
            return cand
    raise ValueError(f"no calib.yaml in {root / floor / traj}, {root / floor} or {root}")


def convert_zjh(root: str | Path, floor: str, traj: str, out: str | Path,
                calib: str | Path | None = None, cameras: Sequence[str] = ZJH_CAMERAS,
                scale: float = 1.0, slop_ns: int = 10_000_000, stride: int = 1,
                max_frames: int | None = None, overwrite: bool = False,
                on_frame: Callable[[int, int], None] | None = None) -> Path:
    """Convert ``<root>/<floor>/<traj>`` into trajectory directory ``out``."""
    root, out = Path(root), Path(out)
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    base = root / floor / traj
    calib_path = Path(calib) if calib else _find_calibration(root, floor, traj)
    cal = read_calibration(calib_path, cameras)
    gt_stamps, gt_poses = read_tum(base / "tum_gt.txt")
    streams = {c: _stamped_images(base / f"cam_{c}") for c in cameras}
    ref_stamps, _ = streams[cameras[0]]
    matched = {}
    ok = np.ones(len(ref_stamps), bool)
    for c in cameras:
        st, _ = streams[c]
        j = np.clip(np.searchsorted(st, ref_stamps), 1, len(st) - 1) if len(st) > 1 else \
            np.zeros(len(ref_stamps), np.int64)
        if len(st) > 1:
            j = np.where(np.abs(st[j - 1] - ref_stamps) <= np.abs(st[j] - ref_stamps), j - 1, j)
        ok &= np.abs(st[j] - ref_stamps) <= slop_ns
        matched[c] = j
    poses, valid = interpolate_poses(gt_stamps, gt_poses, ref_stamps, max_gap_ns=500_000_000)
    keep = np.flatnonzero(ok & valid)[::stride]
    if max_frames is not None:
        keep = keep[:max_frames]
    if not len(keep):
        raise ValueError(f"{base}: no synchronised frame inside the ground truth")
    specs, undist = [], {}
    for c in cameras:
        first = cv2.imread(str(streams[c][1][matched[c][keep[0]]]), cv2.IMREAD_COLOR)
        if first is None:
            raise ValueError(f"{streams[c][1][matched[c][keep[0]]]}: unreadable image")
        h, w = first.shape[:2]
        K = cal[c]["K"]
        new_w, new_h = int(round(w * scale)), int(round(h * scale))
        sx, sy = new_w / w, new_h / h
        K_out = np.array([[K[0, 0] * sx, 0.0, (K[0, 2] + 0.5) * sx - 0.5],
                          [0.0, K[1, 1] * sy, (K[1, 2] + 0.5) * sy - 0.5], [0, 0, 1.0]])
        specs.append(CameraSpec(name=c, K=K_out, width=new_w, height=new_h,
                                T_body_cam=cal[c]["T_body_cam"]))
        undist[c] = (K, cal[c]["dist"], (w, h))
    rig = Rig(specs)
    meta = {"source": "zjh", "floor": floor, "traj": traj, "scale": scale}
    with TrajectoryWriter(out, rig, with_depth=False, overwrite=overwrite, meta=meta) as writer:
        for n, k in enumerate(keep):
            images = {}
            for c, spec in zip(cameras, specs):
                path = streams[c][1][matched[c][k]]
                img = cv2.imread(str(path), cv2.IMREAD_COLOR)
                K, dist, wh = undist[c]
                if img is None or (img.shape[1], img.shape[0]) != wh:
                    raise ValueError(f"{path}: unreadable or not {wh[0]}x{wh[1]}")
                if np.any(dist != 0):
                    img = cv2.undistort(img, K, dist, None, K)
                if (img.shape[1], img.shape[0]) != (spec.width, spec.height):
                    img = cv2.resize(img, (spec.width, spec.height), interpolation=cv2.INTER_AREA)
                images[c] = np.ascontiguousarray(img[..., ::-1])
            writer.add_frame(int(ref_stamps[k]), poses[k], images)
            if on_frame is not None:
                on_frame(n, len(keep))
    LOG.info("ZJH %s/%s: %d frames", floor, traj, len(keep))
    return out
