"""Convert a TUM RGB-D style image sequence into the dataset format (one camera, no depth).

Expected input (the layout of the TUM RGB-D benchmark; only what is needed)::

    <src>/rgb.txt                    "t filename" per line ('#' lines are comments): each colour
                                     image, its path relative to <src>, any image format
                                     OpenCV reads; when absent, every image in <src>/rgb/
                                     named by its time stamp, <sec.fraction>.<ext> (png, jpg,
                                     jpeg, bmp, tif, tiff, ppm, pgm, webp), is taken
    <src>/groundtruth.txt            "t tx ty tz qx qy qz qw" per line, '#' lines are comments:
                                     world_T_cam of the colour camera's optical centre, camera
                                     axes OpenCV (x right, y down, z forward), metres

World frame: the dataset format wants a z-up world (gravity along -z). ``world_up="z-up"``
(the default) takes the ground truth's world as it is; ``world_up="y-down"`` is for a world
whose y axis points down (a world in camera axes, e.g. the first camera pose of a visual
SLAM system: x right, y down, z forward) and rotates it by :data:`Y_DOWN_TO_Z_UP` (new x = old
z, new y = -old x, new z = -old y: the same axis change as :data:`T_BODY_OPTICAL`), so
gravity, along +y before, is along -z.

The ground truth is interpolated at every image stamp (linear translation, slerp); images
outside the ground truth, or between ground-truth samples further apart than ``max_gap_ns``, are
dropped. The camera is written as ``cam0`` with the fixed optical-to-REP-103 ``T_body_cam``
(body x = camera z, body y = -camera x, body z = -camera y), so ``world_T_cam`` of the reader
is the ground truth itself. Images with lens distortion are undistorted to the same K.

Intrinsics: ``camera`` names one of the TUM RGB-D calibrations (:data:`TUM_CAMERAS`, the values
published with the benchmark: ``fr1`` / ``fr2`` with their distortion, ``fr3`` is distortion
free) or give ``intrinsics=(fx, fy, cx, cy)`` and optionally ``dist``.

Nothing under ``src`` is written to.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import cv2
import numpy as np

from g2g_model.data.convert_zjh import read_tum, stamp_from_name
from g2g_model.data.format import TrajectoryWriter
from g2g_model.data.pose_interp import interpolate_poses
from g2g_model.data.rig import CameraSpec, Rig
from g2g_model.geometry import invert_pose

LOG = logging.getLogger(__name__)

# fx, fy, cx, cy, (d0..d4 OpenCV k1 k2 p1 p2 k3) of the colour cameras of the TUM RGB-D benchmark.
TUM_CAMERAS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "fr1": ((517.3, 516.5, 318.6, 255.3), (0.2624, -0.9531, -0.0054, 0.0026, 1.1633)),
    "fr2": ((520.9, 521.0, 325.1, 249.7), (0.2312, -0.7849, -0.0033, -0.0001, 0.9172)),
    "fr3": ((535.4, 539.2, 320.1, 247.6), (0.0, 0.0, 0.0, 0.0, 0.0)),
}

# Camera (OpenCV optical axes) -> REP-103 body: body x = cam z, body y = -cam x, body z = -cam y.
T_BODY_OPTICAL = np.array([[0.0, 0.0, 1.0, 0.0],
                           [-1.0, 0.0, 0.0, 0.0],
                           [0.0, -1.0, 0.0, 0.0],
                           [0.0, 0.0, 0.0, 1.0]])

CAMERA_NAME = "cam0"
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".ppm", ".pgm", ".webp")
# A y-down world (camera axes) -> z-up: new x = old z, new y = -old x, new z = -old y.
Y_DOWN_TO_Z_UP = T_BODY_OPTICAL.copy()
WORLD_UP = {"z-up": np.eye(4), "y-down": Y_DOWN_TO_Z_UP}


def _intrinsics(camera: str | None, intrinsics: Sequence[float] | None,
                dist: Sequence[float] | None) -> tuple[np.ndarray, np.ndarray]:
    if (camera is None) == (intrinsics is None):
        raise ValueError("give exactly one of camera (a TUM preset) and intrinsics (fx fy cx cy)")
    if camera is not None:
        if camera not in TUM_CAMERAS:
            raise ValueError(f"unknown TUM camera {camera!r}; known: {sorted(TUM_CAMERAS)}")
        intrinsics, preset_dist = TUM_CAMERAS[camera]
        dist = preset_dist if dist is None else dist
    values = np.asarray(intrinsics, dtype=np.float64)
    if values.shape != (4,) or not np.all(np.isfinite(values)) or values[0] <= 0 or values[1] <= 0:
        raise ValueError(f"intrinsics must be 4 finite numbers fx fy cx cy, fx fy > 0: {values}")
    fx, fy, cx, cy = values
    d = np.zeros(5) if dist is None else np.asarray(dist, dtype=np.float64)
    if d.ndim != 1 or len(d) not in (4, 5, 8) or not np.all(np.isfinite(d)):
        raise ValueError(f"dist must be 4, 5 or 8 finite OpenCV coefficients, got {d}")
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]]), d


def _sorted_images(items: list, where: Path) -> tuple[np.ndarray, list[Path]]:
    items.sort()
    stamps = np.array([t for t, _ in items], np.int64)
    if np.any(np.diff(stamps) <= 0):
        raise ValueError(f"{where}: two images with the same time stamp")
    return stamps, [f for _, f in items]


def list_images(folder: Path) -> tuple[np.ndarray, list[Path]]:
    """``(stamps_ns [N], paths)`` of the ``<sec.fraction>.<ext>`` images in ``folder`` (any of
    :data:`IMAGE_EXTENSIONS`), by time."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: missing image folder")
    items = []
    for f in folder.iterdir():
        if f.suffix.lower() not in IMAGE_EXTENSIONS:
            continue
        try:
            items.append((stamp_from_name(f.stem), f))
        except ValueError as exc:
            raise ValueError(f"{f}: {exc}") from exc
    if not items:
        raise ValueError(f"{folder}: no images ({', '.join(IMAGE_EXTENSIONS)})")
    return _sorted_images(items, folder)


