"""Safetensors files that carry a JSON header under one metadata key: atomic write, checked read.

Our artefacts (covisibility checkpoints and sample files, maps) share this layout. This is the
one place that writes them atomically (a crash never leaves a truncated file under the final
name) and that turns "missing", "corrupt or truncated", "not this kind of file" and "other
format version" into clear errors of the caller's exception type.

Reads never memory-map the file (``safe_open`` and ``load_file`` do): a mapped file that another
process truncates kills the reader with SIGBUS. :func:`read_safetensors` reads the bytes into
memory first, so a concurrent truncation is a clear error instead. Only regular files are read
(:func:`open_regular_file`: a FIFO would block, ``/dev/zero`` never end), and only after the
tensors the header describes were found to fill the file exactly.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import secrets
import socket
import stat
import time
from typing import Dict, Optional, Tuple, Type

import torch

#: A header longer than this is not believed (the safetensors format allows 100 MB).
MAX_HEADER_BYTES = 100_000_000
#: Temporary files of a save that are this old are removed even when their writer cannot be
#: checked (another host, an older naming).
STALE_TMP_S = 24 * 3600.0


class SafetensorsReadError(ValueError):
    """The bytes are not a complete safetensors file (truncated, corrupt, changed meanwhile)."""


class NotARegularFileError(SafetensorsReadError):
    """The path is not a regular file (a FIFO, a device, a socket, a directory): refused
    before anything is read from it."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _not_regular(path, mode: int) -> NotARegularFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return NotARegularFileError(f"{path} is {kind}, not a regular file")


