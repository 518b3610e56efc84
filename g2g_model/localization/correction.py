"""Relocalization corrections: the query window buffer and the gate.

Group B is the last W frames of the robot (one camera, with odometry poses odom_T_cam at each
image stamp); group A is a window of W map frames (map_T_cam). G2G gives estimates of T_{A0<-B0}
(every frame of B, and of A when both directions ran) and their fusion, its answer
(``Prediction.a0_T_b0``); the gate checks their spread about it
(:func:`g2g_model.geometry.estimate_spread`) and the relocalizer carries the answer into the
correction

    map_T_odom = map_T_A0 @ T_{A0<-B0} @ inv(odom_T_B0).

The gate accepts a correction only if it is consistent: the first fix (and any fix that jumps
by more than the limits from the current one) needs ``consistency_count`` consecutive
candidates that agree with each other within the jump limits (the newest of them is
published where all are geometric, their fusion otherwise). With ``geometric_fix`` only
geometric candidates (``verified`` / ``refined``) move the correction: a G2G-only candidate is
reported (the decision says so) and never published. Consistency alone does not catch G2G away
from the map: a query window slides a little between localizations, the same map window is
chosen and G2G answers about the same wrong pose each time; and G2G tracking itself can walk
away, step by step within the limits, because the current correction steers the window search
(measured, docs/VERIFICATION.md: queries from other scenes and noise images got G2G-only fixes
4-10 m off; verifying with one camera only, a query of the mapped scene walked to 7 m off; on a
real kitchen sequence 4 of the 6 fixes off by more than 0.5 m or 5 deg were G2G's).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Tuple

import numpy as np

from g2g_model.geometry import fuse_poses, relative_pose, rotation_angle_deg
from g2g_model.estimation.groups import Group
from g2g_model.localization.verification import PATH_G2G


@dataclass
class QueryFrame:
    stamp_ns: int
    image: np.ndarray          # RGB uint8 [H, W, 3]
    intrinsics: np.ndarray     # [3, 3]
    odom_T_cam: np.ndarray     # [4, 4] odometry pose of the camera at the image stamp


class QueryBuffer:
    """The last ``window`` query frames, spaced by at least a minimum motion.

    Frames closer than ``min_translation_m`` and ``min_rotation_deg`` to the newest buffered
    frame are skipped (a standing robot gives no new geometry). Stamps must increase.
    """

    def __init__(self, window: int, min_translation_m: float = 0.1,
                 min_rotation_deg: float = 5.0):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.min_translation_m = min_translation_m
        self.min_rotation_deg = min_rotation_deg
        self.frames: Deque[QueryFrame] = collections.deque(maxlen=window)
        self.skipped = 0

    def add(self, frame: QueryFrame) -> bool:
        """Buffer a frame; returns False when it was skipped (too little motion)."""
        if not np.all(np.isfinite(frame.odom_T_cam)):
            raise ValueError(f"query frame at {frame.stamp_ns} ns has a non-finite odometry pose")
        if self.frames:
            last = self.frames[-1]
            if frame.stamp_ns <= last.stamp_ns:
                raise ValueError(f"query stamp {frame.stamp_ns} ns is not after the last "
                                 f"buffered stamp {last.stamp_ns} ns")
            rel = relative_pose(last.odom_T_cam, frame.odom_T_cam)
            if (np.linalg.norm(rel[:3, 3]) < self.min_translation_m
                    and rotation_angle_deg(rel[:3, :3]) < self.min_rotation_deg):
                self.skipped += 1
                return False
        self.frames.append(frame)
        return True

    def full(self) -> bool:
        return len(self.frames) == self.window

    def clear(self) -> None:
        self.frames.clear()

    def group(self) -> Group:
        frames = list(self.frames)
        return Group(images=[f.image for f in frames],
                     intrinsics=np.stack([f.intrinsics for f in frames]),
                     cam_to_world=np.stack([f.odom_T_cam for f in frames]),
                     stamps=[f.stamp_ns for f in frames])


@dataclass
class GateConfig:
    max_jump_translation_m: float = 1.0
    max_jump_rotation_deg: float = 10.0
    consistency_count: int = 2
    min_overlap_score: float = 0.0
    max_fusion_spread_m: float = 1.0
    # A fix made by geometry (verified / refined) is not replaced by G2G-only candidates for up
    # to this many consecutive localizations: their errors are metres where the geometry's are
    # millimetres (docs/VERIFICATION.md). After that G2G may re-localize (e.g. a robot moved
    # where the images no longer match the map).
    geometric_hold: int = 5
    # Only a geometric candidate moves the correction; G2G-only ones are reported, never
    # published (module docstring). Off by default here, since without a verifier every
    # candidate is G2G's; the node turns it on when it verifies (fix_needs_geometry).
    geometric_fix: bool = False

    def validate(self) -> "GateConfig":
        if self.geometric_hold < 0:
            raise ValueError(f"geometric_hold must be >= 0, got {self.geometric_hold}")
        if self.consistency_count < 1:
            raise ValueError(f"consistency_count must be >= 1, got {self.consistency_count}")
        if self.max_jump_translation_m <= 0 or self.max_jump_rotation_deg <= 0:
            raise ValueError("jump limits must be positive")
        return self


@dataclass
class Candidate:
    """A map->odom correction offered to the gate.

    ``path`` (``"g2g"``, ``"verified"``, ``"refined"``), ``inliers`` and the 6x6 ``covariance``
    say how it was made (:mod:`g2g_model.localization.verification`): a G2G-only candidate does
    not replace a geometric fix (``GateConfig.geometric_hold``)."""

    map_T_odom: np.ndarray
    stamp_ns: int
    overlap_score: float
    spread_m: float
    t_a0_bj: np.ndarray = field(repr=False, default=None)
    path: str = PATH_G2G
    inliers: int = 0
    covariance: Optional[np.ndarray] = field(repr=False, default=None)


@dataclass
class GateDecision:
    accepted: bool
    reason: str
    candidate: Optional[Candidate] = None


def pose_jump(a: np.ndarray, b: np.ndarray) -> Tuple[float, float]:
    rel = relative_pose(a, b)
    return float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))


class CorrectionGate:
    """Decides whether a candidate map->odom correction is published (see module docstring)."""

    def __init__(self, config: GateConfig):
        self.config = config.validate()
        self.current: Optional[np.ndarray] = None
        self.current_path = PATH_G2G
        self.held = 0  # consecutive G2G-only candidates held off by a geometric fix
        self.pending: List[Candidate] = []
        self.rejected = 0
        self.accepted = 0

    def reset(self) -> None:
        self.current = None
        self.current_path = PATH_G2G
        self.held = 0
        self.pending = []

    def set_current(self, map_T_odom: np.ndarray) -> None:
        self.current = np.asarray(map_T_odom, float)
        self.current_path = PATH_G2G
        self.held = 0
        self.pending = []

    def _accept(self, map_T_odom: np.ndarray, cand: Candidate, why: str) -> GateDecision:
        self.current = map_T_odom
        self.current_path = cand.path
        self.held = 0
        self.pending = []
        self.accepted += 1
        return GateDecision(True, why, cand)

    def _within(self, a: np.ndarray, b: np.ndarray) -> bool:
        dt, dr = pose_jump(a, b)
        return dt <= self.config.max_jump_translation_m and dr <= self.config.max_jump_rotation_deg

    def _settled(self) -> np.ndarray:
        """The correction that ``pending``'s consistent candidates make: the newest where all
        are geometric (each good to millimetres or centimetres, while the odometry drifts
        between them: the earlier ones confirm it, averaging them in would pull the fix back
        to where the odometry was), else their fusion (G2G's errors are decimetres, and
        independent)."""
        if all(c.path != PATH_G2G for c in self.pending):
            return self.pending[-1].map_T_odom
        return fuse_poses([c.map_T_odom for c in self.pending])

    def offer(self, cand: Candidate) -> GateDecision:
        cfg = self.config
        if not np.all(np.isfinite(cand.map_T_odom)):
            self.rejected += 1
            return GateDecision(False, "non-finite correction", cand)
        if cand.overlap_score < cfg.min_overlap_score:
            self.rejected += 1
            return GateDecision(False, f"overlap score {cand.overlap_score:.2f} < "
                                f"min_overlap_score {cfg.min_overlap_score:.2f}", cand)
        if cand.spread_m > cfg.max_fusion_spread_m:
            self.rejected += 1
            return GateDecision(False, f"per-frame estimates disagree by {cand.spread_m:.2f} m",
                                cand)
        if cfg.geometric_fix and cand.path == PATH_G2G:
            self.rejected += 1
            where = "" if self.current is None else " ({:.2f} m / {:.1f} deg from the current " \
                "correction)".format(*pose_jump(self.current, cand.map_T_odom))
            return GateDecision(False, f"G2G alone{where} is reported, not published "
                                "(fix_needs_geometry: only a verified or refined candidate "
                                "moves the correction)", cand)
        if (self.current is not None and cand.path == PATH_G2G
                and self.current_path != PATH_G2G and self.held < cfg.geometric_hold):
            self.held += 1
            self.rejected += 1
            dt, dr = pose_jump(self.current, cand.map_T_odom)
            return GateDecision(False, f"G2G alone ({dt:.2f} m / {dr:.1f} deg from the current "
                                f"correction) does not replace a {self.current_path} fix "
                                f"({self.held}/{cfg.geometric_hold})", cand)
        if self.current is not None and self._within(self.current, cand.map_T_odom):
            return self._accept(cand.map_T_odom, cand, "consistent with the current correction")
        # First fix, or a jump: require consistency_count mutually consistent candidates.
        if self.pending and not self._within(self.pending[-1].map_T_odom, cand.map_T_odom):
            self.pending = []
        self.pending.append(cand)
        if len(self.pending) >= cfg.consistency_count:
            return self._accept(self._settled(), cand,
                                "first fix" if self.accepted == 0 else
                                "re-localized after a jump")
        self.rejected += 1
        if self.current is None:
            why = f"waiting for {cfg.consistency_count} consistent candidates " \
                  f"({len(self.pending)} so far)"
        else:
            dt, dr = pose_jump(self.current, cand.map_T_odom)
            why = (f"jump of {dt:.2f} m / {dr:.1f} deg exceeds the limits "
                   f"({cfg.max_jump_translation_m} m / {cfg.max_jump_rotation_deg} deg); "
                   f"{len(self.pending)}/{cfg.consistency_count} consistent candidates")
        return GateDecision(False, why, cand)
