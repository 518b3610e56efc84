"""Geometric inputs of the compact backbone: per-patch ray samples and per-frame pose vectors.

Conventions (ARCHITECTURE §1): OpenCV camera axes, K in pixels with integer coordinates at pixel
centres (as OpenCV and MapAnything use them), poses are camera-to-anchor 4x4 transforms with
frame 0 at the identity. Quaternions are (x, y, z, w) with w >= 0.

The pose vector of a frame is ``[q_xyzw (4), t / s (3), log s (1)]`` where ``s`` is the group's
mean translation norm over the frames with a known, non-zero translation (the same normalisation
MapAnything applies, with a lower clamp so a single-frame group stays finite).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

ANCHOR_TOLERANCE = 1e-4
ROTATION_TOLERANCE = 1e-3


def check_group_poses(cam_to_anchor: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``[B, N, 4, 4]`` poses are rigid with frame 0 the identity.

    The backbone does not re-anchor silently: a non-identity frame 0 almost always means the
    caller passed world poses instead of anchor-relative ones (use
    :func:`g2g_model.geometry.reanchor`).
    """
    if cam_to_anchor.dim() != 4 or cam_to_anchor.shape[-2:] != (4, 4):
        raise ValueError(f"cam_to_anchor must be [B, N, 4, 4], got {tuple(cam_to_anchor.shape)}")
    # Autocast off: R^T R in bf16 would be off by ~1e-2 and fail the rigidity check.
    with torch.autocast(cam_to_anchor.device.type, enabled=False):
        _check_group_poses_fp32(cam_to_anchor.detach().float())


def _check_group_poses_fp32(poses: torch.Tensor) -> None:
    eye = torch.eye(4, device=poses.device)
    anchor_error = (poses[:, 0] - eye).abs().amax()
    if anchor_error > ANCHOR_TOLERANCE:
        raise ValueError(
            f"cam_to_anchor[:, 0] must be the identity (frame 0 is the anchor), max |T0 - I| = "
            f"{anchor_error.item():.3g}; re-anchor the group with g2g_model.geometry.reanchor"
        )
    rot = poses[..., :3, :3]
    ortho_error = (rot.transpose(-1, -2) @ rot - eye[:3, :3]).abs().amax()
    # Triple product instead of torch.linalg.det: no LU call for a handful of 3x3 matrices.
    det = (rot[..., 0] * torch.linalg.cross(rot[..., 1], rot[..., 2], dim=-1)).sum(-1)
    det_error = (det - 1.0).abs().amax()
    bottom_error = (poses[..., 3, :] - eye[3]).abs().amax()
    if ortho_error > ROTATION_TOLERANCE or det_error > ROTATION_TOLERANCE or bottom_error > 1e-6:
        raise ValueError(
            f"cam_to_anchor must hold rigid transforms: max |R^T R - I| = {ortho_error.item():.3g}"
            f", max |det R - 1| = {det_error.item():.3g}, bottom row error "
            f"{bottom_error.item():.3g}"
        )


def patch_ray_samples(
    intrinsics: torch.Tensor, grid: Tuple[int, int], patch_size: int, samples: int
) -> torch.Tensor:
    """Unit ray directions at ``samples x samples`` points inside every patch, camera frame.

    Sample ``j`` along a patch side sits at pixel ``c * p + (j + 0.5) * p / s - 0.5`` (the centre
    of its sub-cell), so with ``s = 1`` it is the patch centre.

    Args:
        intrinsics: ``[B, N, 3, 3]`` pinhole K in pixels (skew ignored).
        grid: (rows, cols) of patches.
        patch_size: p, pixels per patch side.
        samples: s, samples per patch side.

    Returns:
        ``[B, N, P, s*s, 3]`` float32 unit vectors, P = rows * cols in row-major order.
    """
    k = intrinsics.float()
    rows, cols = grid
    step = patch_size / samples
    offsets = (torch.arange(samples, device=k.device, dtype=torch.float32) + 0.5) * step - 0.5
    ys = (torch.arange(rows, device=k.device, dtype=torch.float32) * patch_size)[:, None] + offsets
    xs = (torch.arange(cols, device=k.device, dtype=torch.float32) * patch_size)[:, None] + offsets
    # Pixel coordinates of every sample: [rows, cols, s, s].
    py = ys[:, None, :, None].expand(rows, cols, samples, samples)
    px = xs[None, :, None, :].expand(rows, cols, samples, samples)
    py = py.reshape(rows * cols, samples * samples)
    px = px.reshape(rows * cols, samples * samples)
    fx, fy = k[..., 0, 0, None, None], k[..., 1, 1, None, None]
    cx, cy = k[..., 0, 2, None, None], k[..., 1, 2, None, None]
    x = (px - cx) / fx
    y = (py - cy) / fy
    rays = torch.stack((x, y, torch.ones_like(x)), dim=-1)
    return rays / rays.norm(dim=-1, keepdim=True)


