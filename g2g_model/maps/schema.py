"""The schema of a map header: the ``g2g_map`` JSON of a ``.g2gmap`` file (:mod:`.format`).

:func:`check_map_header` checks every key, its type, shape, finiteness and range, and raises
:class:`SchemaError` naming the first key that is wrong and why. A header that passes gives a
map the relocalizer can use without a ``KeyError``, a ``TypeError`` or a meaningless pose:

* top level: exactly the keys of :data:`HEADER_KEYS` (``header_sha256`` optional); ``format``
  ``"g2g_map"``; ``version`` an int; ``map_id`` and ``source`` strings; ``created_unix`` a
  number in ``[0, 1e11)``; ``rig`` and ``backbone`` JSON objects (a backbone's ``name`` and
  ``config_hash`` strings); ``sha256`` a SHA-256 per tensor, ``images`` and ``image_offsets``
  at least; ``frames`` a non-empty list;
* each frame: exactly the keys of :data:`FRAME_KEYS`; ``camera`` a non-empty string;
  ``stamp_ns`` an int in ``[0, 2**63)``; ``size_hw`` two ints in ``[1, 100000]``;
* ``K`` a pinhole camera matrix: 3x3 finite numbers, ``fx, fy`` in ``(0, 1e6]``, skew below
  ``1e-6 fx``, the principal point inside the image (``0 <= cx <= width``,
  ``0 <= cy <= height``), the last row ``0 0 1``;
* ``world_T_cam`` a rigid transform: 4x4 finite numbers, the rotation orthonormal with
  determinant +1 (within :data:`ROTATION_TOLERANCE`), the last row ``0 0 0 1``, the translation
  shorter than :data:`MAX_TRANSLATION_M`.

Booleans are not numbers here (JSON ``true`` is not a stamp).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict

import numpy as np

HEADER_KEYS = ("format", "version", "map_id", "created_unix", "source", "rig", "backbone",
               "frames", "sha256")
OPTIONAL_HEADER_KEYS = ("header_sha256",)
FRAME_KEYS = ("camera", "stamp_ns", "world_T_cam", "K", "size_hw")
TENSORS = ("images", "image_offsets", "features")
REQUIRED_TENSORS = ("images", "image_offsets")

#: Largest |t| of a keyframe pose, metres (beyond any mapped site; catches 1e300 and unit slips).
MAX_TRANSLATION_M = 1e6
#: Largest |R^T R - I| entry and |det R - 1| of a keyframe rotation.
ROTATION_TOLERANCE = 1e-4
MAX_FOCAL_PX = 1e6
MAX_UNIX_TIME = 1e11  # seconds, the year 5138
MAX_IMAGE_SIDE = 100_000
MAX_SKEW_RATIO = 1e-6
_SHA256 = re.compile(r"[0-9a-f]{64}")


class SchemaError(ValueError):
    """A map header breaks the schema; the message names the key and what is wrong."""


def check_map_header(header: Any) -> None:
    """Raise :class:`SchemaError` unless ``header`` (parsed JSON) follows the schema."""
    _object("header", header, HEADER_KEYS, OPTIONAL_HEADER_KEYS)
    if header["format"] != "g2g_map":
        raise SchemaError(f"format is {header['format']!r}, expected 'g2g_map'")
    _int("version", header["version"], 1, 2**31)
    _string("map_id", header["map_id"], empty=True)
    _string("source", header["source"], empty=True)
    created = _number("created_unix", header["created_unix"])
    if not 0 <= created < MAX_UNIX_TIME:
        raise SchemaError(f"created_unix is {created}, expected in [0, {MAX_UNIX_TIME:g})")
    if not isinstance(header["rig"], dict):
        raise SchemaError(f"rig is {_kind(header['rig'])}, expected a JSON object")
    backbone = header["backbone"]
    if not isinstance(backbone, dict):
        raise SchemaError(f"backbone is {_kind(backbone)}, expected a JSON object")
    for key in ("name", "config_hash"):
        if key in backbone:
            _string(f"backbone.{key}", backbone[key], empty=True)
    _checksums("sha256", header["sha256"])
    if "header_sha256" in header:
        _digest("header_sha256", header["header_sha256"])
    frames = header["frames"]
    if not isinstance(frames, list) or not frames:
        raise SchemaError(f"frames is {_kind(frames)}, expected a non-empty list")
    for i, frame in enumerate(frames):
        _check_frame(f"frames[{i}]", frame)


def _check_frame(where: str, frame: Any) -> None:
    _object(where, frame, FRAME_KEYS)
    _string(f"{where}.camera", frame["camera"])
    _int(f"{where}.stamp_ns", frame["stamp_ns"], 0, 2**63 - 1)
    size = frame["size_hw"]
    if not isinstance(size, list) or len(size) != 2:
        raise SchemaError(f"{where}.size_hw is {_kind(size)}, expected [height, width]")
    height = _int(f"{where}.size_hw[0]", size[0], 1, MAX_IMAGE_SIDE)
    width = _int(f"{where}.size_hw[1]", size[1], 1, MAX_IMAGE_SIDE)
    check_intrinsics(f"{where}.K", _matrix(f"{where}.K", frame["K"], 3), height, width)
    check_rigid(f"{where}.world_T_cam", _matrix(f"{where}.world_T_cam", frame["world_T_cam"], 4))


def check_intrinsics(where: str, K: np.ndarray, height: int, width: int) -> None:
    """``K`` (3x3, finite) must be a pinhole camera matrix of an image ``height x width``."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    for name, f in (("fx", fx), ("fy", fy)):
        if not 0 < f <= MAX_FOCAL_PX:
            raise SchemaError(f"{where}: {name} is {f}, expected in (0, {MAX_FOCAL_PX:g}]")
    if abs(K[0, 1]) > MAX_SKEW_RATIO * fx:
        raise SchemaError(f"{where}: skew is {K[0, 1]}, expected 0 (a pinhole camera)")
    if not (0 <= cx <= width and 0 <= cy <= height):
        raise SchemaError(f"{where}: principal point ({cx}, {cy}) is outside the "
                          f"{width}x{height} image")
    if K[1, 0] != 0 or list(K[2]) != [0, 0, 1]:
        raise SchemaError(f"{where}: expected [[fx, s, cx], [0, fy, cy], [0, 0, 1]], got "
                          f"{K.tolist()}")


