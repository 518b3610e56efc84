"""Continuous 6D rotation representation (torch), in the official G2G *columns* convention.

``r = (a1, a2)`` with ``a1 = r[0:3]``, ``a2 = r[3:6]``. Gram-Schmidt:
``b1 = a1 / max(|a1|, eps)``, ``b2 = a2 - (b1 . a2) b1`` normalised the same way,
``b3 = b1 x b2``, and ``R = [b1 | b2 | b3]`` with the b's as COLUMNS (``R[i, j] = b_j[i]``).
The inverse takes the first column then the second: ``(R00, R10, R20, R01, R11, R21)``.
The 6D vector of the identity is ``(1, 0, 0, 0, 1, 0)`` (the pose head's initial bias).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
NORMALIZE_EPS = 1e-6


def rotation_6d_to_matrix(rot6d: torch.Tensor) -> torch.Tensor:
    """``[..., 6] -> [..., 3, 3]`` rotation matrices (columns convention)."""
    if rot6d.shape[-1] != 6:
        raise ValueError(f"6D rotations need a last dimension of 6, got {tuple(rot6d.shape)}")
    a1, a2 = rot6d[..., 0:3], rot6d[..., 3:6]
    b1 = F.normalize(a1, dim=-1, eps=NORMALIZE_EPS)
    b2 = a2 - (b1 * a2).sum(dim=-1, keepdim=True) * b1
    b2 = F.normalize(b2, dim=-1, eps=NORMALIZE_EPS)
    b3 = torch.cross(b1, b2, dim=-1)
    return torch.stack([b1, b2, b3], dim=-1)


def matrix_to_rotation_6d(matrix: torch.Tensor) -> torch.Tensor:
    """``[..., 3, 3] -> [..., 6]``: first column, then second column."""
    if matrix.shape[-2:] != (3, 3):
        raise ValueError(f"rotation matrices need shape [..., 3, 3], got {tuple(matrix.shape)}")
    return torch.cat([matrix[..., :, 0], matrix[..., :, 1]], dim=-1)


def compose_pose(rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """``R [..., 3, 3]``, ``t [..., 3]`` -> homogeneous ``T [..., 4, 4]`` (x' = R x + t)."""
    top = torch.cat([rotation, translation.unsqueeze(-1)], dim=-1)
    bottom = torch.zeros(top.shape[:-2] + (1, 4), dtype=top.dtype, device=top.device)
    bottom[..., 0, 3] = 1.0
    return torch.cat([top, bottom], dim=-2)
