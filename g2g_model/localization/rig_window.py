"""Sliding-window refinement of rig odometry: the last keyframes' body poses and the points
they share, refined together by bundle adjustment (GTSAM).

Every verified keyframe step leaves the keyframe matches its motion explains (the
``correspondences`` of
:class:`~g2g_model.localization.motion_verification.MotionVerification`). Matches that share a
keypoint chain into tracks across the window (a keypoint of keyframe k matched both to
keyframe k-1 and to k+1, in any cameras of the rig); each track is one 3D point, triangulated
from the current poses. GTSAM's Levenberg-Marquardt then refines the body poses of the window's
keyframes and all points together on the reprojection errors of every observation through the
calibrated extrinsics (``GenericProjectionFactorCal3_S2`` with the camera's pose in the body),
under a Huber loss, the oldest keyframe held fixed (what was published stays). Points seen
from three or more keyframes tie steps together, so one step's error no longer adds up
independently of its neighbours'. The newest keyframe's refined pose replaces the one composed
from its step, unless the two differ by more than the step can explain (then the step stands
and the reason says why); its covariance is the oldest keyframe's plus the newest pose's
marginal covariance in the refinement.

GTSAM (BSD) rather than a solver of our own: a maintained sparse bundle adjustment with robust
losses and marginal covariances.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import invert_pose, rotation_angle_deg

# (camera index in the earlier keyframe, in the later one, [M, 2] pixels there, [M, 2] here)
Correspondence = Tuple[int, int, np.ndarray, np.ndarray]
Camera = Tuple[np.ndarray, np.ndarray]  # (base_T_cam [4, 4], K [3, 3])


@dataclass
class Refinement:
    """The newest keyframe after a window's refinement: ``pose`` (odom_T_base), its ``[6, 6]``
    ``covariance`` (x y z roll pitch yaw, odom frame) and the ``reason`` (what was refined,
    how far it moved the pose)."""

    pose: np.ndarray
    covariance: np.ndarray
    reason: str


@dataclass
class _Keyframe:
    pose: np.ndarray
    covariance: np.ndarray
    cameras: List[Camera]


class KeyframeWindow:
    """The last ``size`` keyframes of one odometry chain and the matches between consecutive
    ones (module docstring).

    Args:
        size: keyframes refined together (>= 3; the oldest is held fixed).
        sigma_px: reprojection noise of a keypoint (pixels of the camera's intrinsics).
        max_iterations: Levenberg-Marquardt iterations per refinement.
        max_points: at most this many tracks (the longest first).
        max_shift: the refinement may move the newest pose by at most this share of its
            step's length (plus ``sigma_px`` worth of one pixel at 10 m, 0.05 m at least) and
            2 deg; further, the step stands.
    """

    def __init__(self, size: int = 5, sigma_px: float = 1.0, max_iterations: int = 10,
                 max_points: int = 2000, max_shift: float = 0.25):
        if size < 3:
            raise ValueError(f"a refined window needs at least 3 keyframes, got {size}")
        if not sigma_px > 0:
            raise ValueError(f"sigma_px must be > 0, got {sigma_px}")
        self.size, self.sigma_px = size, float(sigma_px)
        self.max_iterations, self.max_points, self.max_shift = max_iterations, max_points, \
            max_shift
        self.frames: deque = deque()
        self.links: deque = deque()  # links[i]: correspondences of frames[i] -> frames[i + 1]
        self.last_note = ""  # why the latest add() gave no refinement

    def restart(self, pose: np.ndarray, covariance: np.ndarray, cameras: Sequence[Camera]):
        """Start a new chain at this keyframe (the first one, or after a step without
        geometry: nothing links it to the keyframes before)."""
        self.frames.clear()
        self.links.clear()
        self.frames.append(_Keyframe(np.asarray(pose, float), np.asarray(covariance, float),
                                     list(cameras)))

    def add(self, pose: np.ndarray, covariance: np.ndarray, cameras: Sequence[Camera],
            correspondences: Sequence[Correspondence]) -> Optional[Refinement]:
        """Append the newest keyframe (``pose`` composed from its verified step, its
        ``covariance``), linked to the previous one by ``correspondences``; refine the window
        once it holds 3 keyframes. Returns the refinement, or None (too few keyframes, or the
        refinement was not taken: :attr:`last_note` says why)."""
        self.last_note = ""
        if not self.frames or not correspondences:
            self.restart(pose, covariance, cameras)
            return None
        self.frames.append(_Keyframe(np.asarray(pose, float), np.asarray(covariance, float),
                                     list(cameras)))
        self.links.append([(int(a), int(b), np.asarray(xa, float), np.asarray(xb, float))
                           for a, b, xa, xb in correspondences])
        while len(self.frames) > self.size:
            self.frames.popleft()
            self.links.popleft()
        if len(self.frames) < 3:
            return None
        try:
            return self._refine()
        except Exception as exc:  # noqa: BLE001 - odometry goes on with the step as measured
            self.last_note = f"the refinement failed ({exc.__class__.__name__}: {exc}); the " \
                "step stands"
            return None

    # -- the refinement ----------------------------------------------------------------------

    def _tracks(self):
        """``(frame [O], camera [O], pixel [O, 2], track [O])`` of every observation in a
        consistent track of at least two observations."""
        ids: Dict[Tuple[int, int, float, float], int] = {}
        parent: List[int] = []

        def node(frame: int, cam: int, x: np.ndarray) -> np.ndarray:
            out = np.empty(len(x), int)
            for k, (u, v) in enumerate(x):
                key = (frame, cam, float(u), float(v))
                if key not in ids:
                    ids[key] = len(parent)
                    parent.append(len(parent))
                out[k] = ids[key]
            return out

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for f, link in enumerate(self.links):
            for cam_a, cam_b, xa, xb in link:
                for i, j in zip(node(f, cam_a, xa), node(f + 1, cam_b, xb)):
                    ri, rj = root(i), root(j)
                    if ri != rj:
                        parent[rj] = ri
        keys = list(ids)
        frame = np.array([k[0] for k in keys], int)
        cam = np.array([k[1] for k in keys], int)
        pixel = np.array([k[2:] for k in keys], float).reshape(-1, 2)
        track = np.array([root(i) for i in range(len(keys))], int)
        # A track seen twice in one image joined two keypoints: it is not one point.
        view = frame * 1000 + cam
        order = np.lexsort((view, track))
        clash = np.zeros(len(keys), bool)
        same = (np.diff(track[order]) == 0) & (np.diff(view[order]) == 0)
        clash[order[1:][same]] = clash[order[:-1][same]] = True
        bad = np.unique(track[clash])
        keep = ~np.isin(track, bad)
        frame, cam, pixel, track = frame[keep], cam[keep], pixel[keep], track[keep]
        tracks, track, counts = np.unique(track, return_inverse=True, return_counts=True)
        # The longest tracks first, at most max_points.
        rank = np.argsort(-counts, kind="stable")
        chosen = np.zeros(len(tracks), bool)
        chosen[rank[:self.max_points]] = counts[rank[:self.max_points]] >= 2
        keep = chosen[track]
        _, track = np.unique(track[keep], return_inverse=True)
        return frame[keep], cam[keep], pixel[keep], track

    def _projections(self, frame: np.ndarray, cam: np.ndarray):
        """Per observation: ``cam_T_odom`` [O, 4, 4] and K [O, 3, 3]."""
        views, which = np.unique(np.c_[frame, cam], axis=0, return_inverse=True)
        cam_T_odom = np.stack([invert_pose(self.frames[f].pose @ self.frames[f].cameras[c][0])
                               for f, c in views])
        ks = np.stack([np.asarray(self.frames[f].cameras[c][1], float) for f, c in views])
        which = which.reshape(-1)
        return cam_T_odom[which], ks[which]

    def _triangulate(self, track: np.ndarray, cam_T_odom: np.ndarray, ks: np.ndarray,
                     pixel: np.ndarray) -> np.ndarray:
        """``[T, 3]`` points (odom frame) by linear triangulation of all their observations
        (tracks of one length solved as one batch)."""
        rays = np.einsum("oij,oj->oi", np.linalg.inv(ks), np.c_[pixel, np.ones(len(pixel))])
        rows = np.concatenate([
            rays[:, 0:1] * cam_T_odom[:, 2, :] - cam_T_odom[:, 0, :],
            rays[:, 1:2] * cam_T_odom[:, 2, :] - cam_T_odom[:, 1, :]], axis=1)  # [O, 8]
        n = int(track.max()) + 1
        points = np.zeros((n, 3))
        order = np.argsort(track, kind="stable")
        counts = np.bincount(track, minlength=n)
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        for length in np.unique(counts):
            which = np.flatnonzero(counts == length)
            idx = order[starts[which][:, None] + np.arange(length)]  # [T, L]
            a = rows[idx].reshape(len(which), 2 * length, 4)
            _, _, vt = np.linalg.svd(a)
            h = vt[:, -1]
            with np.errstate(divide="ignore", invalid="ignore"):
                points[which] = h[:, :3] / h[:, 3:4]
        return points

    def _refine(self) -> Optional[Refinement]:
        import gtsam

        frame, cam, pixel, track = self._tracks()
        if not len(track):
            self.last_note = "no track across the window"
            return None
        cam_T_odom, ks = self._projections(frame, cam)
        points = self._triangulate(track, cam_T_odom, ks, pixel)
        # Observations their first triangulation does not explain (behind the camera, or
        # further than 4 sigma) are left out; so are tracks left with one observation.
        local = np.einsum("oij,oj->oi", cam_T_odom[:, :3, :3], points[track]) \
            + cam_T_odom[:, :3, 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            proj = np.einsum("oij,oj->oi", ks, local)
            err = np.linalg.norm(proj[:, :2] / proj[:, 2:3] - pixel, axis=1)
        good = (local[:, 2] > 1e-3) & (err < 4 * self.sigma_px) & np.isfinite(err)
        good &= np.bincount(track[good], minlength=len(points))[track] >= 2
        if good.sum() < 20:
            self.last_note = f"{int(good.sum())} observations explained by their tracks (< 20)"
            return None
        frames_seen = np.unique(frame[good])
        if len(frames_seen) < len(self.frames):
            self.last_note = "a keyframe of the window shares no track"
            return None

        graph = gtsam.NonlinearFactorGraph()
        values = gtsam.Values()
        noise = gtsam.noiseModel.Robust.Create(gtsam.noiseModel.mEstimator.Huber.Create(1.345),
                                               gtsam.noiseModel.Isotropic.Sigma(2, self.sigma_px))
        fixed = gtsam.noiseModel.Isotropic.Sigma(6, 1e-6)
        for f, kf in enumerate(self.frames):
            values.insert(gtsam.symbol("x", f), gtsam.Pose3(kf.pose))
        graph.add(gtsam.PriorFactorPose3(gtsam.symbol("x", 0), gtsam.Pose3(self.frames[0].pose),
                                         fixed))
        calibrations: Dict[Tuple[int, int], object] = {}
        sensors: Dict[Tuple[int, int], object] = {}
        used = np.unique(track[good])
        for t in used:
            values.insert(gtsam.symbol("l", int(t)), gtsam.Point3(points[t]))
        for f, c, x, t in zip(frame[good], cam[good], pixel[good], track[good]):
            key = (int(f), int(c))
            if key not in calibrations:
                base_T_cam, k = self.frames[f].cameras[c]
                calibrations[key] = gtsam.Cal3_S2(k[0, 0], k[1, 1], k[0, 1], k[0, 2], k[1, 2])
                sensors[key] = gtsam.Pose3(np.asarray(base_T_cam, float))
            graph.add(gtsam.GenericProjectionFactorCal3_S2(
                gtsam.Point2(float(x[0]), float(x[1])), noise, gtsam.symbol("x", int(f)),
                gtsam.symbol("l", int(t)), calibrations[key], sensors[key]))
        params = gtsam.LevenbergMarquardtParams()
        params.setMaxIterations(self.max_iterations)
        result = gtsam.LevenbergMarquardtOptimizer(graph, values, params).optimize()
        newest = len(self.frames) - 1
        refined = result.atPose3(gtsam.symbol("x", newest)).matrix()
        guess = self.frames[newest].pose
        step = float(np.linalg.norm((invert_pose(self.frames[newest - 1].pose) @ guess)[:3, 3]))
        moved = float(np.linalg.norm(refined[:3, 3] - guess[:3, 3]))
        turned = rotation_angle_deg(guess[:3, :3].T @ refined[:3, :3])
        allowed = max(0.05, self.max_shift * step)
        if not np.all(np.isfinite(refined)) or moved > allowed or turned > 2.0:
            self.last_note = (f"the refinement moved the newest keyframe {moved:.2f} m / "
                              f"{turned:.2f} deg (> {allowed:.2f} m or 2 deg): the step stands")
            return None
        try:
            marginal = gtsam.Marginals(graph, result).marginalCovariance(
                gtsam.symbol("x", newest))
        except RuntimeError:
            marginal = None
        for f in range(1, len(self.frames)):
            self.frames[f].pose = result.atPose3(gtsam.symbol("x", f)).matrix()
        covariance = self.frames[newest].covariance
        if marginal is not None and np.all(np.isfinite(marginal)):
            # GTSAM's tangent: rotation then translation, in the body frame -> ours: x y z,
            # roll pitch yaw in the odom frame, added to the fixed oldest keyframe's.
            reorder = np.r_[3:6, 0:3]
            rot = np.kron(np.eye(2), refined[:3, :3])
            covariance = self.frames[0].covariance + rot @ np.asarray(marginal)[
                np.ix_(reorder, reorder)] @ rot.T
            self.frames[newest].covariance = covariance
        return Refinement(refined, covariance.copy(), (
            f"window of {len(self.frames)} keyframes refined ({len(used)} points, "
            f"{int(good.sum())} observations): moved {moved:.3f} m / {turned:.3f} deg"))
