"""A small TF buffer (tf2_ros is not installable here): numpy core, no ROS import at module level.

* Storage: one edge per child frame (``parent -> child``, REP-105 tree), either *static*
  (``/tf_static``: one transform valid at all times) or *dynamic* (``/tf``: time-indexed samples
  kept for ``cache_duration_ns`` behind the newest sample of that edge).
* The tree stays a tree: an edge against the rule of :mod:`g2g_ros.tf_tree` (loops, second
  parents, dynamic over static) is rejected; rejected edges are counted by reason in
  :meth:`TFBuffer.stats` (with the last rejected edge) and logged naming the edge, at most once
  per second per reason; the valid stream is untouched, so lookups keep working without a reset.
* Lookup: :meth:`TFBuffer.lookup_transform` ``(target, source, stamp_ns)`` returns the 4x4
  ``T_{target<-source}`` (maps points in ``source`` coordinates into ``target``) chained through
  the tree via the closest common ancestor, interpolating every dynamic edge at the stamp
  (linear translation, slerp rotation). ``stamp_ns = 0`` means "latest": the newest time at which
  every dynamic edge of the chain has data (tf2's latest common time).
* Errors (:mod:`g2g_ros.tf_tree`): subclasses of :class:`TFError`: :class:`TFLookupError` (also a
  ``LookupError``) for an unknown frame, :class:`ConnectivityError` when the two frames are in
  different trees, and :class:`ExtrapolationError` naming the edge and its available time range.
* Ingest never raises on bad data: NaN / inf values, zero or far-from-unit quaternions, empty
  or identical frame ids, data older than the cache, (given a clock) dynamic data stamped
  far ahead of the current time and edges against the tree rule above are rejected with a
  logged reason and counted in :meth:`TFBuffer.stats`.

Thread-safe: a listener's subscription callbacks may ingest while a worker looks up.
Quaternions are (x, y, z, w) as in ROS and :mod:`g2g_model.geometry`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import invert_pose, make_pose, matrix_to_quat_xyzw, quat_xyzw_to_matrix
from g2g_ros.conversions import stamp_ns
from g2g_ros.tf_tree import (
    ConnectivityError, Edge, ExtrapolationError, TFError, TFLookupError, fmt_ns, path_to_root,
    tree_problem,
)

logger = logging.getLogger(__name__)

#: Quaternions whose norm differs from 1 by more than this are rejected, smaller errors fixed.
QUATERNION_NORM_TOLERANCE = 1e-2


class TFBuffer:
    """Time-indexed transform tree with interpolated, chained lookups (see module docstring)."""

    def __init__(self, cache_duration_ns: int = 10 * 10**9,
                 clock_ns: Optional[Callable[[], int]] = None,
                 max_ahead_ns: int = 10 * 10**9, reparent_after_s: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if cache_duration_ns <= 0:
            raise ValueError(f"cache_duration_ns must be > 0, got {cache_duration_ns}")
        self.cache_duration_ns = int(cache_duration_ns)
        #: A dynamic edge with another parent replaces a child's dynamic edge only once that
        #: edge got no sample for this long (wall time, ``monotonic()`` seconds).
        self.reparent_after_s = float(reparent_after_s)
        self._monotonic = monotonic
        #: ``clock_ns()``: the current (ROS) time; with it, a dynamic transform stamped more
        #: than ``max_ahead_ns`` ahead is rejected ("future"): as the newest sample of its edge
        #: it would make every later, correct sample "old_data". Not checked while it is 0;
        #: samples stored then that turn out to be that far ahead are forgotten once it is not.
        self.clock_ns = clock_ns
        self.max_ahead_ns = int(max_ahead_ns)
        self._lock = threading.Lock()
        self._edges: Dict[str, Edge] = {}
        self._accepted = 0
        self._rejected: Dict[str, int] = collections.Counter()
        self._forgotten = 0   # samples stored before the first /clock, then found ahead of it
        self._last_rejected = ""  # "<parent> -> <child>: <reason>" of the newest rejection
        self._warned_at: Dict[str, float] = {}

    # ------------------------------------------------------------------ ingest
    def set_transform(
        self,
        parent: str,
        child: str,
        stamp_ns: int,
        translation: Sequence[float],
        quat_xyzw: Sequence[float],
        static: bool = False,
    ) -> Optional[str]:
        """Store ``T_{parent<-child}`` at ``stamp_ns``. Returns None if stored, else the reason
        it was rejected (also counted and logged)."""
        parent, child = str(parent).lstrip("/"), str(child).lstrip("/")
        translation = np.asarray(translation, dtype=np.float64).reshape(3)
        quat = np.asarray(quat_xyzw, dtype=np.float64).reshape(4)
        reason = None
        if not parent or not child:
            reason = "empty_frame_id"
        elif parent == child:
            reason = "self_transform"
        elif not (np.all(np.isfinite(translation)) and np.all(np.isfinite(quat))):
            reason = "nan"
        elif abs(np.linalg.norm(quat) - 1.0) > QUATERNION_NORM_TOLERANCE:
            reason = "denormalized_quaternion"
        elif stamp_ns < 0:
            reason = "negative_stamp"
        now = self.clock_ns() if not static and self.clock_ns is not None else 0
        if reason is None and now > 0 and stamp_ns > now + self.max_ahead_ns:
            reason = "future"
        with self._lock:
            edge = self._edges.get(child)
            if (edge is not None and not edge.static and now > 0 and edge.stamps
                    and edge.stamps[-1] > now + self.max_ahead_ns):
                # Samples taken before the first /clock (nothing to judge them by) that turn
                # out to lie in the future: forget them, or they make every sample "old_data".
                logger.warning("TF %s -> %s: forgot samples up to %s, ahead of the ROS time %s "
                               "(received before the first /clock)", edge.parent, child,
                               fmt_ns(edge.stamps[-1]), fmt_ns(now))
                self._forgotten += len(edge.stamps)
                del self._edges[child]
                edge = None
            received = self._monotonic()
            detail = ""
            if reason is None:
                reason, detail = tree_problem(self._edges, parent, child, static, received,
                                              self.reparent_after_s)
            if reason is None and edge is not None and not static and edge.parent == parent \
                    and edge.stamps and stamp_ns < edge.stamps[-1] - self.cache_duration_ns:
                reason = "old_data"
            if reason is not None:
                self._rejected[reason] += 1
                self._last_rejected = f"{parent} -> {child}: {reason}"
                self._warn(reason, f"{parent} -> {child} at {fmt_ns(int(max(stamp_ns, 0)))}"
                           + detail)
                return reason
            if edge is None or edge.parent != parent or edge.static != static:
                if edge is not None:
                    logger.info("TF frame %s re-parented/replaced: %s -> %s (%s)", child,
                                edge.parent, parent, "static" if static else "dynamic")
                edge = self._edges[child] = Edge(parent=parent, static=static)
            edge.received = received
            edge.insert(int(stamp_ns), translation, quat / np.linalg.norm(quat))
            if not static:
                edge.prune(edge.stamps[-1] - self.cache_duration_ns)
            self._accepted += 1
        return None

    def set_transform_matrix(
        self, parent: str, child: str, stamp_ns: int, pose: np.ndarray, static: bool = False
    ) -> Optional[str]:
        """Like :meth:`set_transform` from a 4x4 ``T_{parent<-child}``."""
        pose = np.asarray(pose, dtype=np.float64)
        if pose.shape != (4, 4):
            raise ValueError(f"pose must be 4x4, got {list(pose.shape)}")
        if not np.all(np.isfinite(pose)):
            quat = np.full(4, np.nan)
        else:
            quat = matrix_to_quat_xyzw(pose[:3, :3])
        return self.set_transform(parent, child, stamp_ns, pose[:3, 3], quat, static=static)

    def ingest_transform(self, msg: Any, static: bool = False) -> Optional[str]:
        """Store one ``geometry_msgs/TransformStamped``-like message; see :meth:`set_transform`."""
        tr, rot = msg.transform.translation, msg.transform.rotation
        return self.set_transform(
            msg.header.frame_id, msg.child_frame_id, stamp_ns(msg.header.stamp),
            (tr.x, tr.y, tr.z), (rot.x, rot.y, rot.z, rot.w), static=static,
        )

    def ingest(self, tf_message: Any, static: bool = False) -> int:
        """Store every transform of a ``tf2_msgs/TFMessage``-like message; returns how many
        were accepted (``static=True`` for ``/tf_static``)."""
        return sum(self.ingest_transform(t, static) is None for t in tf_message.transforms)

    def clear(self) -> None:
        """Forget all transforms; counters are kept."""
        with self._lock:
            self._edges.clear()

    def clear_dynamic(self) -> int:
        """Forget the time-indexed (``/tf``) transforms and keep the static ones, e.g. after a
        jump back of time (``/tf_static`` is latched and not sent again). Returns how many
        edges were removed; counters are kept."""
        with self._lock:
            dynamic = [child for child, edge in self._edges.items() if not edge.static]
            for child in dynamic:
                del self._edges[child]
        return len(dynamic)

    # ------------------------------------------------------------------ queries
    def frames(self) -> List[str]:
        with self._lock:
            return sorted(self._known_frames())

    def stats(self) -> Dict[str, Any]:
        """``{"accepted": int, "rejected": {reason: count}, "last_rejected": str,
        "forgotten": int, "frames": int}`` (``last_rejected``: ``"<parent> -> <child>:
        <reason>"`` of the newest rejection, "" before any; ``forgotten``: samples stored
        before the first ``/clock`` that then lay ahead of it)."""
        with self._lock:
            return {
                "accepted": self._accepted,
                "rejected": dict(self._rejected),
                "last_rejected": self._last_rejected,
                "forgotten": self._forgotten,
                "frames": len(self._known_frames()),
            }

    def time_range(self, child: str) -> Optional[Tuple[int, int]]:
        """(earliest, latest) stamp of the dynamic edge ending in ``child``; None if static."""
        with self._lock:
            edge = self._edges.get(child)
            if edge is None:
                raise TFLookupError(f"frame {child!r} has no parent in the buffer")
            return None if edge.static else (edge.stamps[0], edge.stamps[-1])

    def latest_common_time(self, target: str, source: str) -> int:
        """Newest stamp at which every dynamic edge between the frames has data; 0 when the
        chain is static. Raises the same lookup errors as :meth:`lookup_transform`."""
        with self._lock:
            up, down = self._chain(target, source)
            return self._common_time(up + down)

    def can_transform(self, target: str, source: str, stamp_ns: int = 0) -> bool:
        try:
            self.lookup_transform(target, source, stamp_ns)
        except TFError:
            return False
        return True

    def lookup_transform(self, target: str, source: str, stamp_ns: int = 0) -> np.ndarray:
        """4x4 ``T_{target<-source}`` at ``stamp_ns`` (0 = latest common time).

        Raises:
            TFLookupError: unknown frame. ConnectivityError: frames in different trees.
            ExtrapolationError: the stamp is outside the data of an edge in the chain.
        """
        target, source = str(target).lstrip("/"), str(source).lstrip("/")
        with self._lock:
            target_up, source_up = self._chain(target, source)
            stamp = int(stamp_ns) if stamp_ns else self._common_time(target_up + source_up)
            anc_T_target = self._compose(target_up, stamp)
            anc_T_source = self._compose(source_up, stamp)
        return invert_pose(anc_T_target) @ anc_T_source

    # ------------------------------------------------------------------ internals (lock held)
    def _known_frames(self) -> set:
        return set(self._edges) | {e.parent for e in self._edges.values()}

    def _chain(self, target: str, source: str) -> Tuple[List[str], List[str]]:
        """Child frames whose edges lead from ``target`` resp. ``source`` up to their closest
        common ancestor."""
        known = self._known_frames()
        for name, frame in (("target", target), ("source", source)):
            if frame not in known:
                raise TFLookupError(
                    f"{name} frame {frame!r} does not exist; known frames: {sorted(known)}"
                )
        target_path = path_to_root(self._edges, target)
        source_path = path_to_root(self._edges, source)
        common = set(target_path) & set(source_path)
        if not common:
            raise ConnectivityError(
                f"frames {target!r} and {source!r} are not connected: their trees have roots "
                f"{target_path[-1]!r} and {source_path[-1]!r}"
            )
        ancestor = next(f for f in source_path if f in common)
        return (target_path[: target_path.index(ancestor)],
                source_path[: source_path.index(ancestor)])

    def _common_time(self, children: Iterable[str]) -> int:
        dynamic = [(c, self._edges[c]) for c in children if not self._edges[c].static]
        if not dynamic:
            return 0
        latest = min(e.stamps[-1] for _, e in dynamic)
        for child, edge in dynamic:
            if edge.stamps[0] > latest:
                raise ExtrapolationError(edge.parent, child, latest, edge.stamps[0],
                                         edge.stamps[-1])
        return latest

    def _compose(self, children: List[str], stamp: int) -> np.ndarray:
        """``T_{ancestor<-children[0]}`` from the edges listed bottom-up."""
        pose = np.eye(4)
        for child in children:
            translation, quat = self._edges[child].at(child, stamp)
            pose = make_pose(quat_xyzw_to_matrix(quat), translation) @ pose
        return pose

    def _warn(self, reason: str, detail: str) -> None:
        """Log a rejected transform, at most once per second per reason."""
        now = time.monotonic()
        if now - self._warned_at.get(reason, -1e9) >= 1.0:
            self._warned_at[reason] = now
            logger.warning("rejected transform %s: %s (%d so far)", detail, reason,
                           self._rejected[reason])


# ---------------------------------------------------------------------- message builders
def make_tf_message(transforms: Sequence[Any]) -> Any:
    """List of TransformStamped -> ``tf2_msgs.msg.TFMessage`` (imported lazily)."""
    from tf2_msgs.msg import TFMessage

    return TFMessage(transforms=list(transforms))
