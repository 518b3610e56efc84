"""A least-recently-used cache bounded by the memory of its values, not only by their count.

The verification caches hold per-image features, triangulated map points and 2D-3D matches. How
large one entry is depends on the images (a 112 px simulator frame has ~100 SIFT features, a
640x480 camera image up to ``max_features`` = 2,000, i.e. ~1 MB of descriptors), so a cache
bounded only by its number of entries is not bounded in memory. :class:`BoundedCache` counts the
bytes of the numpy arrays (and bytes) in each value and evicts the least recently used entries
until both limits hold.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any, Hashable, Optional

import numpy as np


def value_nbytes(value: Any) -> int:
    """Bytes of the arrays and byte strings in ``value`` (tuples, lists, dicts, dataclasses)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, (tuple, list)):
        return sum(value_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(value_nbytes(v) for v in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(value_nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    return 0


class BoundedCache:
    """``get(key)`` / ``put(key, value)``; at most ``max_bytes`` of values and ``max_items``
    entries (least recently used evicted first). A value larger than ``max_bytes`` on its own
    is returned by ``put`` but not kept. Thread-safe."""

    def __init__(self, max_bytes: int, max_items: Optional[int] = None):
        if max_bytes < 0 or (max_items is not None and max_items < 1):
            raise ValueError(f"max_bytes must be >= 0 and max_items >= 1, got {max_bytes}, "
                             f"{max_items}")
        self.max_bytes = int(max_bytes)
        self.max_items = max_items
        self._items: "collections.OrderedDict[Hashable, tuple]" = collections.OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: Hashable, value: Any) -> Any:
        size = value_nbytes(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]
            if size <= self.max_bytes:
                self._items[key] = (value, size)
                self._nbytes += size
            while self._items and (self._nbytes > self.max_bytes or (
                    self.max_items is not None and len(self._items) > self.max_items)):
                self._nbytes -= self._items.popitem(last=False)[1][1]
        return value

    @property
    def nbytes(self) -> int:
        """Bytes held now (never more than ``max_bytes``)."""
        return self._nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items
