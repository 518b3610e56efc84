"""Settings, presets and outputs of the rig synchronizer (:mod:`g2g_ros.rig_sync`): what a user
configures (:class:`SyncConfig`, :data:`SYNC_PRESETS`) and what it hands back (:class:`RigGroup`,
:class:`SyncStats`). Pure Python."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

#: Reasons a message leaves a queue without being part of an emitted group.
DROP_REASONS = (
    "duplicate", "out_of_order", "late", "queue_overflow", "unmatched", "group_incomplete",
)


@dataclasses.dataclass(frozen=True)
class SyncConfig:
    """Synchronizer settings (see the module docstring for their exact meaning).

    slop_ns: max spread (max - min stamp) of a group; 0 = exact stamps.
    queue_size: messages kept per camera; the oldest is dropped beyond it.
    min_cameras: smallest group that is emitted; None = all cameras (no degraded groups).
    max_wait_ns: how long (stamp time) a slot waits for missing cameras; None = forever.
    min_interval_ns: lower bound on each camera's frame interval, lets groups with a lagging
        camera be emitted without waiting for its next frame; 0 = unknown.
    camera_timeout_ns: a camera silent for this long (stamp time) is not waited for any more;
        None = 2 * max_wait_ns.
    """

    slop_ns: int = 0
    queue_size: int = 10
    min_cameras: Optional[int] = None
    max_wait_ns: Optional[int] = 500_000_000
    min_interval_ns: int = 0
    camera_timeout_ns: Optional[int] = None


#: Named presets: ``exact`` for hardware-triggered rigs / simulators, ``approximate`` for
#: free-running 10 Hz cameras (slop 20 ms, no wait for the next frame when frames are >= 50 ms
#: apart), ``degraded`` additionally emits groups that miss one camera of a 5-camera rig.
SYNC_PRESETS: Dict[str, SyncConfig] = {
    "exact": SyncConfig(),
    "approximate": SyncConfig(slop_ns=20_000_000, min_interval_ns=50_000_000),
    "degraded": SyncConfig(slop_ns=20_000_000, min_interval_ns=50_000_000, min_cameras=4),
}


@dataclasses.dataclass(frozen=True)
class RigGroup:
    """One synchronized set of camera messages.

    stamp_ns: stamp of the first configured camera present in the group (the rig's reference
        camera when it is present).
    stamps_ns / messages: per camera name, only for the cameras present.
    missing: configured cameras absent from this (degraded) group, in configuration order.
    skew_ns: inter-camera skew, max - min member stamp.
    """

    stamp_ns: int
    stamps_ns: Mapping[str, int]
    messages: Mapping[str, Any]
    missing: Tuple[str, ...]
    skew_ns: int

    @property
    def complete(self) -> bool:
        return not self.missing


@dataclasses.dataclass(frozen=True)
class SyncStats:
    """Counters snapshot; all counts since construction (``reset`` keeps them).

    received: every ``add`` call per camera, rejected ones included.
    dropped: per camera and reason (:data:`DROP_REASONS`), messages that left without a group.
    grouped: per camera, messages that left in an emitted group (a degraded group has fewer
    cameras than ``groups_emitted`` counts groups).
    """

    received: Dict[str, int]
    dropped: Dict[str, Dict[str, int]]
    queued: Dict[str, int]
    grouped: Dict[str, int]
    groups_emitted: int
    groups_degraded: int
    groups_dropped: int
    callback_errors: int
    last_skew_ns: Optional[int]
    max_skew_ns: Optional[int]
    mean_skew_ns: Optional[float]

    def dropped_total(self, camera: str) -> int:
        return sum(self.dropped[camera].values())
