"""Turn intrinsics and camera poses into MapAnything's geometric encoder inputs (torch).

Everything here reproduces the conventions the V1 weights were trained with:

* rays: integer pixel coordinates (no +0.5), ``((x - cx)/fx, (y - cy)/fy, 1)`` normalised to
  unit length; skew ignored.
* rotations: cam-to-reference quaternions, scalar last (x, y, z, w), from the best-conditioned
  of the four matrix-to-quaternion candidates, with ``w >= 0``; relative to view 0 as
  ``q0^-1 (x) qv`` (not re-standardised afterwards).
* translations: ``R(q0^-1) tv - R(q0^-1) t0``, divided per sample by the mean norm of the
  non-zero translations; the log of that factor feeds the scale encoder.
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F


def ray_directions(intrinsics: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Unit ray directions in the camera frame.

    Args:
        intrinsics: ``[..., 3, 3]`` pinhole K in pixels.
        height, width: image size in pixels.

    Returns:
        ``[..., H, W, 3]`` float32 unit vectors (OpenCV axes).
    """
    k = intrinsics.float()
    cols = torch.arange(width, device=k.device).float()
    rows = torch.arange(height, device=k.device).float()
    y_grid, x_grid = torch.meshgrid(rows, cols, indexing="ij")  # both [H, W]
    fx = k[..., 0, 0, None, None]
    fy = k[..., 1, 1, None, None]
    cx = k[..., 0, 2, None, None]
    cy = k[..., 1, 2, None, None]
    xx = (x_grid - cx) / fx
    yy = (y_grid - cy) / fy
    rays = torch.stack((xx, yy, torch.ones_like(xx)), dim=-1)
    return rays / torch.norm(rays, dim=-1, keepdim=True)


def matrix_to_quaternion_xyzw(rotation: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[..., 3, 3]`` -> unit quaternions ``[..., 4]`` (x, y, z, w), w >= 0.

    Four algebraically equal candidates are formed, each divided by one of 2|w|, 2|x|, 2|y|,
    2|z|; the one with the largest divisor is kept (robust near 180-degree rotations).
    """
    m = rotation.reshape(rotation.shape[:-2] + (9,)).unbind(-1)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = m
    squares = torch.stack(
        (1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22,
         1.0 - m00 + m11 - m22, 1.0 - m00 - m11 + m22), dim=-1)
    magnitudes = torch.where(squares > 0, torch.sqrt(squares.clamp_min(0)),
                             torch.zeros_like(squares))  # (2|w|, 2|x|, 2|y|, 2|z|)
    # Rows: candidate (w, x, y, z) scaled by 2|w|, 2|x|, 2|y|, 2|z| respectively.
    candidates = torch.stack((
        torch.stack((magnitudes[..., 0] ** 2, m21 - m12, m02 - m20, m10 - m01), dim=-1),
        torch.stack((m21 - m12, magnitudes[..., 1] ** 2, m10 + m01, m02 + m20), dim=-1),
        torch.stack((m02 - m20, m10 + m01, magnitudes[..., 2] ** 2, m12 + m21), dim=-1),
        torch.stack((m10 - m01, m20 + m02, m21 + m12, magnitudes[..., 3] ** 2), dim=-1),
    ), dim=-2)
    floor = torch.tensor(0.1, dtype=magnitudes.dtype, device=magnitudes.device)
    candidates = candidates / (2.0 * torch.maximum(magnitudes[..., None], floor))
    best = F.one_hot(magnitudes.argmax(dim=-1), num_classes=4).bool()
    wxyz = candidates[best].reshape(rotation.shape[:-2] + (4,))
    xyzw = wxyz[..., [1, 2, 3, 0]]
    return torch.where(xyzw[..., 3:4] < 0, -xyzw, xyzw)


def quaternion_to_matrix_xyzw(quat: torch.Tensor) -> torch.Tensor:
    """Quaternions ``[..., 4]`` (x, y, z, w), normalised first -> rotations ``[..., 3, 3]``."""
    q = quat / quat.norm(dim=-1, keepdim=True)
    x, y, z, w = q.unbind(-1)
    rows = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )
    return torch.stack(rows, dim=-1).reshape(quat.shape[:-1] + (3, 3))


def quaternion_inverse_xyzw(quat: torch.Tensor) -> torch.Tensor:
    """Conjugate divided by the squared norm, ``[..., 4]``."""
    conj = torch.cat((-quat[..., :3], quat[..., 3:]), dim=-1)
    return conj / (quat * quat).sum(dim=-1, keepdim=True)


def quaternion_multiply_xyzw(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a (x) b`` of ``[..., 4]`` (x, y, z, w) quaternions."""
    x1, y1, z1, w1 = a.unbind(-1)
    x2, y2, z2, w2 = b.unbind(-1)
    return torch.stack((
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
    ), dim=-1)


def relative_pose_inputs(cam_to_world: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Poses of every view in the frame of view 0, as the encoders see them.

    Args:
        cam_to_world: ``[B, N, 4, 4]`` camera-to-world (any common frame), OpenCV axes.

    Returns:
        ``(quats [B, N, 4] (x, y, z, w), trans [B, N, 3])`` of T_{0<-v}.
    """
    quats = matrix_to_quaternion_xyzw(cam_to_world[..., :3, :3])
    trans = cam_to_world[..., :3, 3]
    inv_ref = quaternion_inverse_xyzw(quats[:, :1]).expand_as(quats)
    rot_inv_ref = quaternion_to_matrix_xyzw(inv_ref)
    rel_quats = quaternion_multiply_xyzw(inv_ref, quats)
    ref_trans = trans[:, :1].expand_as(trans)
    rotated = (rot_inv_ref @ trans[..., None])[..., 0]
    rotated_ref = (rot_inv_ref @ ref_trans[..., None])[..., 0]
    return rel_quats, rotated - rotated_ref


def normalize_translations(trans: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Divide each sample's translations by their mean non-zero norm.

    Args:
        trans: ``[B, N, 3]`` relative translations (view 0 is zero).

    Returns:
        ``(trans / nf [B, N, 3], nf [B])`` with ``nf >= 1e-8``.
    """
    norms = trans.norm(dim=-1)
    count = (norms > 0).sum(dim=1)
    factor = (norms.sum(dim=1) / (count + 1e-8)).clip(min=1e-8)
    return trans / factor[:, None, None], factor