def read_image_list(path: Path) -> tuple[np.ndarray, list[Path]]:
    """TUM's ``rgb.txt`` (``"t filename"`` per line, '#' lines are comments, paths relative to
    its folder) -> ``(stamps_ns [N], paths)``, by time; a listed file must exist."""
    items = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) < 2:
            raise ValueError(f"{path}:{lineno}: expected 'timestamp filename', got {line!r}")
        try:
            stamp = stamp_from_name(fields[0])
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from exc
        image = path.parent / fields[1]
        if not image.is_file():
            raise ValueError(f"{path}:{lineno}: {image} does not exist")
        items.append((stamp, image))
    if not items:
        raise ValueError(f"{path}: lists no images")
    return _sorted_images(items, path)


def source_images(src: Path) -> tuple[np.ndarray, list[Path]]:
    """The colour images of a TUM-layout folder: ``rgb.txt`` when present, else ``rgb/``."""
    listing = src / "rgb.txt"
    return read_image_list(listing) if listing.is_file() else list_images(src / "rgb")


def convert_tum(src: str | Path, out: str | Path, camera: str | None = "fr3",
                intrinsics: Sequence[float] | None = None, dist: Sequence[float] | None = None,
                max_gap_ns: int = 50_000_000, stride: int = 1, max_frames: int | None = None,
                meta: Mapping[str, Any] | None = None, overwrite: bool = False,
                on_frame: Callable[[int, int], None] | None = None,
                world_up: str = "z-up") -> Path:
    """Convert the TUM-layout folder ``src`` into trajectory directory ``out``.

    Args:
        src: folder with ``rgb.txt`` or ``rgb/``, and ``groundtruth.txt`` (read only).
        out: trajectory directory to write.
        camera: TUM calibration preset (``fr1``, ``fr2``, ``fr3``), or None with ``intrinsics``.
        intrinsics: ``(fx, fy, cx, cy)`` in pixels of the images as stored.
        dist: OpenCV distortion coefficients (default: the preset's, else none).
        max_gap_ns: drop images whose bracketing ground-truth samples are further apart.
        stride, max_frames: keep every ``stride``-th usable image, at most ``max_frames``.
        meta: provenance fields for meta.json (source repository, commit, paths, licence).
        world_up: ``"z-up"`` (the ground truth's world as it is) or ``"y-down"`` (rotated by
            :data:`Y_DOWN_TO_Z_UP`; module docstring).

    Returns the trajectory directory. Raises ``ValueError`` naming the file on bad input.
    """
    src, out = Path(src), Path(out)
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if world_up not in WORLD_UP:
        raise ValueError(f"world_up must be one of {sorted(WORLD_UP)}, got {world_up!r}")
    K, d = _intrinsics(camera, intrinsics, dist)
    gt_stamps, gt_poses = read_tum(src / "groundtruth.txt")
    gt_poses = WORLD_UP[world_up] @ gt_poses
    stamps, paths = source_images(src)
    poses, valid = interpolate_poses(gt_stamps, gt_poses, stamps, max_gap_ns=max_gap_ns)
    keep = np.flatnonzero(valid)[::stride]
    if max_frames is not None:
        keep = keep[:max_frames]
    dropped = len(stamps) - int(valid.sum())
    if not len(keep):
        raise ValueError(f"{src}: no image lies inside the ground truth ({len(stamps)} images, "
                         f"ground truth {gt_stamps[0]}..{gt_stamps[-1]} ns)")
    first = cv2.imread(str(paths[keep[0]]), cv2.IMREAD_COLOR)
    if first is None:
        raise ValueError(f"{paths[keep[0]]}: unreadable image")
    h, w = first.shape[:2]
    rig = Rig([CameraSpec(name=CAMERA_NAME, K=K, width=w, height=h, T_body_cam=T_BODY_OPTICAL)])
    body_T_cam_inv = invert_pose(T_BODY_OPTICAL)
    info = {"source": "tum-rgbd", "camera_preset": camera, "images_in_source": len(stamps),
            "images_outside_ground_truth": dropped, "stride": stride, "world_up": world_up}
    info.update(dict(meta or {}))
    undistort = bool(np.any(d != 0))
    with TrajectoryWriter(out, rig, with_depth=False, overwrite=overwrite, meta=info) as writer:
        for n, k in enumerate(keep):
            img = cv2.imread(str(paths[k]), cv2.IMREAD_COLOR)
            if img is None or img.shape[:2] != (h, w):
                raise ValueError(f"{paths[k]}: unreadable or not {w}x{h} like the first image")
            if undistort:
                img = cv2.undistort(img, K, d, None, K)
            world_T_body = poses[k] @ body_T_cam_inv
            writer.add_frame(int(stamps[k]), world_T_body,
                             {CAMERA_NAME: np.ascontiguousarray(img[..., ::-1])})
            if on_frame is not None:
                on_frame(n, len(keep))
    LOG.info("TUM %s: %d frames (%d outside the ground truth)", src, len(keep), dropped)
    return out
