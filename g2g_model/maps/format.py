"""Maps: versioned, self-describing artefacts that relocalization localizes against.

A map is ONE file (``*.g2gmap``) in the safetensors container:

* metadata ``g2g_map`` (JSON): format version, map id, creation time, source description, the
  rig description, the backbone name and a hash of its configuration, and one record per frame
  (camera name, stamp in ns, world_T_cam 4x4, K 3x3, image size), a SHA-256 of every tensor,
  and ``header_sha256``, a SHA-256 of the header itself (:mod:`g2g_model.maps.seal`);
* tensors: ``images`` (the PNG/JPEG bytes of all frames concatenated, uint8) with
  ``image_offsets`` (int64, T+1), and optionally ``features`` ([T, P, D], the cached encoder
  tokens of every frame, float16).

Writes are atomic: the file is written next to the target under a temporary name, flushed,
fsync'ed and renamed over the target, so a crash never leaves a file that looks valid but is not.
Loading reads only a regular file (a FIFO, a device, a directory are refused before they are
opened for reading), no larger than :func:`max_map_bytes`, and only after the tensors its
header describes were found to fill the file exactly. It then checks the version, the header
checksum, the header schema (:mod:`g2g_model.maps.schema`: every key, type, shape and range,
intrinsics a pinhole K, poses rigid), every tensor checksum, the tensors' dtypes and image
index, and (when asked) the backbone, and raises :class:`MapError` saying which check failed;
no other exception escapes for a bad file. A map without a header checksum (written before
maps carried one) loads with a logged warning; ``g2g-map reseal`` adds the checksum.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import cv2
import numpy as np
import torch

from g2g_model.backbones.identity import encoder_mismatch
from g2g_model.maps.schema import SchemaError, check_map_header
from g2g_model.maps.seal import SealError, check_seal, seal
from g2g_model.tagged_safetensors import (
    NotARegularFileError, SafetensorsReadError, read_safetensors, read_safetensors_metadata,
    write_tagged,
)

LOG = logging.getLogger(__name__)

MAP_FORMAT_VERSION = 1
MAP_SUFFIX = ".g2gmap"
#: The largest map file read (see :func:`max_map_bytes`).
MAX_MAP_BYTES = 16 * 2**30


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
    sealed: bool = True  # loaded: whether the file's header carried a checksum (map_seal)

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
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy()).hexdigest()


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
    _write_map(gmap, path)
    LOG.info("saved map %s: %d frames, features=%s", path, len(gmap.frames),
             None if gmap.features is None else tuple(gmap.features.shape))
    return path


def _write_map(gmap: G2GMap, path: pathlib.Path) -> None:
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
                "size_hw": [int(x) for x in f.size_hw],
            }
            for f in gmap.frames
        ],
        "sha256": {name: _sha256(t) for name, t in tensors.items()},
    }
    try:
        check_map_header(header)
    except SchemaError as exc:
        raise ValueError(f"refusing to save map {path}: {exc}") from None
    write_tagged(path, "g2g_map", seal(header), tensors)


def reseal_map(path) -> bool:
    """Add the header checksum to a map written before header checksums: the map is loaded and
    fully checked first (tensor checksums, header schema), then rewritten atomically. False
    (nothing written) when it already carries a valid header checksum; :class:`MapError` when
    it does not load (a header that does not match its checksum is never re-sealed)."""
    gmap = load_map(path)
    if gmap.sealed:
        return False
    _write_map(gmap, pathlib.Path(path))
    LOG.info("re-sealed map %s (header checksum added)", path)
    return True


def read_map_header(path) -> Dict:
    """Read and check only the header (cheap, plain reads: its checksum, its schema, the file
    size against the tensors it describes): raises :class:`MapError`."""
    path = _check_map_path(path)
    try:
        meta = read_safetensors_metadata(path)
    except (OSError, SafetensorsReadError) as exc:
        raise _read_error(path, exc) from None
    return _map_header(path, meta)[0]


def _check_map_path(path) -> pathlib.Path:
    path = pathlib.Path(path)
    if not path.exists():
        raise MapError(f"map file {path} does not exist")
    if path.is_dir():
        raise MapError(f"map path {path} is a directory, expected a {MAP_SUFFIX} file")
    return path


def _read_error(path: pathlib.Path, exc: Exception) -> MapError:
    if isinstance(exc, NotARegularFileError):
        return MapError(f"map path {exc} (refused unread)")
    return MapError(f"map file {path} is corrupt or truncated ({exc})")


def _map_header(path: pathlib.Path, meta: Dict[str, str]) -> Tuple[Dict, bool]:
    """``(header, sealed)``: the parsed header, checked against its checksum and the schema."""
    if "g2g_map" not in meta:
        raise MapError(f"{path} is a safetensors file but not a G2G map (no g2g_map header)")
    try:
        header = json.loads(meta["g2g_map"])
    except (ValueError, RecursionError) as exc:
        raise MapError(f"map file {path} has a corrupt header ({exc})") from None
    if not isinstance(header, dict):
        raise MapError(f"map file {path} has a corrupt header (not a JSON object)")
    version = header.get("version")
    if header.get("format") != "g2g_map" or version != MAP_FORMAT_VERSION:
        raise MapError(
            f"map file {path} has format version {version!r}; this software reads version "
            f"{MAP_FORMAT_VERSION} (rebuild the map with g2g-map build)"
        )
    try:
        sealed = check_seal(header)
    except (SealError, RecursionError) as exc:
        raise MapError(f"map file {path} is corrupt: {exc}") from None
    try:
        check_map_header(header)
    except SchemaError as exc:
        raise MapError(f"map file {path} has an invalid header: {exc}") from None
    if not sealed:
        LOG.warning("map %s has no header checksum (written before maps carried one): its "
                    "poses and intrinsics are not protected; add it with `g2g-map reseal %s`",
                    path, path)
    return header, sealed


def load_map(path, expect_backbone: Optional[Dict] = None, load_features: bool = True) -> G2GMap:
    """Load and fully verify a map.

    Args:
        path: the ``.g2gmap`` file.
        expect_backbone: ``{"name", "config_hash"}`` of the encoder in use; a map whose cached
            features come from another backbone is rejected (its features would be meaningless).
        load_features: skip the (large) feature tensor when False.

    Raises:
        MapError: whatever is wrong with the file (only regular files up to
            :data:`MAX_MAP_BYTES` are read, and only after their header matched their size);
            no other exception escapes for a bad file.
    """
    path = _check_map_path(path)
    try:
        return _load_map(path, expect_backbone, load_features)
    except MapError:
        raise
    except Exception as exc:  # a hostile file gets a reason, never another exception type
        LOG.warning("map %s: unexpected %s while loading", path, type(exc).__name__,
                    exc_info=True)
        raise MapError(f"map file {path} could not be loaded ({type(exc).__name__}: "
                       f"{exc})") from None


def _load_map(path: pathlib.Path, expect_backbone: Optional[Dict],
              load_features: bool) -> G2GMap:
    # The whole file is read into memory first (never memory-mapped): a map store is a shared
    # folder, and a mapped file truncated by someone else would kill the process (SIGBUS).
    try:
        meta, tensors = read_safetensors(path, max_bytes=max_map_bytes())
    except (OSError, SafetensorsReadError) as exc:
        raise _read_error(path, exc) from None
    header, sealed = _map_header(path, meta)
    if expect_backbone is not None and header["backbone"]:
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
    unlisted = sorted(set(tensors) - set(header["sha256"]))
    if unlisted:
        raise MapError(f"map file {path} holds tensors {unlisted} its header has no checksum for")
    for name, digest in header["sha256"].items():
        if name not in tensors:
            if name == "features" and not load_features:
                continue
            raise MapError(f"map file {path} lacks tensor {name!r} listed in its header")
        if _sha256(tensors[name]) != digest:
            raise MapError(f"map file {path}: checksum mismatch in {name!r} (file is corrupt)")
    records = header["frames"]
    images, offsets, features = _check_tensors(path, tensors, len(records))
    frames = [MapFrame(camera=rec["camera"], stamp_ns=rec["stamp_ns"],
                       world_T_cam=np.asarray(rec["world_T_cam"], float),
                       intrinsics=np.asarray(rec["K"], float),
                       image=images[offsets[i]:offsets[i + 1]].tobytes(),
                       size_hw=tuple(rec["size_hw"]))
              for i, rec in enumerate(records)]
    return G2GMap(
        frames=frames, rig=header["rig"], backbone=header["backbone"], features=features,
        map_id=header["map_id"], source=header["source"], created_unix=header["created_unix"],
        sealed=sealed,
    )


def _check_tensors(path: pathlib.Path, tensors: Dict[str, torch.Tensor], n: int):
    """``(images, offsets, features)``, checked: dtypes, shapes, the image index of ``n``
    frames."""
    expected = {"images": (torch.uint8, 1), "image_offsets": (torch.int64, 1),
                "features": (None, 3)}
    for name, t in tensors.items():
        dtype, dims = expected[name]
        if t.dim() != dims or (dtype is not None and t.dtype != dtype):
            raise MapError(f"map file {path}: tensor {name!r} is {t.dtype} with shape "
                           f"{tuple(t.shape)}, expected {dims} dimensions"
                           + (f" of {dtype}" if dtype is not None else ""))
    offsets = tensors["image_offsets"].numpy()
    images = tensors["images"].numpy()
    if (len(offsets) != n + 1 or offsets[0] != 0 or np.any(np.diff(offsets) < 0)
            or offsets[-1] != len(images)):
        raise MapError(f"map file {path}: image index does not match the {n} frames")
    features = tensors.get("features")
    if features is not None and features.shape[0] != n:
        raise MapError(f"map file {path}: {features.shape[0]} feature rows for {n} frames")
    return images, offsets, features


def max_map_bytes() -> int:
    """The largest map file read: :data:`MAX_MAP_BYTES`, or half the machine's memory when
    that is less (a map is read whole into memory, and its tensors copied out of it)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return MAX_MAP_BYTES
    return min(MAX_MAP_BYTES, memory // 2)