def matrix_to_quat_xyzw(rotation: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[..., 3, 3]`` to unit quaternions ``[..., 4]`` (x, y, z, w), w >= 0.

    Of the four equivalent formulas the one with the largest pivot is used per matrix, so the
    result is accurate near 180-degree rotations too.
    """
    r = rotation.float()
    m00, m01, m02 = r[..., 0, 0], r[..., 0, 1], r[..., 0, 2]
    m10, m11, m12 = r[..., 1, 0], r[..., 1, 1], r[..., 1, 2]
    m20, m21, m22 = r[..., 2, 0], r[..., 2, 1], r[..., 2, 2]
    pivots = torch.stack(
        (1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), -1
    )
    s = 2.0 * pivots.clamp_min(1e-12).sqrt()  # 4|w|, 4|x|, 4|y|, 4|z| over 2
    by_w = torch.stack(((m21 - m12) / s[..., 0], (m02 - m20) / s[..., 0],
                        (m10 - m01) / s[..., 0], 0.25 * s[..., 0]), -1)
    by_x = torch.stack((0.25 * s[..., 1], (m01 + m10) / s[..., 1],
                        (m02 + m20) / s[..., 1], (m21 - m12) / s[..., 1]), -1)
    by_y = torch.stack(((m01 + m10) / s[..., 2], 0.25 * s[..., 2],
                        (m12 + m21) / s[..., 2], (m02 - m20) / s[..., 2]), -1)
    by_z = torch.stack(((m02 + m20) / s[..., 3], (m12 + m21) / s[..., 3],
                        0.25 * s[..., 3], (m10 - m01) / s[..., 3]), -1)
    candidates = torch.stack((by_w, by_x, by_y, by_z), -2)  # [..., 4, 4]
    best = pivots.argmax(-1)[..., None, None].expand(r.shape[:-2] + (1, 4))
    quat = candidates.gather(-2, best).squeeze(-2)
    quat = quat / quat.norm(dim=-1, keepdim=True)
    return torch.where(quat[..., 3:4] < 0, -quat, quat)


def pose_vectors(
    cam_to_anchor: torch.Tensor, pose_known: torch.Tensor, min_scale: float
) -> torch.Tensor:
    """Per-frame pose encoder inputs.

    Args:
        cam_to_anchor: ``[B, N, 4, 4]`` camera-to-anchor transforms (frame 0 identity).
        pose_known: ``[B, N]`` bool; unknown frames do not count towards the scale and their
            vector is zeroed (the encoder replaces them with a learned token).
        min_scale: lower clamp in metres of the group translation scale ``s``.

    Returns:
        ``[B, N, 8]`` float32 ``[q_xyzw, t / s, log s]``.
    """
    poses = cam_to_anchor.float()
    known = pose_known.to(poses.dtype)
    trans = poses[..., :3, 3]
    norms = trans.norm(dim=-1) * known
    moving = (norms > 0).to(poses.dtype)
    scale = norms.sum(-1) / moving.sum(-1).clamp_min(1.0)
    scale = scale.clamp_min(min_scale)  # [B]
    quat = matrix_to_quat_xyzw(poses[..., :3, :3])
    log_scale = scale.log()[:, None, None].expand(poses.shape[0], poses.shape[1], 1)
    vec = torch.cat((quat, trans / scale[:, None, None], log_scale), dim=-1)
    return vec * known[..., None]


def anchor_rays(rays: torch.Tensor, cam_to_anchor: torch.Tensor) -> torch.Tensor:
    """Rotate camera-frame rays ``[B, N, P, S, 3]`` into the anchor frame with ``R_{0<-i}``."""
    rot = cam_to_anchor[..., :3, :3].float()
    return torch.einsum("bnij,bnpsj->bnpsi", rot, rays)


def default_pose_known(cam_to_anchor: torch.Tensor, pose_known: Optional[torch.Tensor]):
    """All-True ``[B, N]`` mask if ``pose_known`` is None, else a validated bool copy."""
    batch, frames = cam_to_anchor.shape[:2]
    if pose_known is None:
        return torch.ones(batch, frames, dtype=torch.bool, device=cam_to_anchor.device)
    if tuple(pose_known.shape) != (batch, frames):
        raise ValueError(f"pose_known must be [B, N] = {(batch, frames)}, got "
                         f"{tuple(pose_known.shape)}")
    pose_known = pose_known.to(torch.bool)
    if not bool(pose_known[:, 0].all()):
        raise ValueError("pose_known[:, 0] must be True: the anchor pose is the identity by "
                         "definition")
    return pose_known
