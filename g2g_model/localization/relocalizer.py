"""Relocalization against a stored map, without ROS: the engine of the relocalize node.

:class:`Relocalizer` keeps the query window (:class:`~g2g_model.localization.correction.
QueryBuffer`), the map (prepared by a :class:`~g2g_model.localization.window_selector.
WindowSelector`) and the correction gate. One :meth:`Relocalizer.localize`:

1. picks the map window (around a hint, else by the selector's scorer);
2. runs G2G on (map window, query window): ``T_{A0<-Bj}`` for every query frame;
3. optionally verifies it geometrically: ``verifier(group_a, query, map_T_b)``, the query
   window given newest instant first (:func:`newest_first`) and ``map_T_b`` G2G's estimate of
   each of its cameras in the map frame, returns a
   :class:`~g2g_model.localization.verification.Verification`; on its ``verified`` /
   ``refined`` paths the correction is its pose of the newest frame composed with that frame's
   inverse odometry pose (the fix holds at the window's newest instant), otherwise the fusion
   of G2G's per-frame estimates (anchored at B0);
4. offers the correction to the gate, with its path, inliers and covariance.

The result (:class:`LocalizationResult`) says what happened; the node publishes it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import numpy as np

from g2g_model.geometry import estimate_spread, invert_pose
from g2g_model.estimation.groups import Group
from g2g_model.localization.correction import (Candidate, CorrectionGate, GateConfig,
                                               QueryBuffer, QueryFrame)
from g2g_model.localization.rig_views import RigViews, map_rig_window, rig_group
from g2g_model.localization.verification import (G2G_COVARIANCE, PATH_G2G, PATH_REFINED,
                                                 PATH_VERIFIED, Verification)
from g2g_model.localization.window_selector import WindowSelector
from g2g_model.maps.format import G2GMap, load_map
from g2g_model.maps.windows import nearest_window

# verifier(group_a, query, map_T_b [W, 4, 4]) -> Verification
# (a verifier may take a keyword ``view_prior``: the query cameras' poses from the current
# geometric fix while tracking; see StructureVerifier)
Verifier = Callable[..., Verification]


@dataclass
class LocalizationResult:
    """Outcome of one :meth:`Relocalizer.localize`.

    Attributes:
        accepted: whether the gate accepted the correction (it is then the current one).
        message: what happened (``accepted: ...`` / ``rejected: ...``, or why nothing ran).
        window_index, score, how: the map window chosen (:class:`~g2g_model.localization.
            window_selector.Selection`); score NaN when it is not an estimated overlap.
        prediction: G2G's :class:`~g2g_model.estimation.pipeline.Prediction`.
        map_T_odom: the candidate correction offered to the gate.
        current: the gate's correction after the decision (None before a first fix).
        path: ``g2g``, ``verified`` or ``refined``; inliers: geometric inliers (0 for g2g).
        covariance: ``[6, 6]`` covariance of the query camera's pose in the map at
            ``fix_frame``: the verification's on its verified / refined paths,
            :data:`G2G_COVARIANCE` on g2g.
        fix_frame: the query frame (index into ``query``) at whose instant the correction is
            solved and the fix is published: the window's newest on the verified / refined
            paths (:func:`newest_first`), its first (G2G's anchor B0) on g2g.
        verification_reason: why the verifier chose its path ("" without a verifier).
        verified_frames: frames of the query group the verifier got (the query window plus the
            rig's other cameras at its instants; 0 without a verifier).
        verified_window: the map window whose geometry the verifier used: ``window_index``,
            or the second window tried when the first gave none (``second_window``); None
            without a verifier.
        query, group_a: the query and map groups used; map_id, camera: the map's id and the
            camera of the map window (a map loaded since does not rename them).
        timing_ms: ``select``, ``g2g``, ``verify``, ``total``.
    """

    accepted: bool
    message: str
    window_index: Optional[int] = None
    score: float = float("nan")
    how: str = ""
    prediction: object = field(default=None, repr=False)
    map_T_odom: Optional[np.ndarray] = field(default=None, repr=False)
    current: Optional[np.ndarray] = field(default=None, repr=False)
    path: str = PATH_G2G
    inliers: int = 0
    covariance: np.ndarray = field(default_factory=lambda: G2G_COVARIANCE.copy(), repr=False)
    verification_reason: str = ""
    verified_frames: int = 0
    verified_window: Optional[int] = None
    fix_frame: int = 0
    query: Optional[Group] = field(default=None, repr=False)
    group_a: Optional[Group] = field(default=None, repr=False)
    map_id: str = ""
    camera: str = ""
    timing_ms: Dict[str, float] = field(default_factory=dict)


class Relocalizer:
    """Query window + map + window selection + G2G + verification + gate (module docstring).

    Args:
        pipeline: a :class:`~g2g_model.estimation.pipeline.G2GPipeline` (``predict``,
            ``backbone_id``).
        selector: the window selector (its configuration's ``window_size`` is W).
        gate: the correction gate's configuration.
        min_translation_m, min_rotation_deg: the query window's frame spacing.
        verifier: optional geometric verification (:data:`Verifier`).
        views: the rig's other cameras (:class:`RigViews`): the verifier then gets every
            camera of the query instants and of the map window's instants, not only the
            relocalization camera's frames.
        second_window: when the map window gives no geometric pose, verify once more against
            the window nearest to where G2G places the query that shares no keyframe with the
            first (a window looking at a blank wall, or at what the query does not see, is
            not the only one near the query).

    Thread-safe: frames, hints and resets may come from other threads than localizations.
    """

    def __init__(self, pipeline, selector: WindowSelector, gate: GateConfig,
                 min_translation_m: float = 0.1, min_rotation_deg: float = 5.0,
                 verifier: Optional[Verifier] = None, views: Optional[RigViews] = None,
                 second_window: bool = False):
        self.pipeline = pipeline
        self.selector = selector
        self.window_size = selector.config.window_size
        max_frames = getattr(pipeline, "max_frames", None)
        if max_frames is not None and self.window_size > max_frames:
            raise ValueError(f"window_size {self.window_size} exceeds the model's max_frames "
                             f"{max_frames}")
        self.gate = CorrectionGate(gate)
        self.buffer = QueryBuffer(self.window_size, min_translation_m, min_rotation_deg)
        self.verifier = verifier
        self.views = views
        self.second_window = bool(second_window)
        self.lock = threading.Lock()
        self.map_path = ""
        self.hint: Optional[np.ndarray] = None  # provisional map->odom (e.g. /initialpose)
        self.last: Optional[LocalizationResult] = None
        self._localized_stamp: Optional[int] = None  # newest query stamp of the last run
        # Bumped by reset() and by a new map: a localization that started before is not offered
        # to the gate (its correction belongs to the state that was cleared, or another map).
        self._epoch = 0

    # ------------------------------------------------------------------ state
    @property
    def gmap(self) -> Optional[G2GMap]:
        prepared = self.selector.prepared
        return None if prepared is None else prepared.gmap

    @property
    def current(self) -> Optional[np.ndarray]:
        return self.gate.current

    def load_map(self, path: str) -> str:
        """Load and prepare a map file, then use it (the gate is reset: a new map has its own
        frame). Raises ``MapError`` / ``ValueError`` saying what is wrong; the previous map is
        then kept."""
        gmap = load_map(path, expect_backbone=self.pipeline.backbone_id())
        return self.use_map(gmap, path)

    def use_map(self, gmap: G2GMap, path: str = "") -> str:
        """Prepare an in-memory map and use it (see :meth:`load_map`)."""
        prepared = self.selector.describe_map(gmap, f"map {path}" if path else "map")
        with self.lock:
            self.selector.prepared = prepared
            self.map_path = path
            self.gate.reset()
            self._epoch += 1
        unsealed = "" if gmap.sealed else (f" (no header checksum: add it with "
                                           f"`g2g-map reseal {path}`)")
        return f"loaded map {path}: {len(gmap)} frames, {len(prepared.windows)} windows{unsealed}"

    def add_frame(self, frame: QueryFrame) -> bool:
        """Buffer a query frame (False: skipped, too little motion); ``ValueError`` for a
        non-finite pose or a stamp that is not after the last one."""
        with self.lock:
            added = self.buffer.add(frame)
            stamps = [f.stamp_ns for f in self.buffer.frames]
        if self.views is not None:  # views of instants no longer in the window are dropped
            self.views.retain(stamps)
        return added

    def set_hint(self, map_T_odom: Optional[np.ndarray]) -> None:
        """A provisional map->odom (e.g. from an initial pose) that guides the search until a
        fix."""
        with self.lock:
            self.hint = None if map_T_odom is None else np.asarray(map_T_odom, float)

    def forget_query(self) -> None:
        """Forget the query window and the rig views (time-keyed); keep map and correction."""
        with self.lock:
            self.buffer.clear()
        if self.views is not None:
            self.views.clear()

    def reset(self) -> None:
        """Forget the correction, the query window and the hint (the map is kept)."""
        with self.lock:
            self.gate.reset()
            self.buffer.clear()
            self.hint = None
            self._epoch += 1
        if self.views is not None:
            self.views.clear()

    def ready(self, new_frames: bool = False) -> bool:
        """A map and a full query window (``new_frames``: one that changed since the last
        localization, so quiet cameras or an ended bag do not repeat the same answer)."""
        if self.gmap is None or not self.buffer.full():
            return False
        return not new_frames or self.buffer.frames[-1].stamp_ns != self._localized_stamp

    def tracking_hint(self) -> Optional[np.ndarray]:
        """Where to search, as the newest query camera's pose in the map: from the current
        correction once localized (tracking), from the provisional hint before that, None
        otherwise (global search)."""
        with self.lock:
            map_T_odom = self.gate.current if self.gate.current is not None else self.hint
            last = self.buffer.frames[-1] if self.buffer.frames else None
        if map_T_odom is None or last is None:
            return None
        return map_T_odom @ last.odom_T_cam

    # ------------------------------------------------------------------ one localization
    def localize(self, hint: Optional[np.ndarray] = None) -> LocalizationResult:
        """One relocalization (module docstring). ``hint``: the query camera's pose in the map
        (:meth:`tracking_hint`), or None. Raises what the model, the selector or the verifier
        raise (e.g. ``ValueError`` for a map without cached features)."""
        t0 = time.perf_counter()
        with self.lock:
            prepared = self.selector.prepared
            if prepared is None:
                return self._done(LocalizationResult(False, "no map loaded (call ~/load_map)"))
            if not self.buffer.full():
                return self._done(LocalizationResult(
                    False, f"query window not full ({len(self.buffer.frames)}/"
                    f"{self.buffer.window} frames)"))
            query = self.buffer.group()
            self._localized_stamp = int(query.stamps[-1])
            epoch = self._epoch
        idx, score, how = self.selector.select(query, hint, prepared=prepared)[:3]
        t1 = time.perf_counter()
        gmap = prepared.gmap
        frames = [gmap.frames[i] for i in prepared.windows[idx]]
        group_a = Group(images=prepared.images.images(prepared.windows[idx]),
                        intrinsics=np.stack([f.intrinsics for f in frames]),
                        cam_to_world=np.stack([f.world_T_cam for f in frames]),
                        stamps=[f.stamp_ns for f in frames])
        pred = self.pipeline.predict(group_a, query)
        t2 = time.perf_counter()
        odom_T_b = np.asarray(query.cam_to_world)
        # Every estimate of T_{A0<-B0} (each frame, each direction): their spread about G2G's
        # answer (B0's position in A0's frame) is the gate's consistency check; the answer
        # gives map->odom.
        a0_T_b0 = pred.a0_T_b0
        spread = estimate_spread(a0_T_b0, pred.b0_estimates)
        map_T_odom = group_a.cam_to_world[0] @ a0_T_b0 @ invert_pose(odom_T_b[0])
        result = LocalizationResult(False, "", idx, score, how, pred, query=query,
                                    group_a=group_a, map_id=gmap.map_id,
                                    camera=frames[0].camera)
        if self.verifier is not None:
            verify_a = map_rig_window(gmap, prepared.windows[idx], prepared.images)
            verify_b = rig_group(newest_first(query), self.views)
            # G2G's correction carried to every view through the odometry (the verifier uses
            # the group's relative poses).
            map_T_b = map_T_odom @ np.asarray(verify_b.cam_to_world)
            with self.lock:  # tracking a geometric fix: an accurate prior of the views
                current, current_path = self.gate.current, self.gate.current_path
            view_prior = (current @ np.asarray(verify_b.cam_to_world) if current is not None
                          and current_path in (PATH_VERIFIED, PATH_REFINED) else None)
            verification = self._verify(verify_a, verify_b, map_T_b, view_prior)
            result.verified_window = idx
            if verification.path == PATH_G2G and self.second_window:
                other = nearest_window(gmap, prepared.windows, map_T_b[0][:3, 3],
                                       direction=map_T_b[0][:3, 2],
                                       disjoint_from=prepared.windows[idx])
                if other is not None:
                    other_a = map_rig_window(gmap, prepared.windows[other], prepared.images)
                    again = self._verify(other_a, verify_b, map_T_b, view_prior)
                    if again.path != PATH_G2G:
                        verification, result.verified_window = again, other
                        verification.reason += f" (second window {other})"
                    else:
                        verification.reason += f"; second window {other}: {again.reason}"
            result.path, result.verification_reason = verification.path, verification.reason
            result.verified_frames = len(verify_b.images)
            if verification.path in (PATH_VERIFIED, PATH_REFINED):
                result.inliers = int(verification.inliers)
                result.covariance = np.asarray(verification.covariance, float)
                # One rigid pose for the whole query group: no per-frame spread. The verifier's
                # anchor is the window's newest instant: the correction holds there.
                map_T_odom = (np.asarray(verification.map_T_b0, float)
                              @ invert_pose(np.asarray(verify_b.cam_to_world)[0]))
                result.fix_frame = len(query.images) - 1
                spread = 0.0
        t3 = time.perf_counter()
        result.map_T_odom = map_T_odom
        # A score that is not an estimated overlap (NaN) passes min_overlap_score.
        cand = Candidate(map_T_odom, int(query.stamps[result.fix_frame]),
                         score if np.isfinite(score) else 1.0,
                         spread, pred.poses_b, result.path, result.inliers, result.covariance)
        with self.lock:
            stale = epoch != self._epoch
            decision = None if stale else self.gate.offer(cand)
            result.current = self.gate.current
        result.accepted = decision is not None and decision.accepted
        reason = ("discarded: the engine was reset or given another map while this "
                  "localization ran" if stale else decision.reason)
        result.message = (f"{'accepted' if result.accepted else 'rejected'}: "
                          f"{reason} (window {idx} by {how}"
                          + (f", score {score:.2f}" if np.isfinite(score) else "")
                          + (f", path {result.path}, {result.inliers} inliers"
                             if self.verifier is not None else "")
                          + (f", geometry of window {result.verified_window}"
                             if result.verified_window not in (None, idx) else "") + ")"
                          + (f"; verification: {result.verification_reason}"
                             if result.path == PATH_G2G and result.verification_reason else "")
                          + rotation_note(pred.rotation_match))
        result.timing_ms = {"select": 1e3 * (t1 - t0), "g2g": 1e3 * (t2 - t1),
                            "verify": 1e3 * (t3 - t2), "total": 1e3 * (time.perf_counter() - t0)}
        return self._done(result)

    def _verify(self, group_a: Group, query: Group, map_T_b: np.ndarray,
                view_prior: Optional[np.ndarray] = None) -> Verification:
        """The verifier's answer; a failure or an unusable answer falls back to G2G with the
        reason."""
        try:
            extra = {} if view_prior is None else {"view_prior": view_prior}
            verification = self.verifier(group_a, query, map_T_b, **extra)
        except Exception as exc:  # a verifier bug must not stop relocalization
            return Verification(PATH_G2G, map_T_b[0], G2G_COVARIANCE.copy(), 0,
                                f"verification failed: {type(exc).__name__}: {exc}")
        if verification.path not in (PATH_G2G, PATH_VERIFIED, PATH_REFINED):
            return Verification(PATH_G2G, map_T_b[0], G2G_COVARIANCE.copy(), 0,
                                f"verifier returned an unknown path {verification.path!r}")
        pose = np.asarray(verification.map_T_b0, float)
        cov = np.asarray(verification.covariance, float)
        if verification.path != PATH_G2G and (pose.shape != (4, 4)
                                              or not np.all(np.isfinite(pose))):
            return Verification(PATH_G2G, map_T_b[0], G2G_COVARIANCE.copy(), 0,
                                "verifier returned a non-finite or malformed pose")
        if cov.shape != (6, 6) or not np.all(np.isfinite(cov)):
            return Verification(PATH_G2G, map_T_b[0], G2G_COVARIANCE.copy(), 0,
                                "verifier returned a non-finite or malformed covariance")
        return verification

    def _done(self, result: LocalizationResult) -> LocalizationResult:
        self.last = result
        return result


def pose_source(match) -> str:
    """Where the pose of G2G's answer came from (``Prediction.rotation_match``), for the result
    message and the node's diagnostics."""
    if match is None:
        return "G2G (feature matching off)"
    if match.rotation is None:
        return f"G2G ({match.reason})"
    if match.parallax:
        return (f"feature matches solved with parallax ({match.inliers} of {match.matches} "
                "near their epipolar planes)")
    return f"feature matches ({match.inliers} of {match.matches} agree with one rotation)"


def rotation_note(match) -> str:
    """:func:`pose_source` for the result message (empty when the pipeline does not match)."""
    return "" if match is None else "; pose from " + pose_source(match)


def newest_first(query: Group) -> Group:
    """The query window with its newest instant first: the verifier solves the window as one
    rigid group anchored at its first frame (and refines near it, ``verify_window_span_m``), so
    given the window so, the correction it gives holds at the window's newest instant, the one
    nearest the present. Anchored at the oldest instant instead, the odometry's drift inside
    the window lies between the fix and the robot: on the real TUM replay with the demo's drift
    (2 %/m, 1 deg/m; 2.2 m windows) the correction so anchored was 0.05 m / 2.1 deg off at the
    window's newest instant for a fix 0.035 m / 0.44 deg off at its first (2026-11-30)."""
    k = np.asarray(query.intrinsics)
    return Group(images=list(query.images)[::-1], intrinsics=k[::-1] if k.ndim == 3 else k,
                 cam_to_world=np.asarray(query.cam_to_world)[::-1],
                 stamps=None if query.stamps is None else list(query.stamps)[::-1])
