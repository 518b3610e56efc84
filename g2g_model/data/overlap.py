"""Frame-pair overlap labels from depth cross-projection (ARCHITECTURE §3).

For frames a and b: back-project the valid depth pixels of a, move them into camera b, and count
those that land inside b's image, in front of it, with ``|z_b - depth_b| < tol``. The directional
ratio is covisible / valid; the symmetric overlap is the minimum of both directions.

Depth maps may be subsampled to ``size x size`` (56 by default: 3,136 points per frame) by taking
the pixel nearest to each cell centre; points are back-projected with the original intrinsics at
their original pixel, and looked up in the subsampled map of the other frame, so no intrinsics are
rescaled. Work is batched in torch over ``[frame pairs, points]``.

Exact culling keeps the cost down: a pair is only projected when the bounding box of a's points
(in the world) reaches into b's view frustum (otherwise a -> b is 0 without any per-point work),
and the symmetric overlap computes b -> a only for pairs with a -> b > 0 (min with 0 is 0).
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


class _Frames:
    """Per-frame data of one side: camera points, subsampled depth, projections, boxes."""

    def __init__(self, depth: np.ndarray, K: np.ndarray, world_T_cam: np.ndarray,
                 size: int | None, name: str) -> None:
        depth = np.asarray(depth, dtype=np.float32)
        if depth.ndim != 3:
            raise ValueError(f"{name}: depth must be [T,H,W], got {depth.shape}")
        if np.isnan(depth).any():
            raise ValueError(f"{name}: depth contains NaN")
        t, h, w = depth.shape
        self.pose = np.asarray(world_T_cam, dtype=np.float64).reshape(-1, 4, 4)
        if len(self.pose) != t:
            raise ValueError(f"{name}: {t} depth maps but {len(self.pose)} poses")
        self.K = np.broadcast_to(np.asarray(K, dtype=np.float64), (t, 3, 3))
        rows, cols = subsample_indices(h, size), subsample_indices(w, size)
        small = depth[:, rows][:, :, cols]                           # [T,s_h,s_w]
        uu, vv = np.meshgrid(cols.astype(np.float64), rows.astype(np.float64))
        pix = np.stack([uu.ravel(), vv.ravel(), np.ones(uu.size)], 0)  # [3,P]
        pts = (np.linalg.inv(self.K) @ pix) * small.reshape(t, 1, -1)   # [T,3,P] camera frame
        self.points = torch.from_numpy(pts.astype(np.float32))
        self.valid = self.points[:, 2, :] > 0                        # [T,P]
        self.n_valid = self.valid.sum(1)
        self.depth_flat = torch.from_numpy(np.ascontiguousarray(small).reshape(-1))
        self.shape = (h, w)
        self.small_shape = small.shape[1:]
        # World bounding boxes of the valid points, for culling.
        world = self.pose[:, :3, :3] @ pts + self.pose[:, :3, 3:]
        valid = (small.reshape(t, -1) > 0)[:, None, :]
        self.box_lo = np.where(valid, world, np.inf).min(-1)          # [T,3]
        self.box_hi = np.where(valid, world, -np.inf).max(-1)
        s_h, s_w = self.small_shape
        # Projection into the subsampled grid: cell = floor(q_xy / q_z + offset).
        scale = np.diag([s_w / w, s_h / h, 1.0])
        self.proj = scale[None] @ self.K @ np.linalg.inv(self.pose)[:, :3, :]   # [T,3,4]
        self.offset = (0.5 * s_w / w, 0.5 * s_h / h)

    def __len__(self) -> int:
        return len(self.pose)


def _frustum_candidates(a: _Frames, b: _Frames) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i, j) whose a-point box may reach b's image; all others have a -> b = 0."""
    corners = np.stack([np.where((np.arange(8)[:, None] >> np.arange(3)) & 1,
                                 a.box_hi[:, None], a.box_lo[:, None])], 0)[0]   # [T_A,8,3]
    ok_a = a.n_valid.numpy() > 0
    corners = np.where(ok_a[:, None, None], corners, 0.0)
    hom = np.concatenate([corners, np.ones(corners.shape[:2] + (1,))], -1)      # [T_A,8,4]
    s_h, s_w = b.small_shape
    q = np.einsum("bij,akj->abki", b.proj, hom)                                  # [T_A,T_B,8,3]
    x, y, z = q[..., 0], q[..., 1], q[..., 2]
    # Outside when all 8 corners are beyond the same plane: behind the camera, or past one
    # image border (x / z < -off  <=>  x + off z < 0 for z > 0; tested in homogeneous form).
    off_u, off_v = b.offset
    behind = (z <= 1e-3).all(-1)
    left = (x + off_u * z < 0).all(-1) & (z > 0).all(-1)
    right = (x + off_u * z >= s_w * z).all(-1) & (z > 0).all(-1)
    top = (y + off_v * z < 0).all(-1) & (z > 0).all(-1)
    bottom = (y + off_v * z >= s_h * z).all(-1) & (z > 0).all(-1)
    keep = ~(behind | left | right | top | bottom) & ok_a[:, None]
    return np.nonzero(keep)