def check_rigid(where: str, T: np.ndarray) -> None:
    """``T`` (4x4, finite) must be a rigid transform with a bounded translation."""
    R = T[:3, :3]
    if np.abs(R).max() > 1 + ROTATION_TOLERANCE:  # (no overflow in the products below)
        raise SchemaError(f"{where}: not a rotation (an entry of {np.abs(R).max():.3g})")
    err = float(np.abs(R.T @ R - np.eye(3)).max())
    det = float(np.linalg.det(R))
    if err > ROTATION_TOLERANCE or abs(det - 1) > ROTATION_TOLERANCE:
        raise SchemaError(f"{where}: not a rotation (|R^T R - I| = {err:.3g}, det {det:.6g}; "
                          f"tolerance {ROTATION_TOLERANCE:g})")
    if list(T[3]) != [0, 0, 0, 1]:
        raise SchemaError(f"{where}: last row is {T[3].tolist()}, expected [0, 0, 0, 1]")
    norm = float(np.abs(T[:3, 3]).max())
    norm = norm if norm >= MAX_TRANSLATION_M else float(np.linalg.norm(T[:3, 3]))
    if norm >= MAX_TRANSLATION_M:
        raise SchemaError(f"{where}: translation of {norm:.3g} m, expected below "
                          f"{MAX_TRANSLATION_M:g} m")


# ---------------------------------------------------------------------- types
def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    names = {str: "a string", list: "a list", dict: "a JSON object", type(None): "null"}
    text = names.get(type(value), type(value).__name__)
    return f"{text} of length {len(value)}" if isinstance(value, (str, list)) else text


def _object(where: str, value: Any, keys, optional=()) -> None:
    if not isinstance(value, dict):
        raise SchemaError(f"{where} is {_kind(value)}, expected a JSON object")
    missing = [k for k in keys if k not in value]
    if missing:
        raise SchemaError(f"{where} lacks {', '.join(map(repr, missing))}")
    unknown = sorted(set(value) - set(keys) - set(optional))
    if unknown:
        raise SchemaError(f"{where} has unknown {', '.join(map(repr, unknown))}")


def _string(where: str, value: Any, empty: bool = False) -> str:
    if not isinstance(value, str) or not (value or empty):
        raise SchemaError(f"{where} is {_kind(value)}, expected a "
                          f"{'' if empty else 'non-empty '}string")
    return value


def _int(where: str, value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise SchemaError(f"{where} is {_kind(value)}, expected an integer in [{low}, {high}]")
    return value


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{where} is {_kind(value)}, expected a number")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise SchemaError(f"{where} is {value!r}, expected a finite number")
    return out


def _matrix(where: str, value: Any, n: int) -> np.ndarray:
    """An ``n x n`` list of lists of finite numbers as a float array."""
    if not isinstance(value, list) or len(value) != n:
        raise SchemaError(f"{where} is {_kind(value)}, expected {n} rows of {n} numbers")
    for r, row in enumerate(value):
        if not isinstance(row, list) or len(row) != n:
            raise SchemaError(f"{where}[{r}] is {_kind(row)}, expected {n} numbers")
    return np.array([[_number(f"{where}[{r}][{c}]", x) for c, x in enumerate(row)]
                     for r, row in enumerate(value)], dtype=float)


def _digest(where: str, value: Any) -> None:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise SchemaError(f"{where} is {_kind(value)}, expected a SHA-256 (64 hex digits)")


def _checksums(where: str, value: Any) -> Dict[str, str]:
    if not isinstance(value, dict):
        raise SchemaError(f"{where} is {_kind(value)}, expected a JSON object")
    missing = [t for t in REQUIRED_TENSORS if t not in value]
    unknown = sorted(set(value) - set(TENSORS))
    if missing or unknown:
        raise SchemaError(f"{where} must list the tensors {', '.join(REQUIRED_TENSORS)} "
                          f"(and optionally features); missing {missing}, unknown {unknown}")
    for name, digest in value.items():
        _digest(f"{where}.{name}", digest)
    return value
