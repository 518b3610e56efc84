"""Stamp-keyed synchronizer for the N camera streams of a rig (pure Python, no rclpy).

``message_filters`` is not installable here, and its Python approximate policy is greedy and
holds its lock while the user callback runs. This module replaces it for the rig nodes.

Matching (all stamps are integer nanoseconds, per camera strictly increasing):

* **Full groups.** When every camera has a queued message, the *pivot* is the latest of the
  queue heads: no complete group can contain an older message of the pivot camera. Among the sets
  that contain the pivot and one message of every other camera within ``slop_ns`` of each other,
  the one with the smallest spread (max - min stamp) is the candidate. It is emitted once no
  message that can still arrive could give a smaller spread: a future message of camera ``c`` is
  later than its last received stamp plus ``min_interval_ns`` (a lower bound on the camera's
  frame interval; 0 = unknown, which makes a group with a lagging camera wait for that camera's
  next frame unless the spread is already 0). ``slop_ns = 0`` is exact matching.
* **Stale messages.** A queued message older than ``pivot - slop_ns`` can never join a full
  group. It starts a *partial* slot with the other cameras' messages within ``slop_ns`` of it.
* **Missing and late cameras.** With some queue empty, the oldest message waits for the missing
  cameras until either they cannot deliver into its slot any more (their last stamp is past the
  slot), or the slot is older than ``max_wait_ns`` (data time: the latest stamp seen, or a clock
  given to :meth:`RigSynchronizer.tick`), or the camera is considered dead (nothing received for
  ``camera_timeout_ns``, default twice ``max_wait_ns``: slots stop waiting for a camera that
  stopped, so a dead camera costs latency only until it is declared dead). A slot decided that
  way is emitted as a *degraded* group when it holds at least ``min_cameras`` cameras, otherwise
  its messages are dropped and counted as one dropped group. ``max_wait_ns`` therefore has to
  exceed the worst camera latency in stamp time, and ``camera_timeout_ns`` that latency plus
  the longest gap between two frames that do arrive.

Groups are emitted in time order and never share a message. Message order per camera is
enforced: a stamp that is not newer than the camera's last accepted stamp is rejected with a
counted, logged reason (``duplicate`` or ``out_of_order``), never an exception; so is a message
that arrives after its slot was decided (``late``: not newer than the newest member of the
last emitted or dropped group).

Threading: one lock guards the state; the user callback always runs *outside* it. Finished groups
go to an outbox that exactly one thread drains at a time, so groups are delivered in order even
when several executor threads call :meth:`RigSynchronizer.add`, and a callback that re-enters the
synchronizer (calls ``add``/``stats``) does not deadlock: its groups are delivered after it
returns.

Settings, presets and the group and statistics types are in :mod:`g2g_ros.rig_sync_config`.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import logging
import numbers
import threading
import time
from typing import Any, Callable, Deque, Dict, Optional, Sequence, Tuple

from g2g_ros.rig_sync_config import (
    DROP_REASONS, SYNC_PRESETS, RigGroup, SyncConfig, SyncStats,
)

logger = logging.getLogger(__name__)


class RigSynchronizer:
    """Group messages of ``cameras`` by stamp and hand each group to ``callback``.

    Args:
        cameras: camera names in rig order (the first is the reference camera).
        callback: called with a :class:`RigGroup`, outside any lock; exceptions are logged and
            counted, never propagated into :meth:`add`.
        config: a :class:`SyncConfig` or the name of a preset in :data:`SYNC_PRESETS`.
        **overrides: fields of :class:`SyncConfig` replacing those of ``config``.
    """

    def __init__(
        self,
        cameras: Sequence[str],
        callback: Callable[[RigGroup], None],
        config: "SyncConfig | str" = "exact",
        **overrides: Any,
    ) -> None:
        if isinstance(config, str):
            if config not in SYNC_PRESETS:
                raise ValueError(f"unknown sync preset {config!r}; known: {sorted(SYNC_PRESETS)}")
            config = SYNC_PRESETS[config]
        cfg = dataclasses.replace(config, **overrides)
        cameras = tuple(cameras)
        if not cameras or len(set(cameras)) != len(cameras):
            raise ValueError(f"cameras must be non-empty and unique, got {cameras!r}")
        if cfg.slop_ns < 0:
            raise ValueError(f"slop_ns must be >= 0, got {cfg.slop_ns}")
        if cfg.queue_size < 1:
            raise ValueError(f"queue_size must be >= 1, got {cfg.queue_size}")
        if cfg.max_wait_ns is not None and cfg.max_wait_ns < 0:
            raise ValueError(f"max_wait_ns must be >= 0 or None, got {cfg.max_wait_ns}")
        if cfg.camera_timeout_ns is not None and cfg.camera_timeout_ns < 0:
            raise ValueError(
                f"camera_timeout_ns must be >= 0 or None, got {cfg.camera_timeout_ns}"
            )
        if cfg.min_interval_ns < 0:
            raise ValueError(f"min_interval_ns must be >= 0, got {cfg.min_interval_ns}")
        min_cameras = len(cameras) if cfg.min_cameras is None else cfg.min_cameras
        if not 1 <= min_cameras <= len(cameras):
            raise ValueError(
                f"min_cameras must be in [1, {len(cameras)}] for {len(cameras)} cameras, "
                f"got {cfg.min_cameras}"
            )
        self.cameras = cameras
        self.config = cfg
        self.min_cameras = min_cameras
        self._callback = callback
        self._lock = threading.Lock()
        self._queues: Dict[str, Deque[Tuple[int, Any]]] = {c: collections.deque() for c in cameras}
        self._last: Dict[str, Optional[int]] = {c: None for c in cameras}
        self._now: Optional[int] = None
        self._first: Optional[int] = None
        self._received = {c: 0 for c in cameras}
        self._dropped = {c: {r: 0 for r in DROP_REASONS} for c in cameras}
        self._grouped = {c: 0 for c in cameras}
        self._groups_emitted = 0
        self._groups_degraded = 0
        self._groups_dropped = 0
        self._callback_errors = 0
        self._skew_last: Optional[int] = None
        self._skew_max: Optional[int] = None
        self._skew_sum = 0
        self._outbox: Deque[RigGroup] = collections.deque()
        self._delivering = False
        self._warned_at: Dict[Tuple[str, str], float] = {}
        self._horizon: Optional[int] = None  # newest member stamp of any decided slot

    # ------------------------------------------------------------------ public API
    def add(self, camera: str, stamp_ns: int, message: Any) -> bool:
        """Queue ``message`` of ``camera`` stamped ``stamp_ns``; deliver any finished groups.

        Returns False when the message was rejected: ``duplicate`` / ``out_of_order`` stamp,
        or ``late`` (its slot was already decided: emitted without it or dropped).
        """
        if camera not in self._queues:
            raise ValueError(f"unknown camera {camera!r}; configured: {list(self.cameras)}")
        if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, numbers.Integral):
            raise ValueError(f"stamp_ns must be an integer (nanoseconds), got {stamp_ns!r}")
        stamp_ns = int(stamp_ns)
        with self._lock:
            self._received[camera] += 1
            last = self._last[camera]
            if last is not None and stamp_ns <= last:
                reason = "duplicate" if stamp_ns == last else "out_of_order"
                self._dropped[camera][reason] += 1
                self._warn(camera, reason, f"stamp {stamp_ns} ns is not after {last} ns")
                accepted = False
            elif self._horizon is not None and stamp_ns <= self._horizon:
                self._last[camera] = stamp_ns
                self._dropped[camera]["late"] += 1
                self._warn(camera, "late", f"stamp {stamp_ns} ns, groups up to "
                           f"{self._horizon} ns already decided; max_wait_ns too small?")
                accepted = False
            else:
                self._last[camera] = stamp_ns
                self._queues[camera].append((stamp_ns, message))
                if self._first is None:
                    self._first = stamp_ns
                self._now = stamp_ns if self._now is None else max(self._now, stamp_ns)
                self._process()
                while self._enforce_bounds():  # dropping the oldest may unblock a slot
                    self._process()
                accepted = True
        self._deliver()
        return accepted

    def tick(self, now_ns: int) -> None:
        """Advance the synchronizer's clock (e.g. from a node timer) so that slots waiting for
        cameras that stopped are decided even when no camera sends anything."""
        with self._lock:
            self._now = now_ns if self._now is None else max(self._now, int(now_ns))
            self._process()
        self._deliver()

    def reset(self) -> None:
        """Forget queued messages and per-camera stamp history (e.g. after a clock jump back).
        Counters are kept; queued messages are not counted as dropped."""
        with self._lock:
            for camera in self.cameras:
                self._queues[camera].clear()
                self._last[camera] = None
            self._now = None
            self._first = None
            self._horizon = None

    def stats(self) -> SyncStats:
        """Snapshot of the counters (safe to call from any thread, also from the callback)."""
        with self._lock:
            n = self._groups_emitted
            return SyncStats(
                received=dict(self._received),
                dropped={c: dict(d) for c, d in self._dropped.items()},
                queued={c: len(q) for c, q in self._queues.items()},
                grouped=dict(self._grouped),
                groups_emitted=n,
                groups_degraded=self._groups_degraded,
                groups_dropped=self._groups_dropped,
                callback_errors=self._callback_errors,
                last_skew_ns=self._skew_last,
                max_skew_ns=self._skew_max,
                mean_skew_ns=self._skew_sum / n if n else None,
            )

    # ------------------------------------------------------------------ matching (lock held)
    def _process(self) -> None:
        """Emit / drop every slot that can be decided now."""
        slop = self.config.slop_ns
        while any(self._queues.values()):
            heads = {c: q[0][0] for c, q in self._queues.items() if q}
            oldest_cam = min(heads, key=lambda c: (heads[c], self.cameras.index(c)))
            oldest = heads[oldest_cam]
            upper = oldest + slop
            if len(heads) == len(self.cameras):
                pivot_cam = max(heads, key=lambda c: (heads[c], -self.cameras.index(c)))
                pivot = heads[pivot_cam]
                if oldest >= pivot - slop:
                    if not self._try_full_group(pivot_cam, pivot):
                        return
                    continue
                # Stale: reserve messages that can still join the pivot's full group.
                upper = min(upper, pivot - slop - 1)
            if not self._decide_partial_slot(oldest, upper, heads):
                return

    def _try_full_group(self, pivot_cam: str, pivot: int) -> bool:
        """Emit the min-spread full group around ``pivot`` if final; False = wait."""
        slop = self.config.slop_ns
        stamps = {c: [s for s, _ in q] for c, q in self._queues.items()}
        best: Optional[Tuple[int, Dict[str, int]]] = None
        lows = sorted({s for ss in stamps.values() for s in ss if pivot - slop <= s <= pivot})
        for lo in lows:
            choice = {pivot_cam: 0}
            for cam, ss in stamps.items():
                if cam == pivot_cam:
                    continue
                i = bisect.bisect_left(ss, lo)
                if i == len(ss) or ss[i] > lo + slop:
                    break
                choice[cam] = i
            else:
                chosen = [stamps[c][i] for c, i in choice.items()]
                spread = max(chosen) - min(chosen)
                if spread <= slop and (best is None or spread < best[0]):
                    best = (spread, choice)
        if best is None:  # cannot happen: the heads themselves are within slop of the pivot
            raise AssertionError("no full group although all heads are within slop")
        spread, choice = best
        if spread > 0 and not self._expired(pivot):
            step = max(self.config.min_interval_ns, 1)
            for cam in self.cameras:
                if cam != pivot_cam and max(0, self._last[cam] + step - pivot) < spread:
                    return False  # a later message of `cam` could still tighten the group
        members = {}
        for cam, index in choice.items():
            queue = self._queues[cam]
            for _ in range(index):  # skipped in favour of a closer message
                queue.popleft()
                self._dropped[cam]["unmatched"] += 1
            members[cam] = queue.popleft()
        self._emit(members)
        return True

    def _decide_partial_slot(self, oldest: int, upper: int, heads: Dict[str, int]) -> bool:
        """Emit as degraded group or drop the slot of the oldest message; False = wait."""
        members = {c: self._queues[c][0] for c, s in heads.items() if s <= upper}
        waiting_for = [
            c for c in self.cameras
            if c not in members and (self._last[c] is None or self._last[c] < upper)
            and self._alive(c)
        ]
        if waiting_for and not self._expired(oldest):
            return False
        for cam in members:
            self._queues[cam].popleft()
        self._advance_horizon(members)
        if len(members) >= self.min_cameras:
            self._emit(members)
        else:
            for cam in members:
                self._dropped[cam]["group_incomplete"] += 1
            self._groups_dropped += 1
            logger.debug("dropped incomplete group at %d ns with %s", oldest, sorted(members))
        return True

    def _expired(self, stamp: int) -> bool:
        wait = self.config.max_wait_ns
        return wait is not None and self._now is not None and self._now - stamp > wait

    def _alive(self, camera: str) -> bool:
        """False when the camera sent nothing for ``camera_timeout_ns`` of data time."""
        timeout = self.config.camera_timeout_ns
        if timeout is None:
            if self.config.max_wait_ns is None:
                return True
            timeout = 2 * self.config.max_wait_ns
        ref = self._last[camera] if self._last[camera] is not None else self._first
        return ref is None or self._now is None or self._now - ref <= timeout

    def _advance_horizon(self, members: Dict[str, Tuple[int, Any]]) -> None:
        newest = max(stamp for stamp, _ in members.values())
        self._horizon = newest if self._horizon is None else max(self._horizon, newest)

    def _emit(self, members: Dict[str, Tuple[int, Any]]) -> None:
        self._advance_horizon(members)
        ordered = [c for c in self.cameras if c in members]
        stamps = {c: members[c][0] for c in ordered}
        skew = max(stamps.values()) - min(stamps.values())
        group = RigGroup(
            stamp_ns=stamps[ordered[0]],
            stamps_ns=stamps,
            messages={c: members[c][1] for c in ordered},
            missing=tuple(c for c in self.cameras if c not in members),
            skew_ns=skew,
        )
        self._groups_emitted += 1
        self._groups_degraded += int(not group.complete)
        for camera in ordered:
            self._grouped[camera] += 1
        self._skew_last = skew
        self._skew_max = skew if self._skew_max is None else max(self._skew_max, skew)
        self._skew_sum += skew
        self._outbox.append(group)

    def _enforce_bounds(self) -> bool:
        """Drop the oldest messages of over-full queues; True if anything was dropped."""
        dropped = False
        for cam, queue in self._queues.items():
            while len(queue) > self.config.queue_size:
                queue.popleft()
                dropped = True
                self._dropped[cam]["queue_overflow"] += 1
                self._warn(cam, "queue_overflow", f"queue full ({self.config.queue_size})")
        return dropped

    def _warn(self, camera: str, reason: str, detail: str) -> None:
        """Log a rejected/dropped message, at most once per second per camera and reason."""
        now = time.monotonic()
        key = (camera, reason)
        if now - self._warned_at.get(key, -1e9) >= 1.0:
            self._warned_at[key] = now
            logger.warning(
                "camera %s: %s (%s); %d so far", camera, reason, detail,
                self._dropped[camera][reason],
            )

    # ------------------------------------------------------------------ delivery (no lock)
    def _deliver(self) -> None:
        """Drain the outbox in order; only one thread delivers at a time, never under the lock."""
        with self._lock:
            if self._delivering:
                return
            self._delivering = True
        try:
            while True:
                with self._lock:
                    if not self._outbox:
                        self._delivering = False
                        return
                    group = self._outbox.popleft()
                try:
                    self._callback(group)
                except Exception:  # a faulty consumer must not break the stream
                    with self._lock:
                        self._callback_errors += 1
                    logger.exception("rig group callback failed at %d ns", group.stamp_ns)
        except BaseException:
            with self._lock:
                self._delivering = False
            raise
