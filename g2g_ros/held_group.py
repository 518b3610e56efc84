"""The newest rig group that arrived before the rig's calibration (rig_odometry).

camera_info and ``/tf_static`` travel on their own topics next to the first images, and the
executor may hand the images over first. The node keeps the newest such group (an older held
one is dropped and counted) and processes it as soon as the calibration is there, so a late
calibration does not cost the first odometry step. (Images sent again with the same stamp are
duplicates to the synchronizer, so a dropped first group would not come back.)
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional


class HeldGroup:
    """At most one group; ``on_drop(reason)`` counts every group that leaves unprocessed."""

    def __init__(self, on_drop: Callable[[str], None]):
        self._lock = threading.Lock()
        self._group: Optional[Any] = None
        self._on_drop = on_drop

    def hold(self, group: Any) -> None:
        with self._lock:
            replaced, self._group = self._group, group
        if replaced is not None:
            self._on_drop("held_replaced")

    def take(self) -> Optional[Any]:
        with self._lock:
            group, self._group = self._group, None
        return group

    def drop(self) -> None:
        if self.take() is not None:
            self._on_drop("held_discarded")

    @property
    def waiting(self) -> bool:
        with self._lock:
            return self._group is not None
