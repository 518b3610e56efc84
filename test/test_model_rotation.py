"""6D rotation <-> matrix in the official columns convention."""

import math

import torch

from g2g_model.model.rotation import (
    IDENTITY_6D,
    compose_pose,
    matrix_to_rotation_6d,
    rotation_6d_to_matrix,
)


def _random_rotations(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(n, 3, 3, generator=g, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    q[torch.linalg.det(q) < 0, :, 2] *= -1  # proper rotations only
    return q


def test_columns_convention_hand_example():
    # a1 along y, a2 with a component along a1: b1 = y, b2 = x after Gram-Schmidt, b3 = y x x.
    r6 = torch.tensor([0.0, 2.0, 0.0, 3.0, 5.0, 0.0])
    rot = rotation_6d_to_matrix(r6)
    expected = torch.tensor([[0.0, 1.0, 0.0],
                             [1.0, 0.0, 0.0],
                             [0.0, 0.0, -1.0]])
    assert torch.allclose(rot, expected)
    # columns, not rows: the first COLUMN is the normalised a1
    assert torch.allclose(rot[:, 0], torch.tensor([0.0, 1.0, 0.0]))


def test_orthonormal_and_proper_for_arbitrary_inputs():
    r6 = torch.randn(200, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    rot = rotation_6d_to_matrix(r6)
    eye = torch.eye(3, dtype=torch.float64).expand(200, 3, 3)
    assert torch.allclose(rot.transpose(-1, -2) @ rot, eye, atol=1e-12)
    assert torch.allclose(torch.linalg.det(rot), torch.ones(200, dtype=torch.float64))


def test_round_trip_both_ways():
    rot = _random_rotations(50)
    assert torch.allclose(rotation_6d_to_matrix(matrix_to_rotation_6d(rot)), rot, atol=1e-12)
    # matrix -> 6D takes column 0 then column 1
    r6 = matrix_to_rotation_6d(rot)
    assert torch.equal(r6[:, :3], rot[:, :, 0]) and torch.equal(r6[:, 3:], rot[:, :, 1])
    # 6D -> matrix -> 6D is the Gram-Schmidt projection: idempotent, scale-invariant
    raw = torch.randn(20, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    once = matrix_to_rotation_6d(rotation_6d_to_matrix(raw))
    assert torch.allclose(matrix_to_rotation_6d(rotation_6d_to_matrix(once)), once, atol=1e-12)
    assert torch.allclose(rotation_6d_to_matrix(raw * 7.5), rotation_6d_to_matrix(raw),
                          atol=1e-12)


def test_identity_bias_and_rotation_about_z():
    assert torch.equal(rotation_6d_to_matrix(torch.tensor(IDENTITY_6D)), torch.eye(3))
    c, s = math.cos(0.3), math.sin(0.3)
    rz = torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    assert torch.allclose(rotation_6d_to_matrix(torch.tensor([c, s, 0.0, -s, c, 0.0])), rz)


def test_degenerate_input_stays_finite_and_gradients_flow():
    r6 = torch.zeros(1, 6, requires_grad=True)
    assert torch.isfinite(rotation_6d_to_matrix(r6)).all()
    r6 = torch.randn(4, 6, requires_grad=True)
    rotation_6d_to_matrix(r6).sum().backward()
    assert torch.isfinite(r6.grad).all() and r6.grad.abs().sum() > 0


def test_compose_pose():
    rot = _random_rotations(3).float()
    t = torch.randn(3, 3)
    pose = compose_pose(rot, t)
    assert pose.shape == (3, 4, 4)
    assert torch.equal(pose[:, :3, :3], rot) and torch.equal(pose[:, :3, 3], t)
    assert torch.equal(pose[:, 3], torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(3, 4))
