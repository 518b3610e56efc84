"""Frame-pair overlap labels from depth cross-projection (DESIGN section 3).

For frames a and b: back-project the valid depth pixels of a, move them into camera b, and count
those that land inside b's image, in front of it, with ``|z_b - depth_b| < tol``. The directional
ratio is covisible / valid; the symmetric overlap is the minimum of both directions.

Depth maps may be subsampled to ``size x size`` (56 by default: 3,136 points per frame) by taking
the pixel nearest to each cell centre; points are back-projected with the original intrinsics at
their original pixel, and looked up in the subsampled map of the other frame, so no intrinsics are
rescaled. Everything is batched in torch over ``[frames_a, frames_b, points]``.
"""

from __future__ import annotations

import numpy as np
import torch

DEFAULT_TOLERANCE_M = 0.25
DEFAULT_SIZE = 56


def subsample_indices(length: int, size: int | None) -> np.ndarray:
    """Original pixel indices ``[size]`` nearest to the centres of ``size`` equal cells."""
    if size is None or size >= length:
        return np.arange(length)
    return np.floor((np.arange(size) + 0.5) * length / size).astype(np.int64)


def _prepare(depth: np.ndarray, K: np.ndarray, size: int | None):
    depth = np.asarray(depth, dtype=np.float32)
    if depth.ndim != 3:
        raise ValueError(f"depth must be [T,H,W], got {depth.shape}")
    if np.isnan(depth).any():
        raise ValueError("depth contains NaN")
    t, h, w = depth.shape
    K = np.broadcast_to(np.asarray(K, dtype=np.float64), (t, 3, 3))
    rows, cols = subsample_indices(h, size), subsample_indices(w, size)
    small = depth[:, rows][:, :, cols]                          # [T,s_h,s_w]
    uu, vv = np.meshgrid(cols.astype(np.float64), rows.astype(np.float64))
    pix = np.stack([uu.ravel(), vv.ravel(), np.ones(uu.size)], 0)  # [3,P]
    rays = np.linalg.inv(K) @ pix                                 # [T,3,P], z = 1
    pts = rays * small.reshape(t, 1, -1)                          # camera-frame points
    return small, K, torch.from_numpy(pts.astype(np.float32)), (h, w)


