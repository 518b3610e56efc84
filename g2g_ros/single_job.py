"""One background job at a time, on a thread of its own (a map load of the relocalize node).

A service callback that must answer with a job's outcome starts the job here and waits for its
:class:`~concurrent.futures.Future` (with a timeout): the work runs off the executor's threads,
and since a second job is refused while one runs (:meth:`SingleJob.start` returns None), at most
one executor thread ever waits, whatever callers do: the node keeps its other threads for its
timers and other services. A thread is started per job and ends with it (a daemon: a job stuck
in a read never holds up the process's exit); there is never more than one.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Callable, Optional, Tuple


class SingleJob:
    """Runs at most one job at a time; see the module docstring."""

    def __init__(self, name: str):
        self.name = name
        self._lock = threading.Lock()
        self._running: Optional[Tuple[str, float, Future]] = None  # what, since, future

    def start(self, what: str, job: Callable[[], object]) -> Optional[Future]:
        """Start ``job()`` on a new thread and return its future, or None (nothing started)
        while another job runs. ``what`` describes the job for :meth:`running`."""
        with self._lock:
            if self._running is not None:
                return None
            future: Future = Future()
            self._running = (what, time.monotonic(), future)
        threading.Thread(target=self._run, args=(job, future), name=self.name,
                         daemon=True).start()
        return future

    def running(self) -> Optional[Tuple[str, float]]:
        """``(what, seconds since it started)`` of the job that runs, or None."""
        with self._lock:
            if self._running is None:
                return None
            what, since, _ = self._running
            return what, time.monotonic() - since

    def _run(self, job: Callable[[], object], future: Future) -> None:
        future.set_running_or_notify_cancel()
        result, error = None, None
        try:
            result = job()
        except BaseException as exc:  # handed to whoever waits on the future
            error = exc
        with self._lock:  # free before the outcome is known: a waiter may start the next job
            self._running = None
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
