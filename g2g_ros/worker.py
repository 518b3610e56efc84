"""The node worker thread and the timing of its stages.

Threading model (ARCHITECTURE §5): subscription callbacks only enqueue into bounded queues;
inference runs on a :class:`Worker` thread; publishing from the worker is thread-safe in rclpy.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Deque, Dict, Optional, Sequence, Tuple

LOG = logging.getLogger(__name__)


class StageTimes:
    """Last measured latency per named stage (milliseconds), thread-safe."""

    def __init__(self, names: Sequence[str]):
        self._lock = threading.Lock()
        self._values: Dict[str, float] = {n: float("nan") for n in names}

    def set(self, name: str, ms: float) -> None:
        with self._lock:
            self._values[name] = float(ms)

    def snapshot(self) -> Dict[str, float]:
        with self._lock:
            return dict(self._values)


class Worker:
    """One background thread draining a bounded job queue (oldest job dropped when full).

    Exceptions in a job are logged and counted, never propagated: the node keeps running and
    keeps its state. ``on_error(exc)`` lets the node report the error in its diagnostics.
    """

    def __init__(self, name: str, maxlen: int = 2,
                 on_error: Optional[Callable[[BaseException], None]] = None):
        self.name = name
        self._jobs: Deque[Tuple[str, Callable[[], None]]] = collections.deque()
        self._maxlen = maxlen
        self._cv = threading.Condition()
        self._stop = False
        self.dropped: Dict[str, int] = collections.Counter()
        self.errors = 0
        self.done = 0
        self._on_error = on_error
        self._busy = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, kind: str, job: Callable[[], None], replace_same_kind: bool = False) -> None:
        """Queue a job. With ``replace_same_kind`` a queued job of the same kind is replaced."""
        with self._cv:
            if replace_same_kind:
                for i, (k, _) in enumerate(self._jobs):
                    if k == kind:
                        del self._jobs[i]
                        self.dropped[kind] += 1
                        break
            while len(self._jobs) >= self._maxlen:
                old_kind, _ = self._jobs.popleft()
                self.dropped[old_kind] += 1
            self._jobs.append((kind, job))
            self._cv.notify()

    def pending(self) -> int:
        with self._cv:
            return len(self._jobs) + (1 if self._busy else 0)

    def queued(self, kinds: Optional[Sequence[str]] = None) -> int:
        """Jobs of ``kinds`` (all when None) waiting in the queue (not the one running)."""
        with self._cv:
            return sum(1 for kind, _ in self._jobs if kinds is None or kind in kinds)

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                _, job = self._jobs.popleft()
                self._busy = True
            try:
                job()
            except Exception as exc:  # a bad input must never kill the worker
                self.errors += 1
                LOG.debug("worker %s job failed", self.name, exc_info=True)
                if self._on_error is not None:
                    try:
                        self._on_error(exc)
                    except Exception:
                        LOG.exception("error handler failed")
            finally:
                with self._cv:
                    self._busy = False
                    self.done += 1
                    self._cv.notify_all()

    def discard(self, kinds: Optional[Sequence[str]] = None) -> int:
        """Drop the queued jobs of ``kinds`` (all when None), counted as dropped; a running job
        finishes. Returns how many were dropped."""
        with self._cv:
            keep = collections.deque()
            n = 0
            for kind, job in self._jobs:
                if kinds is None or kind in kinds:
                    self.dropped[kind] += 1
                    n += 1
                else:
                    keep.append((kind, job))
            self._jobs = keep
            self._cv.notify_all()
        return n

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._jobs or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=5.0)