def directional_overlap(depth_a: np.ndarray, K_a: np.ndarray, world_T_cam_a: np.ndarray,
                        depth_b: np.ndarray, K_b: np.ndarray, world_T_cam_b: np.ndarray,
                        tol: float = DEFAULT_TOLERANCE_M, size: int | None = DEFAULT_SIZE,
                        batch_pairs: int = 2048) -> np.ndarray:
    """Fraction ``[T_A,T_B]`` of a's valid pixels that are covisible in b.

    Args:
        depth_a: ``[T_A,H_a,W_a]`` metric depth, 0 = invalid; likewise ``depth_b``.
        K_a: ``[3,3]`` or ``[T_A,3,3]``; world_T_cam_a: ``[T_A,4,4]`` (OpenCV camera axes).
        tol: depth agreement tolerance in metres (0.2-0.3 is typical).
        size: subsample both depth maps to ``size x size`` (None: full resolution).
        batch_pairs: frame pairs per batch (bounds memory at ~ batch_pairs x points x 40 bytes).
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    _, _, pts_a, _ = _prepare(depth_a, K_a, size)
    small_b, Kb, _, (h_b, w_b) = _prepare(depth_b, K_b, size)
    ta, tb = len(pts_a), len(small_b)
    pose_a = np.asarray(world_T_cam_a, dtype=np.float64).reshape(ta, 4, 4)
    pose_b = np.asarray(world_T_cam_b, dtype=np.float64).reshape(tb, 4, 4)
    s_h, s_w = small_b.shape[1:]
    depth_b_flat = torch.from_numpy(np.ascontiguousarray(small_b).reshape(-1))
    valid_a = pts_a[:, 2, :] > 0                                  # [T_A,P]
    n_valid = valid_a.sum(1).clamp(min=1).float()
    # One 3x4 matrix per (b): camera-b pixel scaled to the subsampled grid, so a point's cell
    # is floor(q_x / q_z + 1/2 * s_w / w_b) without further per-point arithmetic.
    scale = np.diag([s_w / w_b, s_h / h_b, 1.0])
    proj_b = scale[None] @ Kb @ np.linalg.inv(pose_b)[:, :3, :]   # [T_B,3,4]
    off_u, off_v = 0.5 * s_w / w_b, 0.5 * s_h / h_b
    cell_base = (torch.arange(tb) * (s_h * s_w)).view(1, tb, 1)
    out = torch.zeros(ta, tb)
    rows_per = max(1, batch_pairs // max(tb, 1))
    for a0 in range(0, ta, rows_per):
        a1 = min(ta, a0 + rows_per)
        m = torch.from_numpy((proj_b[None] @ pose_a[a0:a1, None]).astype(np.float32))
        q = m[..., :3] @ pts_a[a0:a1, None] + m[..., 3:]             # [A,T_B,3,P]
        z = q[:, :, 2]
        inv_z = 1.0 / z.clamp(min=1e-6)
        ju = torch.floor(q[:, :, 0] * inv_z + off_u)
        jv = torch.floor(q[:, :, 1] * inv_z + off_v)
        inside = (ju >= 0) & (ju < s_w) & (jv >= 0) & (jv < s_h) & valid_a[a0:a1, None]
        flat = (jv.clamp_(0, s_h - 1) * s_w + ju.clamp_(0, s_w - 1)).long() + cell_base
        d_b = depth_b_flat[flat]
        # Depth agreement in camera b: z (the third row of K_b R | K_b t is the camera z).
        cov = inside & (d_b > 0) & ((z - d_b).abs() < tol) & (z > 1e-3)
        out[a0:a1] = cov.sum(-1).float() / n_valid[a0:a1, None]
    out[valid_a.sum(1) == 0] = 0.0
    return out.numpy()


def overlap_matrix(depth_a: np.ndarray, K_a: np.ndarray, world_T_cam_a: np.ndarray,
                   depth_b: np.ndarray, K_b: np.ndarray, world_T_cam_b: np.ndarray,
                   tol: float = DEFAULT_TOLERANCE_M, size: int | None = DEFAULT_SIZE,
                   batch_pairs: int = 2048) -> np.ndarray:
    """Symmetric overlap ``[T_A,T_B]`` = min(a->b, (b->a)^T); arguments as
    :func:`directional_overlap`."""
    ab = directional_overlap(depth_a, K_a, world_T_cam_a, depth_b, K_b, world_T_cam_b,
                             tol, size, batch_pairs)
    ba = directional_overlap(depth_b, K_b, world_T_cam_b, depth_a, K_a, world_T_cam_a,
                             tol, size, batch_pairs)
    return np.minimum(ab, ba.T)


def load_depth_stack(reader, cam: str) -> np.ndarray:
    """All depth maps ``[T,H,W]`` of camera ``cam`` of a :class:`TrajectoryReader` (full size;
    subsampling happens in :func:`overlap_matrix`)."""
    return np.stack([reader.depth(cam, i) for i in range(reader.num_frames)])


def trajectory_overlap(reader_a, cam_a: str, reader_b, cam_b: str,
                       tol: float = DEFAULT_TOLERANCE_M,
                       size: int | None = DEFAULT_SIZE) -> np.ndarray:
    """Symmetric overlap ``[T_A,T_B]`` between camera ``cam_a`` of trajectory ``reader_a`` and
    camera ``cam_b`` of ``reader_b`` (both with depth)."""
    for reader in (reader_a, reader_b):
        if not reader.has_depth:
            raise ValueError(f"{reader.path}: overlap needs depth")
    return overlap_matrix(load_depth_stack(reader_a, cam_a), reader_a.rig[cam_a].K,
                          reader_a.world_T_cam(cam_a), load_depth_stack(reader_b, cam_b),
                          reader_b.rig[cam_b].K, reader_b.world_T_cam(cam_b), tol, size)
