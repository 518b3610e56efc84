"""Reading safetensors files that carry a JSON header under one metadata key.

Our artefacts (covisibility checkpoints, covisibility sample files) share this layout; this is the
one place that turns "missing", "corrupt or truncated", "not this kind of file" and "other format
version" into clear errors of the caller's exception type.
"""

from __future__ import annotations

import json
import pathlib
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