def open_regular_file(path) -> Tuple[int, int]:
    """``(fd, size)`` of ``path`` opened read-only, which must be a regular file.

    The kind is checked before opening (a FIFO would block ``open``, ``/dev/zero`` would never
    end), the file is opened with ``O_NONBLOCK`` and checked again on the open descriptor (so a
    FIFO swapped in meanwhile cannot block either). Raises ``OSError`` (missing, unreadable) or
    :class:`NotARegularFileError`; the caller closes ``fd``."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _not_regular(path, st.st_mode)
    return fd, st.st_size


def _check_tensor_extent(header: Dict, data_bytes: int) -> None:
    """The tensors' ``data_offsets`` must end exactly at the end of the file."""
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(type(o) is int for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise SafetensorsReadError(f"tensor {name!r} has no valid data_offsets")
        end = max(end, offsets[1])
    if end != data_bytes:
        raise SafetensorsReadError(f"the header describes {end} bytes of tensor data, the file "
                                   f"holds {data_bytes}")


def _parse_header(fh, size: int) -> Tuple[Dict, int]:
    """``(header, header_end)`` of the safetensors bytes readable from ``fh``, checked against
    the file's ``size`` (the tensors the header describes must fill the file exactly)."""
    head = fh.read(8)
    if len(head) < 8:
        raise SafetensorsReadError(f"{size} bytes, too short for a safetensors header")
    n = int.from_bytes(head, "little")
    if n > min(MAX_HEADER_BYTES, size - 8):
        raise SafetensorsReadError(f"header length {n} does not fit in {size} bytes")
    try:
        header = json.loads(fh.read(n))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SafetensorsReadError(f"header is not JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict):
        raise SafetensorsReadError("header is not a JSON object")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and all(
            isinstance(v, str) for v in meta.values())):
        raise SafetensorsReadError("__metadata__ is not a map of strings")
    _check_tensor_extent(header, size - 8 - n)
    return header, 8 + n


def read_safetensors_metadata(path) -> Dict[str, str]:
    """The ``__metadata__`` of a safetensors file, read with plain reads (no memory map), the
    file's size checked against the tensors its header describes.

    Raises ``OSError`` (missing, unreadable) or :class:`SafetensorsReadError` (also
    :class:`NotARegularFileError`).
    """
    fd, size = open_regular_file(path)
    with os.fdopen(fd, "rb") as fh:
        return _parse_header(fh, size)[0].get("__metadata__") or {}


def read_safetensors(path, max_bytes: Optional[int] = None
                     ) -> Tuple[Dict[str, str], Dict[str, torch.Tensor]]:
    """``(metadata, tensors)`` of a safetensors file, read into memory first, never
    memory-mapped. Only a regular file is read, and only after its header was checked against
    its size (and the size against ``max_bytes``). Raises ``OSError`` or
    :class:`SafetensorsReadError` (also when the file is truncated or replaced while it is
    read)."""
    from safetensors.torch import load

    fd, size = open_regular_file(path)
    with os.fdopen(fd, "rb") as fh:
        if max_bytes is not None and size > max_bytes:
            raise SafetensorsReadError(f"{size} bytes, more than the {max_bytes} bytes allowed")
        _parse_header(fh, size)  # before the whole file is read
        fh.seek(0)
        data = fh.read(size + 1)
    if len(data) != size:
        raise SafetensorsReadError(f"the file changed while it was read ({size} bytes at open, "
                                   f"{len(data)} read)")
    metadata = _parse_header(io.BytesIO(data), len(data))[0].get("__metadata__") or {}
    try:
        tensors = load(data)
    except Exception as exc:  # safetensors raises its own error type for bad containers
        raise SafetensorsReadError(str(exc)) from None
    return metadata, tensors


def read_tagged(path, key: str, version: int, what: str,
                error: Type[Exception] = ValueError) -> Tuple[Dict, Dict[str, torch.Tensor]]:
    """Return ``(header, tensors)`` of ``path`` whose metadata ``key`` holds a JSON header with
    ``"version" == version``; anything else raises ``error`` naming ``what`` was expected."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise error(f"{what} {path} does not exist")
    try:
        raw, tensors = read_safetensors(path)
    except (OSError, SafetensorsReadError) as exc:
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


def _tmp_prefix(path: pathlib.Path) -> str:
    return f"{path.name}."


def remove_stale_tmp_files(path) -> list:
    """Remove temporary files that a killed save of ``path`` left beside it: those written on
    this host by a process that no longer runs, and any older than :data:`STALE_TMP_S`. A save
    in progress (its writer alive) keeps its file. Returns the removed paths."""
    path = pathlib.Path(path)
    host = _host()
    removed = []
    for tmp in path.parent.glob(_tmp_prefix(path) + "*.tmp"):
        parts = tmp.name[len(_tmp_prefix(path)):].split(".")
        try:
            stale = time.time() - tmp.stat().st_mtime > STALE_TMP_S
            if not stale and len(parts) == 4 and parts[0] == host and parts[1].isdigit():
                stale = not _process_alive(int(parts[1]))
            if stale:
                tmp.unlink()
                removed.append(tmp)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed


def _host() -> str:
    return socket.gethostname().replace(".", "-") or "host"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


def write_tagged(path, key: str, header: Dict, tensors: Dict[str, torch.Tensor]) -> pathlib.Path:
    """Write ``tensors`` with ``header`` (JSON) under metadata ``key`` to ``path`` atomically:
    a temporary file in the same folder (``<name>.<host>.<pid>.<random>.tmp``), flushed to disk,
    then renamed over ``path``. The file gets the usual mode (0666 less the umask, as ``open``
    gives); leftovers of killed saves of the same ``path`` are removed first."""
    from safetensors.torch import save

    path = pathlib.Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is an existing directory, not a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp_files(path)
    tmp = path.parent / (f"{_tmp_prefix(path)}{_host()}.{os.getpid()}."
                         f"{secrets.token_hex(4)}.tmp")
    data = save(tensors, metadata={key: json.dumps(header)})
    # Created here with mode 0o666, so the umask applies as for any new file (mkstemp, and
    # safetensors' save_file, give 0600).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