def _pair_overlap(a: _Frames, b: _Frames, ia: np.ndarray, ib: np.ndarray, tol: float,
                  batch_pairs: int) -> np.ndarray:
    """Directional ratios ``[len(ia)]`` for the listed frame pairs."""
    out = np.zeros(len(ia), np.float32)
    s_h, s_w = b.small_shape
    off_u, off_v = b.offset
    for k0 in range(0, len(ia), batch_pairs):
        i = ia[k0:k0 + batch_pairs]
        j = ib[k0:k0 + batch_pairs]
        m = torch.from_numpy((b.proj[j] @ a.pose[i]).astype(np.float32))    # [N,3,4]
        ti = torch.from_numpy(i)
        q = m[:, :, :3] @ a.points[ti] + m[:, :, 3:]                          # [N,3,P]
        z = q[:, 2]
        inv_z = 1.0 / z.clamp(min=1e-6)
        ju = torch.floor(q[:, 0] * inv_z + off_u)
        jv = torch.floor(q[:, 1] * inv_z + off_v)
        inside = (ju >= 0) & (ju < s_w) & (jv >= 0) & (jv < s_h) & a.valid[ti]
        cell = (jv.clamp_(0, s_h - 1) * s_w + ju.clamp_(0, s_w - 1)).long()
        cell += torch.from_numpy(j * (s_h * s_w))[:, None]
        d_b = b.depth_flat[cell]
        # The third row of the projection is the camera-b z coordinate (depth).
        cov = inside & (d_b > 0) & ((z - d_b).abs() < tol) & (z > 1e-3)
        out[k0:k0 + len(i)] = (cov.sum(-1).float() / a.n_valid[ti].clamp(min=1).float()).numpy()
    return out


def directional_overlap(depth_a: np.ndarray, K_a: np.ndarray, world_T_cam_a: np.ndarray,
                        depth_b: np.ndarray, K_b: np.ndarray, world_T_cam_b: np.ndarray,
                        tol: float = DEFAULT_TOLERANCE_M, size: int | None = DEFAULT_SIZE,
                        batch_pairs: int = 1024) -> np.ndarray:
    """Fraction ``[T_A,T_B]`` of a's valid pixels that are covisible in b.

    Args:
        depth_a: ``[T_A,H_a,W_a]`` metric depth, 0 = invalid; likewise ``depth_b``.
        K_a: ``[3,3]`` or ``[T_A,3,3]``; world_T_cam_a: ``[T_A,4,4]`` (OpenCV camera axes).
        tol: depth agreement tolerance in metres (0.2-0.3 is typical).
        size: subsample both depth maps to ``size x size`` (None: full resolution).
        batch_pairs: frame pairs per batch (memory ~ batch_pairs x points x 60 bytes).
    """
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    a = _Frames(depth_a, K_a, world_T_cam_a, size, "a")
    b = _Frames(depth_b, K_b, world_T_cam_b, size, "b")
    out = np.zeros((len(a), len(b)), np.float32)
    ia, ib = _frustum_candidates(a, b)
    out[ia, ib] = _pair_overlap(a, b, ia, ib, tol, batch_pairs)
    return out


def overlap_matrix(depth_a: np.ndarray, K_a: np.ndarray, world_T_cam_a: np.ndarray,
                   depth_b: np.ndarray, K_b: np.ndarray, world_T_cam_b: np.ndarray,
                   tol: float = DEFAULT_TOLERANCE_M, size: int | None = DEFAULT_SIZE,
                   batch_pairs: int = 1024) -> np.ndarray:
    """Symmetric overlap ``[T_A,T_B]`` = min(a->b, (b->a)^T); arguments as
    :func:`directional_overlap`."""
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    a = _Frames(depth_a, K_a, world_T_cam_a, size, "a")
    b = _Frames(depth_b, K_b, world_T_cam_b, size, "b")
    ab = np.zeros((len(a), len(b)), np.float32)
    ia, ib = _frustum_candidates(a, b)
    ab[ia, ib] = _pair_overlap(a, b, ia, ib, tol, batch_pairs)
    # b -> a only where a -> b is non-zero (and b's points can reach a's frustum).
    cand = np.zeros_like(ab, dtype=bool)
    jb, ja = _frustum_candidates(b, a)
    cand[ja, jb] = True
    ia, ib = np.nonzero(cand & (ab > 0))
    out = np.zeros_like(ab)
    out[ia, ib] = np.minimum(ab[ia, ib], _pair_overlap(b, a, ib, ia, tol, batch_pairs))
    return out


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
