"""Maps: versioned, self-describing artefacts that relocalization localizes against.

A map is ONE file (``*.g2gmap``) in the safetensors container:

* metadata ``g2g_map`` (JSON): format version, map id, creation time, source description, the
  rig description, the backbone name and a hash of its configuration, and one record per frame
  (camera name, stamp in ns, world_T_cam 4x4, K 3x3, image size), plus a SHA-256 of every tensor;
* tensors: ``images`` (the PNG/JPEG bytes of all frames concatenated, uint8) with
  ``image_offsets`` (int64, T+1), and optionally ``features`` ([T, P, D], the cached encoder
  tokens of every frame, float16).

Writes are atomic: the file is written next to the target under a temporary name, flushed,
fsync'ed and renamed over the target, so a crash never leaves a file that looks valid but is not.
Loading checks the container, the version, every checksum and (when asked) the backbone, and
raises :class:`MapError` saying which check failed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pathlib
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import cv2
import numpy as np
import torch

from g2g_model.backbones.identity import encoder_mismatch
from g2g_model.tagged_safetensors import (
    SafetensorsReadError, read_safetensors, read_safetensors_metadata, write_tagged,
)

LOG = logging.getLogger(__name__)

MAP_FORMAT_VERSION = 1
MAP_SUFFIX = ".g2gmap"


class MapError(ValueError):
    """A map file is missing, corrupt, truncated or incompatible; the message says which."""


@dataclass
class MapFrame:
    """One keyframe image of the map.

    Attributes:
        camera: camera name in the rig description.
        stamp_ns: acquisition time in nanoseconds.
        world_T_cam: ``[4, 4]`` camera-to-map pose, OpenCV axes, metres.
        intrinsics: ``[3, 3]`` K in pixels of the stored image.
        image: encoded image bytes (PNG or JPEG).
        size_hw: (height, width) of the stored image.
    """

    camera: str
    stamp_ns: int
    world_T_cam: np.ndarray
    intrinsics: np.ndarray
    image: bytes
    size_hw: tuple

    def decode(self) -> np.ndarray:
        """The RGB image as ``uint8 [H, W, 3]``."""
        bgr = cv2.imdecode(np.frombuffer(self.image, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise MapError(f"frame {self.camera}@{self.stamp_ns}: image bytes do not decode")
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def encode_image(rgb: np.ndarray, fmt: str = ".png", quality: int = 95) -> bytes:
    """Encode an RGB ``uint8 [H, W, 3]`` image for storage in a map."""
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if fmt in (".jpg", ".jpeg") else []
    ok, buf = cv2.imencode(fmt, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ValueError(f"could not encode image as {fmt}")
    return buf.tobytes()


@dataclass
class G2GMap:
    """In-memory map. ``features`` is ``[T, P, D]`` aligned with ``frames`` or None."""

    frames: List[MapFrame]
    rig: Dict = field(default_factory=dict)
    backbone: Dict = field(default_factory=dict)  # {"name": ..., "config_hash": ...}
    features: Optional[torch.Tensor] = None
    map_id: str = ""
    source: str = ""
    created_unix: float = 0.0

    def __len__(self) -> int:
        return len(self.frames)

    def cameras(self) -> List[str]:
        return sorted({f.camera for f in self.frames})

    def camera_indices(self, camera: str) -> np.ndarray:
        """Indices of the frames of one camera, in time order."""
        idx = [i for i, f in enumerate(self.frames) if f.camera == camera]
        return np.asarray(sorted(idx, key=lambda i: self.frames[i].stamp_ns), dtype=np.int64)

    def positions(self) -> np.ndarray:
        """``[T, 3]`` camera centres in the map frame."""
        return np.stack([f.world_T_cam[:3, 3] for f in self.frames]) if self.frames else \
            np.zeros((0, 3))


def _sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def map_save_path(path) -> pathlib.Path:
    """The file a map saved to ``path`` goes to (suffix ``.g2gmap`` added if missing).

    Raises ``IsADirectoryError`` when ``path`` or that file is an existing directory (it would
    otherwise become ``<dir>.g2gmap`` beside it, or fail late)."""
    given = pathlib.Path(path)
    path = given
    if path.suffix != MAP_SUFFIX:
        path = path.with_suffix(path.suffix + MAP_SUFFIX) if path.suffix else \
            path.with_suffix(MAP_SUFFIX)
    for p in (given, path):
        if p.is_dir():
            raise IsADirectoryError(f"save path {p} is an existing directory; give a file name, "
                                    f"e.g. {p / ('map' + MAP_SUFFIX)}")
    return path


def save_map(gmap: G2GMap, path) -> pathlib.Path:
    """Write ``gmap`` atomically to :func:`map_save_path` of ``path``. Leftover temporary files
    of a killed save of the same map are removed (see :func:`write_tagged`)."""
    path = map_save_path(path)
    if not gmap.frames:
        raise ValueError("refusing to save an empty map (no keyframes)")
    blobs = [np.frombuffer(f.image, np.uint8) for f in gmap.frames]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)
    tensors = {
        "images": torch.from_numpy(np.concatenate(blobs).copy()),
        "image_offsets": torch.from_numpy(offsets),
    }
    if gmap.features is not None:
        if gmap.features.shape[0] != len(gmap.frames):
            raise ValueError(
                f"features has {gmap.features.shape[0]} rows for {len(gmap.frames)} frames"
            )
        tensors["features"] = gmap.features.detach().to("cpu", torch.float16).contiguous()
    header = {
        "format": "g2g_map",
        "version": MAP_FORMAT_VERSION,
        "map_id": gmap.map_id or hashlib.sha1(str(time.time()).encode()).hexdigest()[:12],
        "created_unix": gmap.created_unix or time.time(),
        "source": gmap.source,
        "rig": gmap.rig,
        "backbone": gmap.backbone,
        "frames": [
            {
                "camera": f.camera,
                "stamp_ns": int(f.stamp_ns),
                "world_T_cam": np.asarray(f.world_T_cam, float).tolist(),
                "K": np.asarray(f.intrinsics, float).tolist(),
                "size_hw": list(f.size_hw),
            }
            for f in gmap.frames
        ],
        "sha256": {name: _sha256(t) for name, t in tensors.items()},
    }
    write_tagged(path, "g2g_map", header, tensors)
    LOG.info("saved map %s: %d frames, features=%s", path, len(gmap.frames),
             None if gmap.features is None else tuple(gmap.features.shape))
    return path


def read_map_header(path) -> Dict:
    """Read and check only the header (cheap, plain reads): raises :class:`MapError`."""
    path = _check_map_path(path)
    try:
        meta = read_safetensors_metadata(path)
    except (OSError, SafetensorsReadError) as exc:
        raise MapError(f"map file {path} is corrupt or truncated (container: {exc})") from None
    return _map_header(path, meta)


def _check_map_path(path) -> pathlib.Path:
    path = pathlib.Path(path)
    if not path.exists():
        raise MapError(f"map file {path} does not exist")
    if path.is_dir():
        raise MapError(f"map path {path} is a directory, expected a {MAP_SUFFIX} file")
    return path


def _map_header(path: pathlib.Path, meta: Dict[str, str]) -> Dict:
    if "g2g_map" not in meta:
        raise MapError(f"{path} is a safetensors file but not a G2G map (no g2g_map header)")
    try:
        header = json.loads(meta["g2g_map"])
    except json.JSONDecodeError as exc:
        raise MapError(f"map file {path} has a corrupt header ({exc})") from None
    version = header.get("version")
    if header.get("format") != "g2g_map" or version != MAP_FORMAT_VERSION:
        raise MapError(
            f"map file {path} has format version {version!r}; this software reads version "
            f"{MAP_FORMAT_VERSION} (rebuild the map with g2g-map build)"
        )
    return header


def load_map(path, expect_backbone: Optional[Dict] = None, load_features: bool = True) -> G2GMap:
    """Load and fully verify a map.

    Args:
        path: the ``.g2gmap`` file.
        expect_backbone: ``{"name", "config_hash"}`` of the encoder in use; a map whose cached
            features come from another backbone is rejected (its features would be meaningless).
        load_features: skip the (large) feature tensor when False.
    """
    # The whole file is read into memory first (never memory-mapped): a map store is a shared
    # folder, and a mapped file truncated by someone else would kill the process (SIGBUS).
    path = _check_map_path(path)
    try:
        meta, tensors = read_safetensors(path)
    except (OSError, SafetensorsReadError) as exc:
        raise MapError(f"map file {path} is corrupt or truncated ({exc})") from None
    header = _map_header(path, meta)
    if expect_backbone is not None and header.get("backbone"):
        mine, theirs = expect_backbone, header["backbone"]
        key = encoder_mismatch(theirs, mine)
        if key:
            raise MapError(
                f"map {path} was built with backbone {theirs.get('name')!r} "
                f"(config {theirs.get('config_hash')}), but the model uses "
                f"{mine.get('name')!r} (config {mine.get('config_hash')}): {key} differs; "
                "rebuild the map with this model"
            )
    if not load_features:
        tensors.pop("features", None)
    for name, digest in header.get("sha256", {}).items():
        if name not in tensors:
            if name == "features" and not load_features:
                continue
            raise MapError(f"map file {path} lacks tensor {name!r} listed in its header")
        if _sha256(tensors[name]) != digest:
            raise MapError(f"map file {path}: checksum mismatch in {name!r} (file is corrupt)")
    offsets = tensors["image_offsets"].numpy()
    images = tensors["images"].numpy()
    records = header["frames"]
    if len(offsets) != len(records) + 1 or offsets[-1] != len(images):
        raise MapError(f"map file {path}: image index does not match the {len(records)} frames")
    frames = []
    for i, rec in enumerate(records):
        pose = np.asarray(rec["world_T_cam"], float)
        if not np.all(np.isfinite(pose)):
            raise MapError(f"map file {path}: frame {i} has a non-finite pose")
        frames.append(MapFrame(
            camera=rec["camera"], stamp_ns=int(rec["stamp_ns"]), world_T_cam=pose,
            intrinsics=np.asarray(rec["K"], float),
            image=images[offsets[i]:offsets[i + 1]].tobytes(), size_hw=tuple(rec["size_hw"]),
        ))
    features = tensors.get("features")
    if features is not None and features.shape[0] != len(frames):
        raise MapError(
            f"map file {path}: {features.shape[0]} feature rows for {len(frames)} frames"
        )
    return G2GMap(
        frames=frames, rig=header.get("rig", {}), backbone=header.get("backbone", {}),
        features=features, map_id=header.get("map_id", ""), source=header.get("source", ""),
        created_unix=header.get("created_unix", 0.0),
    )


def map_windows(gmap: G2GMap, camera: Optional[str], window: int,
                stride: int = 1) -> List[np.ndarray]:
    """Frame-index windows of ``window`` consecutive frames of one camera (``camera=None``: of
    every camera of the map; a window never mixes cameras)."""
    cameras = gmap.cameras() if camera is None else [camera]
    out: List[np.ndarray] = []
    for cam in cameras:
        idx = gmap.camera_indices(cam)
        out += [idx[s:s + window] for s in range(0, len(idx) - window + 1, stride)]
    return out


def nearest_window(gmap: G2GMap, windows: Sequence[np.ndarray], position: np.ndarray,
                   radius: float = float("inf"), direction: Optional[np.ndarray] = None,
                   metres_per_radian: float = 2.0) -> Optional[int]:
    """Index of the window closest to a camera pose hint (within ``radius`` metres).

    The distance is that of the window's mean camera centre to ``position``; with a viewing
    ``direction`` (the hint camera's optical axis, map frame) the angle to the window's mean
    optical axis is added at ``metres_per_radian``, so that a window seen from the other side of
    the same place (no overlap) is not preferred.
    """
    if not windows:
        return None
    centres = gmap.positions()
    axes = np.stack([f.world_T_cam[:3, 2] for f in gmap.frames])
    best, best_cost = None, np.inf
    for i, w in enumerate(windows):
        dist = float(np.linalg.norm(centres[w].mean(0) - np.asarray(position)))
        if dist > radius:
            continue
        cost = dist
        if direction is not None:
            axis = axes[w].mean(0)
            norms = max(np.linalg.norm(axis) * np.linalg.norm(direction), 1e-9)
            cos = np.dot(axis, direction) / norms
            cost += metres_per_radian * float(np.arccos(np.clip(cos, -1.0, 1.0)))
        if cost < best_cost:
            best, best_cost = i, cost
    return best
