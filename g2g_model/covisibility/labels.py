"""Dense covisibility labels from depth (training targets of the dense and scalar heads).

Pixel p of frame a is *covisible in b* when its depth is valid and its back-projected point,
moved into camera b, lies in front of b (z > 0), projects inside b's image, and agrees with b's
depth there: ``|z_b - depth_b[q]| < tol`` (nearest pixel q). The directional ratio is
``r_ab = covisible / valid`` over a's pixels (ARCHITECTURE §3). Vectorised numpy; run it on
depth maps reduced to a coarse grid (e.g. 56 x 56 with :func:`resize_depth`) for speed.

Pixel convention: integer pixel coordinates are pixel centres (OpenCV).
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from g2g_model.geometry import relative_pose


def resize_depth(depth: np.ndarray, intrinsics: np.ndarray,
                 size_hw: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    """Nearest-neighbour resize of a depth map and the matching intrinsics.

    Args:
        depth: ``[H, W]`` metres (0 or non-finite = invalid).
        intrinsics: ``[3, 3]`` K of the full-resolution image.
        size_hw: (h, w) target size.
    Returns:
        ``depth [h, w]`` and ``K [3, 3]`` of the resized image.
    """
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f"depth must be [H, W], got shape {depth.shape}")
    h, w = int(size_hw[0]), int(size_hw[1])
    sy, sx = h / depth.shape[0], w / depth.shape[1]
    rows = np.minimum(((np.arange(h) + 0.5) / sy).astype(np.int64), depth.shape[0] - 1)
    cols = np.minimum(((np.arange(w) + 0.5) / sx).astype(np.int64), depth.shape[1] - 1)
    k = np.asarray(intrinsics, dtype=np.float64).copy()
    k[0, 0] *= sx
    k[1, 1] *= sy
    k[0, 2] = (k[0, 2] + 0.5) * sx - 0.5
    k[1, 2] = (k[1, 2] + 0.5) * sy - 0.5
    return depth[rows[:, None], cols[None, :]], k


def covisible_mask(
    depth_a: np.ndarray, intrinsics_a: np.ndarray, world_T_cam_a: np.ndarray,
    depth_b: np.ndarray, intrinsics_b: np.ndarray, world_T_cam_b: np.ndarray,
    tol: float = 0.25,
) -> Tuple[np.ndarray, np.ndarray]:
    """Per-pixel covisibility of frame a in frame b.

    Args:
        depth_a, depth_b: ``[H, W]`` z-depth in metres (0 / non-finite = invalid); sizes may
            differ between the frames.
        intrinsics_a, intrinsics_b: ``[3, 3]`` K of each depth map.
        world_T_cam_a, world_T_cam_b: ``[4, 4]`` camera-to-world poses, OpenCV axes.
        tol: depth agreement tolerance in metres.
    Returns:
        ``covisible [H_a, W_a]`` bool and ``valid [H_a, W_a]`` bool (a's valid depth).
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    depth_a = np.asarray(depth_a, dtype=np.float64)
    depth_b = np.asarray(depth_b, dtype=np.float64)
    for name, d in (("depth_a", depth_a), ("depth_b", depth_b)):
        if d.ndim != 2:
            raise ValueError(f"{name} must be [H, W], got shape {d.shape}")
    h, w = depth_a.shape
    valid = np.isfinite(depth_a) & (depth_a > 0)
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    z = np.where(valid, depth_a, 0.0)
    rays = np.linalg.solve(np.asarray(intrinsics_a, np.float64),
                           np.stack([u.ravel(), v.ravel(), np.ones(h * w)]))
    points_a = rays * z.ravel()  # [3, H*W] in camera a
    b_T_a = relative_pose(world_T_cam_b, world_T_cam_a)
    points_b = b_T_a[:3, :3] @ points_a + b_T_a[:3, 3:4]
    zb = points_b[2]
    front = zb > 1e-6
    proj = np.asarray(intrinsics_b, np.float64) @ points_b
    with np.errstate(divide="ignore", invalid="ignore"):
        ub = np.where(front, proj[0] / np.where(front, zb, 1.0), -1.0)
        vb = np.where(front, proj[1] / np.where(front, zb, 1.0), -1.0)
    hb, wb = depth_b.shape
    iu, iv = np.rint(ub).astype(np.int64), np.rint(vb).astype(np.int64)
    inside = front & (iu >= 0) & (iu < wb) & (iv >= 0) & (iv < hb)
    ref = np.zeros(h * w)
    ref[inside] = depth_b[iv[inside], iu[inside]]
    ref_ok = np.isfinite(ref) & (ref > 0)
    agree = np.zeros(h * w, dtype=bool)
    agree[ref_ok] = np.abs(zb[ref_ok] - ref[ref_ok]) < tol
    covisible = valid.ravel() & inside & ref_ok & agree
    return covisible.reshape(h, w), valid


def pool_mask(covisible: np.ndarray, valid: np.ndarray, grid_hw: Tuple[int, int]) -> np.ndarray:
    """Fraction of valid pixels that are covisible in each cell of a ``gh x gw`` grid.

    Cells are the (near-)equal blocks of an adaptive pooling; cells with no valid pixel get 0.
    Returns ``[gh, gw]`` float32 in [0, 1].
    """
    h, w = covisible.shape
    gh, gw = int(grid_hw[0]), int(grid_hw[1])
    if gh < 1 or gw < 1 or gh > h or gw > w:
        raise ValueError(f"grid_hw {grid_hw} must be positive and no finer than {h} x {w}")
    rows = (np.arange(h) * gh) // h
    cols = (np.arange(w) * gw) // w
    cell = (rows[:, None] * gw + cols[None, :]).ravel()
    cov = np.bincount(cell, weights=covisible.ravel().astype(np.float64), minlength=gh * gw)
    val = np.bincount(cell, weights=valid.ravel().astype(np.float64), minlength=gh * gw)
    frac = np.divide(cov, val, out=np.zeros_like(cov), where=val > 0)
    return frac.reshape(gh, gw).astype(np.float32)


def pair_labels(
    depth_a: np.ndarray, intrinsics_a: np.ndarray, world_T_cam_a: np.ndarray,
    depth_b: np.ndarray, intrinsics_b: np.ndarray, world_T_cam_b: np.ndarray,
    grid_hw: Tuple[int, int], tol: float = 0.25,
) -> Dict[str, np.ndarray]:
    """Both directions of one pair: dense labels on a grid and the directional ratios.

    Returns:
        ``dense_a [gh, gw]`` (fraction of a's cell covisible in b), ``dense_b [gh, gw]``,
        ``r_ab`` and ``r_ba`` (0-d float32 arrays; 0 when a frame has no valid depth).
    """
    out = {}
    for src, args in (("a", (depth_a, intrinsics_a, world_T_cam_a, depth_b, intrinsics_b,
                             world_T_cam_b)),
                      ("b", (depth_b, intrinsics_b, world_T_cam_b, depth_a, intrinsics_a,
                             world_T_cam_a))):
        cov, valid = covisible_mask(*args, tol=tol)
        n_valid = int(valid.sum())
        ratio = cov.sum() / n_valid if n_valid else 0.0
        out[f"dense_{src}"] = pool_mask(cov, valid, grid_hw)
        out["r_ab" if src == "a" else "r_ba"] = np.float32(ratio)
    return out
