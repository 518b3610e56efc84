"""Bound the number of glibc malloc arenas of a node process.

glibc gives threads their own malloc arenas (up to 8 per core) and keeps what a thread freed in
its arena for reuse, so a process whose many threads (executor, worker, torch, DDS) allocate
large transient arrays -- images, features, tensors -- holds the high-water mark of every arena
at once. Measured in the memory soak (benchmarks/RESULTS_soak.md): `relocalize`'s anonymous
memory grew from 68 MB to 331 MB in its first two minutes with the default arenas. Two arenas
keep that bounded by design; the environment variable ``MALLOC_ARENA_MAX`` (glibc's own) still
wins when set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # mallopt parameter of glibc's <malloc.h>
DEFAULT_ARENAS = 2


def limit_malloc_arenas(arenas: int = DEFAULT_ARENAS) -> bool:
    """``mallopt(M_ARENA_MAX, arenas)`` unless ``MALLOC_ARENA_MAX`` is set; True if applied
    (False on a C library without ``mallopt``, e.g. not glibc)."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, int(arenas)))
    except (OSError, AttributeError):
        return False
