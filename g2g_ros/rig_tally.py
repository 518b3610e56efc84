"""What became of rig odometry's groups and steps: the counts ``~/status`` and
``/diagnostics`` report (:mod:`g2g_ros.rig_status`) and the outcome each group gets on
``~/processed``."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Dict


@dataclass
class RigTally:
    """Every synchronized group ends once: processed (deferred ones among them), skipped by
    ``keyframe_stride``, or dropped (counted by the node, by reason)."""

    groups_processed: int = 0
    groups_skipped: int = 0
    groups_deferred: int = 0  # published with G2G's motion, verification deferred
    steps_by_path: Dict[str, int] = field(default_factory=collections.Counter)
    steps_by_geometry: Dict[str, int] = field(default_factory=collections.Counter)
    # Of the g2g steps, those with the geometry's rotation and direction and G2G's length
    # (straight motion, a one-camera rig).
    steps_length_from_g2g: int = 0
    last_step: str = ""  # path, inliers and reason of the last keyframe step

    def skipped(self) -> str:
        self.groups_skipped += 1
        return "skipped: keyframe_stride"

    def processed(self, update) -> str:
        """Count one published :class:`~g2g_ros.odometry_core.OdometryUpdate`; its outcome."""
        self.groups_processed += 1
        if update.deferred:
            self.groups_deferred += 1
        elif not update.is_initial:
            self.steps_by_path[update.path] += 1
            # The geometry of a verified / refined step; a g2g step with a geometry has its
            # rotation (and direction, save a mirrored relative pose) with G2G's length (its
            # reason says so).
            if update.method and update.path == "g2g":
                self.steps_length_from_g2g += 1
            elif update.method:
                self.steps_by_geometry[update.method] += 1
            self.last_step = f"{update.path}, {update.inliers} inliers" + (
                f": {update.reason}" if update.reason else "")
        return f"processed: {update.path}" + (" (deferred)" if update.deferred else "")
