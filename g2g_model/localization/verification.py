"""Geometric verification and refinement of G2G's relocalization.

G2G predicts where each query camera is relative to a map window. When the images share enough
texture, geometry can check and sharpen that answer:

1. local features (RootSIFT, OpenCV) in every frame of the map window and of the query;
2. map-side 3D points: pairs of map frames are matched and triangulated with the map's known
   metric poses (cheirality, reprojection and triangulation-angle checks); a point that more
   than two map frames see is solved from all of them and dropped where they disagree
   (:mod:`.multiview_points`);
3. query features are matched to those points' descriptors, and ONE rigid pose for the whole
   query group is solved by generalized absolute pose (the query frames form a generalized
   camera whose intra-group poses come from odometry) with RANSAC and non-linear refinement:
   PoseLib's ``estimate_generalized_absolute_pose``, seeded with G2G's estimate;
4. the solution is refined on the query instants near the window's first one where they
   show the group bent (:mod:`.window_span`: odometry drift inside a long window bends it);
5. the covariance of the refined pose comes from the reprojection residuals of its inliers
   (Gauss-Newton: ``sigma^2 (J^T J)^-1``), published :data:`PUBLISHED_SD_SCALE` times wider
   (what the residuals cannot see);
6. the pose is refused where a rival pose explains the same matches nearly as well
   (:mod:`.ambiguity`: repeated texture).

The outcome says which path it took: ``verified`` (geometry agrees with G2G), ``refined``
(geometry found a well-supported pose that G2G did not predict) or ``g2g`` (no trustworthy
geometric pose; the reason says why: blank images, too few features, a map window seen from
one spot, too few inliers, a non-finite result). PoseLib is a maintained library for exactly
these solvers; only the glue (feature caching, triangulation bookkeeping, covariance) is ours.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.absolute_pose import absolute_pose
from g2g_model.localization.ambiguity import Ambiguous, check_unambiguous
from g2g_model.localization.bounded_cache import BoundedCache
from g2g_model.localization.epipolar_guidance import guided_candidates
from g2g_model.localization.multiview_points import refine_points
from g2g_model.localization.point_matches import point_matches
from g2g_model.localization.projection_guidance import projected_candidates
from g2g_model.localization.local_features import (
    Features, LocalFeatures, per_frame_intrinsics,
)
from g2g_model.localization.verdict import (  # noqa: F401 (the paths: part of this API)
    PATH_G2G, PATH_REFINED, PATH_VERIFIED, Fallback, judge,
)
from g2g_model.localization.verifier_config import VerifierConfig  # noqa: F401 (its home)
from g2g_model.localization.window_span import (
    bend_shown, frames_within, instant_travel, refinement_allowed,
)
from g2g_model.poselib_conversions import camera_pose, pinhole_camera

LOG = logging.getLogger(__name__)

# Covariance of a G2G-only map pose (x y z, roll pitch yaw; m^2, rad^2), calibrated on the
# first relocalization default's held-out errors (g2g_reloc_compact on an earlier test index:
# mean 0.62 m and 21.4 deg, spread over three axes); kept for the current default, for which it is
# conservative on simulator pairs (0.12 m, 3.8 deg) and about right for the demo's
# cross-season windows (20 deg). The one place it is written; a refined pose's is far tighter, and
# downstream filters (the gate, robot_localization) must be able to tell them apart.
G2G_COVARIANCE = np.diag([0.13] * 3 + [0.046] * 3)
# A geometric pose is published with the covariance of its solve (``sigma^2 (J^T J)^-1`` from
# the inliers' residuals) with standard deviations this many times larger. The residuals see
# the keypoints' noise, not what all inliers share: the errors of the triangulated map points
# and of the odometry inside the query window. On bench_real_reloc's published fixes
# (2026-12-02: the real office, cabinet and two KITTI clips, the simulated twin's two scenes)
# the errors were a median 0.8-7.1 times the solve's deviations in position and 1.9-6.5 times
# in rotation (90th percentile up to 14); five times wider, 92-100 % of every set's fixes lie
# within 3 (the benchmark scores it; docs/VERIFICATION.md, "How wide the published covariance
# is"). The trust rules (``max_position_sd_m``) judge the solve's own.
PUBLISHED_SD_SCALE = 5.0
# Shares of VerifierConfig.cache_mb: features of images, map points of windows, triangulated
# map-frame pairs, 2D-3D matches of query images.
CACHE_SHARES = {"features": 0.5, "points": 0.25, "pairs": 0.125, "matches": 0.125}


@dataclass
class Verification:
    """Outcome of one verification.

    Attributes:
        path: ``"g2g"``, ``"verified"`` or ``"refined"`` (see the PATH_* constants).
        map_T_b0: ``[4, 4]`` pose of the query's first camera in the map frame (for ``"g2g"``:
            G2G's own estimate, unchanged).
        covariance: ``[6, 6]`` covariance of that pose (x y z of the camera centre in the map
            frame, then small rotations about the map axes; metres and radians, the order of
            ROS PoseWithCovariance).
        inliers: 2D-3D inliers of the geometric solution (0 on the ``"g2g"`` path).
        reason: why this path (e.g. ``"too few features in the query (12)"``).
        g2g_disagreement: (metres, degrees) between G2G's and the geometric pose, when solved.
        ambiguous: the geometry found a pose and a rival one about as well supported
            (:mod:`.ambiguity`), so it is on the ``"g2g"`` path; no other solve may stand in.
    """

    path: str
    map_T_b0: np.ndarray
    covariance: np.ndarray = field(default_factory=lambda: G2G_COVARIANCE.copy())
    inliers: int = 0
    reason: str = ""
    g2g_disagreement: Optional[Tuple[float, float]] = None
    ambiguous: bool = False


@dataclass
class QueryMatches:
    """The query's 2D-3D matches with a map window (:meth:`StructureVerifier.query_matches`): per
    query image its keypoints ``p2d`` ``[M, 2]`` and map points ``p3d`` ``[M, 3]``, its PoseLib
    pose in the query's first camera frame (``exts``) and camera (``cams``); ``k_b`` the query
    intrinsics per image; ``points``: the map window's points; ``features``: the query's."""

    p2d: List[np.ndarray]
    p3d: List[np.ndarray]
    exts: list
    cams: list
    k_b: np.ndarray
    points: int
    features: int


class StructureVerifier:
    """``verifier(group_a, query, map_T_b) -> Verification`` (see the module docstring).

    ``group_a``: the map window (``cam_to_world`` = map_T_cam); ``query``: the query group
    (``cam_to_world`` = odometry poses, only their relative poses are used); ``map_T_b``:
    ``[W, 4, 4]`` G2G's estimate of each query camera in the map frame. Features are cached per
    image (keyed by its bytes), so a map frame or a query frame is described once; every cache
    is bounded in entries and in bytes (``cache_size``, ``cache_mb`` split by
    :data:`CACHE_SHARES`), so the memory stays bounded whatever the images and the map.
    """

    def __init__(self, config: Optional[VerifierConfig] = None,
                 features: Optional[LocalFeatures] = None, guided: bool = False):
        self.config = (config or VerifierConfig()).validate()
        cfg = self.config
        self.local = features if features is not None else new_local_features(cfg)
        # Match map frame pairs only along their epipolar lines (within reprojection_px):
        # rig odometry's calibrated cameras, whose wide viewpoint changes and repeated
        # textures leave few plain ratio-test matches (rig_overlap).
        self.guided = guided
        budget = {k: int(v * cfg.cache_mb * 2**20) for k, v in CACHE_SHARES.items()}
        # Map points per window (per frame, and all of them concatenated).
        self._points_cache = BoundedCache(budget["points"], 64)
        # Triangulated points of one pair of map frames.
        self._pair_cache = BoundedCache(budget["pairs"], 4 * cfg.cache_size)
        # 2D-3D matches of (query image, map window): a query instant stays in the window for
        # W localizations and the map window repeats while tracking, so most are reused.
        self._matches_cache = BoundedCache(budget["matches"], cfg.cache_size)

    def cache_bytes(self) -> int:
        """Bytes held by all caches of this verifier (at most ``cache_mb``)."""
        return sum(c.nbytes for c in (self.local.cache, self._points_cache, self._pair_cache,
                                      self._matches_cache))

    # ------------------------------------------------------------------ map points
    def map_points(self, images: Sequence[np.ndarray], intrinsics: np.ndarray,
                   world_T_cam: np.ndarray, pairs: Optional[Sequence[Tuple[int, int]]] = None
                   ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Triangulate the map window: per map frame, ``(points [M, 3], descriptors [M, D])``
        of its keypoints that became 3D points. Pairs of frames that look
        the same way are matched; a match becomes a point if it passes cheirality, reprojection
        and parallax checks; a keypoint matched in several pairs is solved from all its views
        and dropped if they disagree (:func:`.multiview_points.refine_points`).
        ``pairs``: the frame pairs ``(i, j)``, i < j, to triangulate instead (e.g. the
        overlapping cameras of a rig at one instant)."""
        pairs = None if pairs is None else tuple(sorted((int(i), int(j)) for i, j in pairs))
        key = tuple(self.local.image_key(im) for im in images) + (pairs,)
        hit = self._points_cache.get(key)
        if hit is not None:
            return hit
        feats = [self.local.describe(im) for im in images]
        out = []
        tracks = self.triangulated_keypoints(images, intrinsics, world_T_cam, pairs)
        for f, (idx, points) in zip(feats, tracks):
            out.append((points, f.descriptors[idx].reshape(-1, f.descriptors.shape[1])))
        return self._points_cache.put(key, out)

    def triangulated_keypoints(self, images: Sequence[np.ndarray], intrinsics: np.ndarray,
                               world_T_cam: np.ndarray,
                               pairs: Optional[Sequence[Tuple[int, int]]] = None
                               ) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Per frame, ``(keypoint indices [M], points [M, 3])``: the keypoints that became
        points (see :meth:`map_points`)."""
        key = tuple(self.local.image_key(im) for im in images)
        feats = [self.local.describe(im) for im in images]
        cfg = self.config
        proj = [intrinsics[i] @ invert_pose(world_T_cam[i])[:3] for i in range(len(images))]
        found: List[Dict[int, np.ndarray]] = [{} for _ in images]
        seen: List[Dict[int, List[Tuple[int, int]]]] = [{} for _ in images]
        axes = world_T_cam[:, :3, 2]
        if pairs is None:  # looking different ways: no shared view to triangulate
            cos_pair = np.cos(np.radians(cfg.max_pair_angle_deg))
            pairs = tuple((i, j) for i in range(len(images)) for j in range(i + 1, len(images))
                          if float(axes[i] @ axes[j]) >= cos_pair)
        for i, j in pairs:
            # A pair's points depend only on its two frames (and their fixed map poses):
            # a window that moves by one instant re-triangulates only its new pairs.
            pair_key = (key[i], key[j], world_T_cam[i].tobytes(), world_T_cam[j].tobytes())
            tri = self._pair_cache.get(pair_key)
            if tri is None:
                tri = self._pair_cache.put(pair_key, self._triangulate(
                    feats[i], feats[j], proj[i], proj[j], world_T_cam[i], world_T_cam[j]))
            for a, b, point in zip(*tri):
                found[i].setdefault(int(a), point)
                found[j].setdefault(int(b), point)
                seen[i].setdefault(int(a), [(i, int(a))]).append((j, int(b)))
                seen[j].setdefault(int(b), [(j, int(b))]).append((i, int(a)))
        idx = [np.fromiter(pts.keys(), int, len(pts)) for pts in found]
        views = [seen[f][k] for f, ids in enumerate(idx) for k in ids]
        points = np.array([found[f][k] for f, ids in enumerate(idx) for k in ids]).reshape(-1, 3)
        # Seen in more than two map frames: solved from all of them (every frame's in one
        # batch), and dropped where they disagree (a match slid along its epipolar line).
        points, solved = refine_points(proj, [f.keypoints for f in feats], views, points,
                                       cfg.reprojection_px)
        keep = solved | np.array([len(v) == 2 for v in views], bool)
        out, start = [], 0
        for ids in idx:
            stop = start + len(ids)
            kept = keep[start:stop]
            out.append((ids[kept], points[start:stop][kept]))
            start = stop
        return out

    def _triangulate(self, fi: Features, fj: Features, pi: np.ndarray, pj: np.ndarray,
                     wi: np.ndarray, wj: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keypoint indices in i, in j, points [M, 3])`` of the matches of two map frames
        that pass the cheirality, reprojection and parallax checks."""
        cfg = self.config
        empty = (np.zeros(0, int), np.zeros(0, int), np.zeros((0, 3)))
        allowed = None
        if self.guided:
            allowed = guided_candidates(pi, pj, wi, wj, fi.keypoints, fj.keypoints,
                                        cfg.reprojection_px)
        pairs = self.local.match(fi.descriptors, fj.descriptors, allowed=allowed)
        if len(pairs) < 8:
            return empty
        xi, xj = fi.keypoints[pairs[:, 0]], fj.keypoints[pairs[:, 1]]
        hom = cv2.triangulatePoints(pi, pj, xi.T, xj.T)
        with np.errstate(divide="ignore", invalid="ignore"):
            X = (hom[:3] / hom[3]).T
        ok = np.all(np.isfinite(X), axis=1)
        for P, x in ((pi, xi), (pj, xj)):
            h = X @ P[:, :3].T + P[:, 3]
            with np.errstate(divide="ignore", invalid="ignore"):
                err = np.linalg.norm(h[:, :2] / h[:, 2:3] - x, axis=1)
            ok &= (h[:, 2] > 0) & (err < cfg.reprojection_px)
        ri, rj = X - wi[:3, 3], X - wj[:3, 3]
        cos = np.sum(ri * rj, 1) / np.maximum(
            np.linalg.norm(ri, axis=1) * np.linalg.norm(rj, axis=1), 1e-12)
        ok &= np.degrees(np.arccos(np.clip(cos, -1, 1))) > cfg.min_triangulation_deg
        return pairs[ok, 0], pairs[ok, 1], X[ok]

    def _window_points(self, group_a, intrinsics: np.ndarray, key: tuple, pairs=None
                       ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every map point of the window, its descriptors and the map frame it came from,
        concatenated (cached; ``pairs``: see :meth:`map_points`)."""
        key = key + (None if pairs is None else tuple(sorted(map(tuple, pairs))),)
        hit = self._points_cache.get(("all",) + key)
        if hit is None:
            per_frame = self.map_points(group_a.images, intrinsics,
                                        np.asarray(group_a.cam_to_world, float), pairs)
            hit = (np.concatenate([p for p, _ in per_frame]),
                   np.ascontiguousarray(np.concatenate([d for _, d in per_frame])),
                   np.concatenate([np.full(len(p), i) for i, (p, _) in enumerate(per_frame)]))
            self._points_cache.put(("all",) + key, hit)
        return hit

    # ------------------------------------------------------------------ verification
    def __call__(self, group_a, query, map_T_b: np.ndarray,
                 view_prior: Optional[np.ndarray] = None,
                 pairs: Optional[Sequence[Tuple[int, int]]] = None) -> Verification:
        """``view_prior``: optional ``[N_query, 4, 4]`` poses of the query cameras in the map
        that are known to be accurate (e.g. from the current verified fix while tracking); it
        only narrows which map frames each query image is matched against. ``pairs``: the map
        frames to triangulate (:meth:`map_points`; default: those that look the same way)."""
        map_T_b = np.asarray(map_T_b, float)
        fallback = Verification(PATH_G2G, map_T_b[0].copy())
        try:
            return self._verify(group_a, query, map_T_b, view_prior, pairs) or fallback
        except Fallback as why:
            fallback.reason = str(why)
            fallback.ambiguous = isinstance(why, Ambiguous)
            return fallback

    def query_matches(self, group_a, query, view_prior: Optional[np.ndarray] = None,
                      pairs=None) -> "QueryMatches":
        """The query images' 2D-3D matches with the map window's points (cached), what the
        solve of :meth:`__call__` starts from; ``view_prior`` and ``pairs`` as there."""
        cfg = self.config
        k_a = per_frame_intrinsics(group_a.intrinsics, len(group_a.images))
        k_b = per_frame_intrinsics(query.intrinsics, len(query.images))
        window_key = tuple(self.local.image_key(im) for im in group_a.images)
        points, descs, frame_of = self._window_points(group_a, k_a, window_key, pairs)
        # With an accurate prior (the current verified fix), each query image is matched only
        # against the map frames that look its way: a fraction of the work while tracking.
        axes_a = np.asarray(group_a.cam_to_world, float)[:, :3, 2]
        cos_view = np.cos(np.radians(cfg.prior_view_angle_deg))
        odom_T_b = np.asarray(query.cam_to_world, float)
        b0_T_odom = invert_pose(odom_T_b[0])
        out = QueryMatches([], [], [], [], k_b, len(points), 0)
        if len(points) < cfg.min_inliers:
            return out
        for j, image in enumerate(query.images):
            feats = self.local.describe(image)
            out.features += len(feats.keypoints)
            frames = None
            if view_prior is not None:
                frames = np.flatnonzero(axes_a @ np.asarray(view_prior[j], float)[:3, 2]
                                        >= cos_view)
            key = (self.local.image_key(image), window_key,
                   None if frames is None else frames.tobytes())
            rows = slice(None) if frames is None else np.isin(frame_of, frames)
            if view_prior is not None and cfg.tracking_radius_px > 0:
                # Tracking: candidates near the prior's projections (not cached: the prior
                # moves with every localization).
                allowed = projected_candidates(feats.keypoints, points[rows], k_b[j],
                                               np.asarray(view_prior[j], float),
                                               cfg.tracking_radius_px)
                hit = point_matches(feats, points[rows], descs[rows], cfg, allowed)
            else:
                hit = self._matches_cache.get(key)
            if hit is None:
                hit = self._matches_cache.put(key, point_matches(
                    feats, points[rows], descs[rows], cfg))
            x, X = hit
            out.p2d.append(x)
            out.p3d.append(X)
            out.exts.append(camera_pose(invert_pose(b0_T_odom @ odom_T_b[j])))
            out.cams.append(pinhole_camera(k_b[j], image))
        return out

    def _verify(self, group_a, query, map_T_b: np.ndarray, view_prior: Optional[np.ndarray],
                pairs=None) -> Optional[Verification]:
        cfg = self.config
        if not np.all(np.isfinite(map_T_b)):
            raise Fallback("G2G's estimate is not finite")
        found = self.query_matches(group_a, query, view_prior, pairs)
        num_points = found.points
        if num_points < cfg.min_inliers:
            a_pos = np.asarray(group_a.cam_to_world, float)[:, :3, 3]
            baseline = float(np.max(np.linalg.norm(a_pos - a_pos[0], axis=1)))
            raise Fallback(f"the map window gives {num_points} triangulated points (< "
                           f"{cfg.min_inliers}; its frames span {baseline:.2f} m)")
        p2d, p3d, exts, cams, k_b = found.p2d, found.p3d, found.exts, found.cams, found.k_b
        odom_T_b = np.asarray(query.cam_to_world, float)
        if found.features < cfg.min_inliers:
            raise Fallback(f"too few features in the query ({found.features}): blank, dark or "
                           "textureless images")
        matched = sum(len(p) for p in p2d)
        if matched < cfg.min_inliers:
            raise Fallback(f"{matched} query features match the map window's "
                           f"{num_points} points (< {cfg.min_inliers})")
        map_T_b0, cov, inliers = absolute_pose(p2d, p3d, exts, cams, k_b, map_T_b[0], cfg)
        travel = instant_travel(odom_T_b, query.stamps)
        near = frames_within(travel, cfg.window_span_m)
        note, used = "", np.arange(len(p2d))  # the frames of the published solve
        if len(near) < len(p2d):
            # Refined on the instants near the first one, from the whole window's solution:
            # odometry drift inside a long window bends the whole, and where the instants near
            # the start show it, the refinement is taken (window_span).
            try:
                refined = absolute_pose(
                    [p2d[i] for i in near], [p3d[i] for i in near], [exts[i] for i in near],
                    [cams[i] for i in near], k_b[near], map_T_b0, cfg)
            except Fallback:  # too few inliers near the start: the whole window's stands
                refined = None
            if refined is not None and refinement_allowed(map_T_b0, refined[0], travel) \
                    and bend_shown(map_T_b0, refined[0], [p2d[i] for i in near],
                                   [p3d[i] for i in near],
                                   [exts[i].Rt for i in near], k_b[near], cfg.reprojection_px):
                map_T_b0, cov, inliers = refined
                used = near
                note = (f"; solved on the {len(near)} of {len(p2d)} frames within "
                        f"{cfg.window_span_m:g} m of the anchor instant (the window is bent)")
        path, reason, disagreement = judge(map_T_b[0], map_T_b0, cov, inliers, matched, cfg)
        # Repeated texture: refused where a second pose explains the same frames' matches
        # nearly as well (ambiguity).
        check_unambiguous([p2d[i] for i in used], [p3d[i] for i in used],
                          [exts[i] for i in used], [cams[i] for i in used], k_b[used],
                          map_T_b0, cfg)
        return Verification(path, map_T_b0, cov * PUBLISHED_SD_SCALE ** 2, inliers,
                            reason + note, disagreement)


def new_local_features(cfg: VerifierConfig) -> LocalFeatures:
    """The feature extractor of a verifier with ``cfg`` (its cache: the features share of
    ``cache_mb``)."""
    return LocalFeatures(cfg.feature, cfg.max_features, cfg.ratio, cfg.cache_size,
                         cache_bytes=int(CACHE_SHARES["features"] * cfg.cache_mb * 2**20),
                         max_image_px=cfg.max_image_px)
