"""Map points from every map frame that sees them, not from the first pair that matched them.

The verifier triangulates its map points pair by pair (two map frames, their known poses). A
keypoint that matches in several pairs used to keep the point of the first pair, often the
closest neighbour in the window and so the narrowest baseline: the least precise depth. Here
each such keypoint's point is solved again from all its observations: the keypoint itself and
its match in every pair it was triangulated in (a star around the keypoint, not a track across
the window): a linear (DLT) solution, then a few Gauss-Newton steps on the reprojection error
in pixels. A point counts as solved only where it reprojects within the threshold in every
view and lies in front of every camera; the verifier drops the points that are not (one of
their views disagrees: a match slid along its epipolar line in one pair) and keeps the pair's
point where a keypoint has only the one pair.

Why our own: OpenCV's multi-view triangulation lives in its contrib ``sfm`` module (not in the
wheels used here), and GTSAM's ``triangulatePoint3`` solves one point per Python call, where a
window has hundreds to thousands of points; the batched solve below is the textbook DLT plus
Gauss-Newton, vectorized over the points with the same number of views.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

GAUSS_NEWTON_STEPS = 3


def refine_points(proj: Sequence[np.ndarray], keypoints: Sequence[np.ndarray],
                  views: Sequence[Sequence[Tuple[int, int]]], points: np.ndarray,
                  max_error_px: float) -> Tuple[np.ndarray, np.ndarray]:
    """Points solved from all their views.

    Args:
        proj: per map frame, its 3 x 4 projection matrix ``K [R | t]`` (world to pixels).
        keypoints: per map frame, its keypoints ``[N, 2]`` in pixels.
        views: per point, its observations ``(frame, keypoint index)`` (two or more).
        points: ``[M, 3]`` the current (two-view) points, returned where a solve fails.
        max_error_px: every view must reproject within this.

    Returns:
        ``(points [M, 3], solved [M] bool)``: the new points (the given ones where not solved)
        and which were solved from all views.
    """
    out = np.array(points, float, copy=True).reshape(-1, 3)
    solved = np.zeros(len(out), bool)
    counts = np.fromiter((len(obs) for obs in views), int, len(views))
    if not np.any(counts > 2):  # two views: the pair's own point already
        return out, solved
    # Every observation in one flat array (point by point), its pixel looked up once.
    flat = np.array([view for obs in views for view in obs], int).reshape(-1, 2)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    first = np.concatenate([[0], np.cumsum([len(k) for k in keypoints])[:-1]])
    pixels = np.concatenate([np.asarray(k, float).reshape(-1, 2) for k in keypoints])
    flat_xy = pixels[first[flat[:, 0]] + flat[:, 1]]
    P_all = np.stack([np.asarray(p, float) for p in proj])
    for count in np.unique(counts[counts > 2]):
        rows = np.flatnonzero(counts == count)
        at = starts[rows][:, None] + np.arange(count)                             # [B, m]
        frames, xy = flat[at, 0], flat_xy[at]                                     # xy [B, m, 2]
        P = P_all[frames]                                                        # [B, m, 3, 4]
        X = _dlt(P, xy)
        for _ in range(GAUSS_NEWTON_STEPS):
            X = _gauss_newton_step(P, xy, X)
        h = np.einsum("bmij,bj->bmi", P[..., :3], X) + P[..., 3]
        depth = h[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            err = np.linalg.norm(h[..., :2] / depth[..., None] - xy, axis=-1)
        ok = np.all(np.isfinite(X), axis=1) & np.all(depth > 0, axis=1) & np.all(
            err < max_error_px, axis=1)
        idx = rows[ok]
        out[idx] = X[ok]
        solved[idx] = True
    return out, solved


def _dlt(P: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Linear triangulation of ``[B]`` points, each from ``m`` views."""
    rows_x = xy[..., 0:1] * P[..., 2, :] - P[..., 0, :]
    rows_y = xy[..., 1:2] * P[..., 2, :] - P[..., 1, :]
    A = np.concatenate([rows_x, rows_y], axis=1)                                 # [B, 2m, 4]
    A = A / np.maximum(np.linalg.norm(A, axis=-1, keepdims=True), 1e-12)
    _, _, vt = np.linalg.svd(A, full_matrices=False)
    hom = vt[:, -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return hom[:, :3] / hom[:, 3:4]


def _gauss_newton_step(P: np.ndarray, xy: np.ndarray, X: np.ndarray) -> np.ndarray:
    """One Gauss-Newton step on the pixel reprojection errors of ``[B]`` points."""
    h = np.einsum("bmij,bj->bmi", P[..., :3], X) + P[..., 3]                   # [B, m, 3]
    z = h[..., 2:3]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = h[..., :2] / z - xy                                                  # [B, m, 2]
        # d(u, v)/dX = (P_12 - (u, v) P_3) / z
        J = (P[..., :2, :3] - (h[..., :2] / z)[..., None] * P[..., 2:3, :3]) / z[..., None]
    JtJ = np.einsum("bmki,bmkj->bij", J, J)
    Jtr = np.einsum("bmki,bmk->bi", J, r)
    good = np.all(np.isfinite(JtJ), axis=(1, 2)) & np.all(np.isfinite(Jtr), axis=1)
    step = np.zeros_like(X)
    if np.any(good):
        # a little damping keeps a point seen along one line (a singular system) where it is
        damp = 1e-9 * np.trace(JtJ[good], axis1=1, axis2=2)[:, None, None] * np.eye(3)
        step[good] = np.linalg.solve(JtJ[good] + damp + 1e-30 * np.eye(3),
                                     Jtr[good][..., None])[..., 0]
    return X - step
