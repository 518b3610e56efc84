"""The TF tree: one edge per child frame, its samples over time, and the rule for new edges.

* Storage: one edge per child frame (``parent -> child``, REP-105 tree), either *static*
  (``/tf_static``: one transform valid at all times) or *dynamic* (``/tf``: time-indexed samples,
  interpolated between (linear translation, slerp rotation); :class:`g2g_ros.tf_buffer.TFBuffer`
  keeps ``cache_duration_ns`` of them behind the newest sample of that edge).
* The tree stays a tree (:func:`tree_problem`); the rule for a child frame whose parent changes:

  - an edge that would close a loop (``base_link -> odom`` while ``odom -> base_link`` is
    stored) is rejected (``loop``), whatever its kind: a loop would break every lookup
    through those frames;
  - a dynamic edge never overrides a static one (``conflicts_with_static``);
  - a dynamic edge with another parent than the child's dynamic edge is a second parent
    (``second_parent``): rejected while the current parent is live (a sample received within
    ``reparent_after_s`` of wall time), accepted once it has gone quiet: then the latest
    parent wins, as in tf2, and the child starts a new edge (logged). One stray message can
    thus not take a frame from the publisher that keeps streaming it;
  - a static edge replaces the child's edge (static or dynamic, any parent: the latched
    calibration is the latest word), logged.

  A rejected edge leaves the tree as it was (the buffer counts and logs it).
* Errors: subclasses of :class:`TFError`: :class:`TFLookupError` (also a ``LookupError``) for an
  unknown frame, :class:`ConnectivityError` when the two frames are in different trees, and
  :class:`ExtrapolationError` naming the edge and its available time range.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Dict, List, Optional, Tuple

import numpy as np


class TFError(Exception):
    """Base class of every TF lookup / ingest error."""


class TFLookupError(TFError, LookupError):
    """A frame is unknown to the buffer."""


class ConnectivityError(TFLookupError):
    """Both frames exist but belong to different trees."""


class ExtrapolationError(TFError):
    """The requested stamp lies outside the data of an edge of the chain.

    Attributes: parent, child (the edge), stamp_ns (requested), earliest_ns, latest_ns.
    """

    def __init__(self, parent: str, child: str, stamp_ns: int, earliest_ns: int, latest_ns: int):
        self.parent, self.child = parent, child
        self.stamp_ns, self.earliest_ns, self.latest_ns = stamp_ns, earliest_ns, latest_ns
        where = "before" if stamp_ns < earliest_ns else "after"
        super().__init__(
            f"extrapolation {where} the data of {parent} -> {child}: requested "
            f"{fmt_ns(stamp_ns)}, available [{fmt_ns(earliest_ns)}, {fmt_ns(latest_ns)}]"
        )


def fmt_ns(stamp_ns: int) -> str:
    """A stamp in nanoseconds as ``"<s>.<ns> s"``."""
    return f"{stamp_ns // 10**9}.{stamp_ns % 10**9:09d} s"


def slerp_xyzw(q0: np.ndarray, q1: np.ndarray, ratio: float) -> np.ndarray:
    """Shortest-path spherical interpolation of unit quaternions ``[4]`` (x, y, z, w)."""
    q0 = np.asarray(q0, dtype=np.float64)
    q1 = np.asarray(q1, dtype=np.float64)
    dot = float(q0 @ q1)
    if dot < 0.0:  # q and -q are the same rotation: take the short way round
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly parallel: lerp is exact to ~1e-8 and avoids 0/0
        q = q0 + ratio * (q1 - q0)
    else:
        theta = np.arccos(dot)
        q = (np.sin((1.0 - ratio) * theta) * q0 + np.sin(ratio * theta) * q1) / np.sin(theta)
    return q / np.linalg.norm(q)


@dataclasses.dataclass
class Edge:
    """Transforms ``T_{parent<-child}`` over time; static edges hold exactly one sample."""

    parent: str
    static: bool
    received: float = 0.0  # wall time (monotonic) of the newest accepted sample
    stamps: List[int] = dataclasses.field(default_factory=list)
    translations: List[np.ndarray] = dataclasses.field(default_factory=list)
    quats: List[np.ndarray] = dataclasses.field(default_factory=list)

    def insert(self, stamp: int, translation: np.ndarray, quat: np.ndarray) -> None:
        if self.static:
            self.stamps, self.translations, self.quats = [stamp], [translation], [quat]
            return
        i = bisect.bisect_left(self.stamps, stamp)
        if i < len(self.stamps) and self.stamps[i] == stamp:  # same stamp: newest wins
            self.translations[i], self.quats[i] = translation, quat
            return
        self.stamps.insert(i, stamp)
        self.translations.insert(i, translation)
        self.quats.insert(i, quat)

    def prune(self, oldest_kept: int) -> None:
        cut = bisect.bisect_left(self.stamps, oldest_kept)
        if cut:
            del self.stamps[:cut], self.translations[:cut], self.quats[:cut]

    def at(self, child: str, stamp: int) -> Tuple[np.ndarray, np.ndarray]:
        """(translation [3], quaternion xyzw [4]) at ``stamp``; static edges ignore it."""
        if self.static:
            return self.translations[0], self.quats[0]
        first, last = self.stamps[0], self.stamps[-1]
        if not first <= stamp <= last:
            raise ExtrapolationError(self.parent, child, stamp, first, last)
        i = bisect.bisect_left(self.stamps, stamp)
        if self.stamps[i] == stamp:
            return self.translations[i], self.quats[i]
        t0, t1 = self.stamps[i - 1], self.stamps[i]
        ratio = (stamp - t0) / (t1 - t0)
        translation = (1.0 - ratio) * self.translations[i - 1] + ratio * self.translations[i]
        return translation, slerp_xyzw(self.quats[i - 1], self.quats[i], ratio)


def tree_problem(edges: Dict[str, Edge], parent: str, child: str, static: bool, received: float,
                 reparent_after_s: float) -> Tuple[Optional[str], str]:
    """``(reason, detail)`` when ``parent -> child`` (its sample received at wall time
    ``received``) breaks the tree rule of the module docstring, else ``(None, "")``."""
    edge = edges.get(child)
    if edge is not None and edge.parent == parent and edge.static == static:
        return None, ""  # the edge the child already has: nothing changes in the tree
    ancestors = path_to_root(edges, parent)
    if child in ancestors:
        cycle = " -> ".join(reversed([child] + ancestors[:ancestors.index(child) + 1]))
        return "loop", f" (would close the loop {cycle})"
    if edge is None or static:
        return None, ""
    if edge.static:
        return "conflicts_with_static", f" ({edge.parent} -> {child} is static)"
    quiet = received - edge.received
    if quiet < reparent_after_s:
        return "second_parent", (f" ({child} has parent {edge.parent}, last sample "
                                 f"{quiet:.2f} s ago)")
    return None, ""


def path_to_root(edges: Dict[str, Edge], frame: str) -> List[str]:
    """``frame`` and its ancestors up to the root of its tree."""
    path = [frame]
    while path[-1] in edges:
        path.append(edges[path[-1]].parent)
        if len(path) > len(edges) + 1:
            raise TFError(f"loop in the TF tree through {path[-4:]}")
    return path
