"""Rig odometry without ROS: spatial groups at t_prev and t -> body motion -> composed odometry.

Group A is the rig at the previous keyframe, group B the rig now; each group's intra-group
geometry comes from the rig extrinsics (base_T_cam). G2G gives its answer T_{A0<-B0}
(``Prediction.a0_T_b0``) and the estimates behind it, one per camera of B (each camera's
prediction carried through the rig extrinsics), and one per camera of A when the model also ran
with the groups exchanged (``Prediction.b0_estimates``). Their spread about the answer is the
consistency check; the answer gives the body motion

    base_prev_T_base_now = base_T_camA0 @ T_{A0<-B0} @ inv(base_T_camB0).

The motion is composed onto the odometry pose; the twist is the motion over the elapsed time,
in base_link.

With a geometric verifier, a step may be deferred when the caller is falling behind (``defer``
says why): G2G's motion from the last keyframe is published at once (G2G's step covariance),
but the group does not become a keyframe, so the next group is verified against the same
keyframe and the composed odometry holds only verified steps (or steps whose verification
found no trustworthy geometry). At most ``max_deferred`` groups in a row are deferred.
A group in which the verifier sees no motion at all (``MotionVerification.stationary``: a
parked robot, where the geometry has no parallax to solve) gives the identity motion and does
not become a keyframe either, so a slow creep adds up against the old keyframe until it shows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import estimate_spread, invert_pose, rotation_angle_deg
from g2g_model.estimation.groups import Group
from g2g_model.localization.local_features import per_frame_intrinsics

LOG = logging.getLogger(__name__)

# estimate(group_a, group_b) -> (T_{A0<-B0} [4, 4], its estimates [K, 4, 4], K >= 1)
EstimateFn = Callable[[Group, Group], Tuple[np.ndarray, np.ndarray]]


@dataclass
class RigFrames:
    """One synchronized observation of the rig.

    Attributes:
        stamp_ns: the group's stamp (the earliest camera stamp, or the sync pivot).
        cameras: camera names present, in rig order.
        images: RGB ``uint8 [H, W, 3]`` per camera.
        intrinsics: ``[N, 3, 3]`` per camera.
    """

    stamp_ns: int
    cameras: List[str]
    images: List[np.ndarray]
    intrinsics: np.ndarray


@dataclass
class OdometryUpdate:
    stamp_ns: int
    odom_T_base: np.ndarray           # [4, 4]
    delta: np.ndarray                 # base_keyframe_T_base_now [4, 4] (the previous keyframe)
    linear_velocity: np.ndarray       # [3] m/s in base_link
    angular_velocity: np.ndarray      # [3] rad/s in base_link
    covariance: np.ndarray            # [6, 6] pose covariance (x y z roll pitch yaw)
    spread_m: float                   # disagreement of the motion estimates (m, see max_spread_m)
    cameras: List[str] = field(default_factory=list)
    is_initial: bool = False
    path: str = "g2g"                 # what made the motion: g2g, verified or refined
    inliers: int = 0                  # geometric inliers (verified / refined)
    reason: str = ""                  # why this path
    deferred: bool = False            # G2G's motion from the last keyframe, not a keyframe
    stationary: bool = False          # the images did not move: identity, the keyframe kept
    method: str = ""                  # which geometry made a verified / refined motion
    #                                   (MotionVerification.method: relative, keyframe map, ...)


def rotation_vector(rotation: np.ndarray) -> np.ndarray:
    """Log map of SO(3): axis * angle (radians)."""
    angle = np.radians(rotation_angle_deg(rotation))
    if angle < 1e-9:
        return np.zeros(3)
    w = np.array([rotation[2, 1] - rotation[1, 2], rotation[0, 2] - rotation[2, 0],
                  rotation[1, 0] - rotation[0, 1]])
    if np.pi - angle < 1e-6:
        # Near pi the antisymmetric part vanishes: magnitudes from the diagonal, signs from the
        # symmetric off-diagonal terms relative to the largest component.
        axis = np.sqrt(np.maximum((np.diag(rotation) + 1.0) / 2.0, 0.0))
        k = int(np.argmax(axis))
        for i in range(3):
            if i != k and rotation[i, k] + rotation[k, i] < 0:
                axis[i] = -axis[i]
        return axis / np.linalg.norm(axis) * angle
    return w / (2.0 * np.sin(angle)) * angle


class RigOdometry:
    """Composes G2G rig-to-rig motion estimates into odometry.

    Args:
        estimate: the G2G call, see :data:`EstimateFn`.
        base_T_cam: rig extrinsics per camera name.
        keyframe_stride: use every k-th synchronized group (1 = every group).
        step_covariance: per-step pose variance added to the covariance (x y z roll pitch yaw).
        max_spread_m: a step taken from G2G (no verifier, verification deferred or fallen
            back) whose estimates put camera B0 further than this from the answer is rejected;
            a step the verifier verified or refined is not.
        verifier: optional geometric verification of each motion, ``verifier(group_prev,
            group_now, delta) -> MotionVerification``; a verifier with a true ``takes_before``
            also gets ``before=(group, step)``: the keyframe before the previous one and the
            step from it, when the geometry measured that step's length, two geometries did
            not dispute it, and ``defer`` does not say the caller is behind
            (:class:`g2g_model.localization.rig_motion.RigMotionVerifier`); its motion and
            covariance replace G2G's when it verifies or refines.
        defer: optional ``defer() -> reason or None``, asked before each verification: a
            reason defers the step (see the module docstring).
        max_deferred: at most this many groups in a row are deferred (0: never).
        window: optional :class:`~g2g_model.localization.rig_window.KeyframeWindow`: after
            each verified keyframe step the last keyframes and the points they share are
            refined together and the newest keyframe's pose (and covariance) is the refined
            one; a step without geometry starts a new window.
    """

    def __init__(self, estimate: EstimateFn, base_T_cam: Dict[str, np.ndarray],
                 keyframe_stride: int = 1, step_covariance: Sequence[float] = (
                     1e-3, 1e-3, 1e-3, 3e-4, 3e-4, 3e-4),
                 max_spread_m: float = 1.0, verifier: Optional[Callable] = None,
                 defer: Optional[Callable[[], Optional[str]]] = None, max_deferred: int = 0,
                 window=None):
        if keyframe_stride < 1:
            raise ValueError(f"keyframe_stride must be >= 1, got {keyframe_stride}")
        if len(step_covariance) != 6 or min(step_covariance) < 0:
            raise ValueError(f"step_covariance must be 6 non-negative values, got "
                             f"{list(step_covariance)}")
        self.estimate = estimate
        self.base_T_cam = {k: np.asarray(v, float) for k, v in base_T_cam.items()}
        self.keyframe_stride = keyframe_stride
        self.step_covariance = np.diag(step_covariance)
        self.max_spread_m = max_spread_m
        self.verifier = verifier
        self.defer = defer
        self.max_deferred = max_deferred
        self.window = window
        self.deferred = 0  # groups deferred since construction
        self.reset()

    def reset(self, odom_T_base: Optional[np.ndarray] = None) -> None:
        """Forget the previous keyframe; start again from ``odom_T_base`` (identity default)."""
        self.odom_T_base = np.eye(4) if odom_T_base is None else np.asarray(odom_T_base, float)
        self.covariance = np.zeros((6, 6))
        self._previous: Optional[RigFrames] = None
        self._before: Optional[Tuple[RigFrames, np.ndarray]] = None
        self._seen = 0
        self._deferred_in_row = 0
        self.rejected = 0

    def restart_chain(self) -> None:
        """Keep the pose and covariance, forget the previous keyframe: the next group starts a
        new chain from the kept pose (after a pause of the input, when the group before the
        pause and the one after may no longer overlap)."""
        self._previous = None
        self._before = None
        self._seen = 0
        self._deferred_in_row = 0

    def _group(self, frames: RigFrames) -> Group:
        missing = [c for c in frames.cameras if c not in self.base_T_cam]
        if missing:
            raise ValueError(f"no extrinsics for camera(s) {missing}; known: "
                             f"{sorted(self.base_T_cam)}")
        # The rig at one instant: world = base_link at that instant.
        poses = np.stack([self.base_T_cam[c] for c in frames.cameras])
        return Group(images=frames.images, intrinsics=frames.intrinsics, cam_to_world=poses,
                     stamps=[frames.stamp_ns] * len(frames.cameras))

    def process(self, frames: RigFrames) -> Optional[OdometryUpdate]:
        """Feed one synchronized group; returns an update, or None if skipped by the stride."""
        self._seen += 1
        if self._previous is not None and (self._seen - 1) % self.keyframe_stride:
            return None
        if self._previous is not None and frames.stamp_ns <= self._previous.stamp_ns:
            raise ValueError(
                f"group stamp {frames.stamp_ns} ns is not after the previous keyframe "
                f"{self._previous.stamp_ns} ns"
            )
        group = self._group(frames)
        if self._previous is None:
            self._previous = frames
            if self.window is not None:
                self.window.restart(self.odom_T_base, self.covariance, self._cameras(frames))
            return OdometryUpdate(frames.stamp_ns, self.odom_T_base.copy(), np.eye(4),
                                  np.zeros(3), np.zeros(3), self.covariance.copy(), 0.0,
                                  list(frames.cameras), is_initial=True)
        prev = self._previous
        try:
            a0_T_b0, estimates = self.estimate(self._group(prev), group)
            spread = estimate_spread(a0_T_b0, estimates)
        except ValueError as exc:
            raise ValueError(f"model returned invalid estimates: {exc}") from exc
        delta = (self.base_T_cam[prev.cameras[0]] @ a0_T_b0 @
                 invert_pose(self.base_T_cam[frames.cameras[0]]))
        step_cov, path, inliers, reason = self.step_covariance, "g2g", 0, ""
        deferred = self.verifier is not None and self._deferral()
        stationary, measured, method, correspondences, geometric = False, False, "", [], False
        if deferred:
            reason = f"verification deferred: {deferred}"
        elif self.verifier is not None:
            before = {}
            # The keyframe map costs a step about 50 ms more: a node already behind (a newer
            # group queued, deferral used up) verifies without it, so it keeps up at 5 Hz.
            if (self._before is not None and getattr(self.verifier, "takes_before", False)
                    and not (self.defer is not None and self.defer())):
                before = {"before": (self._group(self._before[0]), self._before[1])}
            check = self.verifier(self._group(prev), group, delta, **before)
            path, inliers, reason = check.path, check.inliers, check.reason
            stationary = check.stationary
            # A step whose length is G2G's (path g2g) still has the geometry's rotation (and
            # direction, save a mirrored relative pose): published, as a G2G step.
            geometric = getattr(check, "geometric", check.path != "g2g")
            if geometric:
                delta, step_cov = check.delta, check.covariance
                measured = getattr(check, "carries_length", False)
                method = getattr(check, "method", "")
                if self.window is not None:  # worked out only where a window reads them
                    correspondences = getattr(check, "correspondences", [])
        # The spread judges G2G's own answer: a step the geometry verified or refined, or whose
        # rotation and direction it measured, does not rest on it (G2G's per-camera estimates
        # of a car's 1-3 m step disagree by 1.7 m, and a rejected step keeps the keyframe, so
        # every later group was further off and rejected too: the odometry stalled).
        if not geometric and spread > self.max_spread_m:
            self.rejected += 1
            # Keep the previous keyframe: the next group is compared against it again.
            raise ValueError(f"the motion estimates disagree by {spread:.2f} m "
                             f"(> max_spread_m={self.max_spread_m}); group rejected"
                             + (f" (verification: {reason})" if reason else ""))
        dt = (frames.stamp_ns - prev.stamp_ns) * 1e-9
        # The step's covariance is in the previous base frame: rotate it into odom.
        rot = np.kron(np.eye(2), self.odom_T_base[:3, :3])
        odom_T_base = self.odom_T_base @ delta
        covariance = self.covariance + rot @ step_cov @ rot.T
        if not deferred and not stationary:  # a keyframe: the odometry moves on from it
            if self.window is not None:
                refined = self.window.add(odom_T_base, covariance, self._cameras(frames),
                                          correspondences)
                if refined is not None:
                    odom_T_base, covariance = refined.pose, refined.covariance
                    delta = invert_pose(self.odom_T_base) @ odom_T_base
                    reason += f"; {refined.reason}"
                elif self.window.last_note:
                    reason += f"; window: {self.window.last_note}"
            self.odom_T_base, self.covariance, self._previous = odom_T_base, covariance, frames
            # The keyframe map of the next step needs this one's length from the geometry.
            self._before = (prev, delta.copy()) if measured else None
        return OdometryUpdate(
            stamp_ns=frames.stamp_ns, odom_T_base=odom_T_base.copy(), delta=delta,
            linear_velocity=delta[:3, 3] / dt,
            angular_velocity=rotation_vector(delta[:3, :3]) / dt,
            covariance=covariance.copy(), spread_m=spread, cameras=list(frames.cameras),
            path=path, inliers=inliers, reason=reason, deferred=bool(deferred),
            stationary=stationary, method=method,
        )

    def _cameras(self, frames: RigFrames):
        """``(base_T_cam, K)`` of each camera of ``frames`` (a refined window's)."""
        ks = per_frame_intrinsics(frames.intrinsics, len(frames.cameras))
        return [(self.base_T_cam[c], k) for c, k in zip(frames.cameras, ks)]

    def _deferral(self) -> Optional[str]:
        """Why this step's verification is deferred, or None (then it is verified)."""
        why = None
        if self.defer is not None and self._deferred_in_row < self.max_deferred:
            why = self.defer()
        if why:
            self._deferred_in_row += 1
            self.deferred += 1
            return why
        self._deferred_in_row = 0
        return None
