"""Rig groups that arrive before the rig's calibration (rig_odometry): the newest one held.

camera_info and ``/tf_static`` travel on their own topics next to the first images, and the
executor may hand the images over first. The node keeps the newest such group (an older held
one is dropped and counted) and processes it as soon as the calibration is there, so a late
calibration does not cost the first odometry step. (Images sent again with the same stamp are
duplicates to the synchronizer, so a dropped first group would not come back.)
"""

from __future__ import annotations

import threading
import time
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


class CalibrationWait:
    """Rig groups through to ``process(group)`` once ``resolve()`` says the rig's calibration is
    there (worker thread). A group waits up to :attr:`WAIT_S` for it: camera_info and
    ``/tf_static`` travel next to the first images and the executor may hand the images over
    first (without the wait that first group was dropped now and then, and a replay of the same
    bag lost its first odometry output). Past the wait the group is held (:class:`HeldGroup`)
    and :meth:`retry` hands it over as soon as the calibration has come. ``on_error(exc)``
    reports a held group that failed, so the current one is still processed."""

    WAIT_S = 0.5
    RETRY_S = 0.1  # the node's timer period for retry()

    def __init__(self, resolve: Callable[[], bool], process: Callable[[Any], None],
                 on_error: Callable[[BaseException], None], on_drop: Callable[[str], None]):
        self.resolve, self.process, self.on_error = resolve, process, on_error
        self.held = HeldGroup(on_drop)

    def group(self, group: Any) -> None:
        """One synchronized group (worker thread)."""
        deadline = time.monotonic() + self.WAIT_S
        while not self.resolve():
            if time.monotonic() > deadline:
                self.held.hold(group)
                return
            time.sleep(0.01)
        held = self.held.take()
        if held is not None:
            try:
                self.process(held)
            except Exception as exc:  # the current group is still processed (and counted)
                self.on_error(exc)
        self.process(group)

    def retry(self, worker) -> None:
        """Timer: hand the held group to ``worker`` once the calibration has come (when the
        worker is idle, so no queued group is pushed out)."""
        if self.held.waiting and worker is not None and worker.pending() == 0:
            worker.submit("held", self._process_held)

    def _process_held(self) -> None:
        if self.resolve():
            group = self.held.take()
            if group is not None:
                self.process(group)
