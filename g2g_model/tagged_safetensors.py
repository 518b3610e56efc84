"""Safetensors files that carry a JSON header under one metadata key: atomic write, checked read.

Our artefacts (covisibility checkpoints and sample files, maps) share this layout. This is the
one place that writes them atomically (a crash never leaves a truncated file under the final
name) and that turns "missing", "corrupt or truncated", "not this kind of file" and "other
format version" into clear errors of the caller's exception type.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from typing import Dict, Tuple, Type

import torch


def read_tagged(path, key: str, version: int, what: str,
                error: Type[Exception] = ValueError) -> Tuple[Dict, Dict[str, torch.Tensor]]:
    """Return ``(header, tensors)`` of ``path`` whose metadata ``key`` holds a JSON header with
    ``"version" == version``; anything else raises ``error`` naming ``what`` was expected."""
    from safetensors import safe_open

    path = pathlib.Path(path)
    if not path.is_file():
        raise error(f"{what} {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as fh:
            raw = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as exc:  # safetensors raises its own error types
        raise error(f"{what} {path} is corrupt or truncated ({exc})") from None
    if key not in raw:
        raise error(f"{path} is not a {what} (no {key})")
    try:
        header = json.loads(raw[key])
    except json.JSONDecodeError as exc:
        raise error(f"{what} {path} has a corrupt header ({exc})") from None
    if header.get("version") != version:
        raise error(f"{what} {path} has version {header.get('version')!r}, expected {version}")
    return header, tensors


def write_tagged(path, key: str, header: Dict, tensors: Dict[str, torch.Tensor]) -> pathlib.Path:
    """Write ``tensors`` with ``header`` (JSON) under metadata ``key`` to ``path`` atomically:
    a temporary file in the same folder, flushed to disk, then renamed over ``path``."""
    from safetensors.torch import save_file

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={key: json.dumps(header)})
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
