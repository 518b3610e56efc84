"""Extrinsic noise: anchor untouched, statistics as specified, inputs/targets untouched, seeded."""

import math

import numpy as np
import pytest
import torch

from g2g_model.training.augment import (
    NOISE_PRESETS, ExtrinsicNoiseConfig, perturb_group_poses, perturb_poses,
)
from g2g_model.geometry import make_pose, rotation_angle_deg


def random_group(n, seed):
    rng = np.random.default_rng(seed)
    poses = [np.eye(4)]
    for _ in range(n - 1):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        x, y, z, w = q
        r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        poses.append(make_pose(r, rng.normal(size=3) * 3))
    return torch.from_numpy(np.stack(poses))


def test_anchor_identity_and_input_untouched():
    a = random_group(5, 0).expand(3, 5, 4, 4).contiguous()
    b = random_group(4, 1).expand(3, 4, 4, 4).contiguous()
    a_in, b_in = a.clone(), b.clone()
    gen = torch.Generator().manual_seed(0)
    na, nb = perturb_group_poses(a, b, generator=gen)
    assert torch.equal(a, a_in) and torch.equal(b, b_in)  # clean poses (targets) unchanged
    assert torch.equal(na[:, 0], torch.eye(4, dtype=a.dtype).expand(3, 4, 4))
    assert torch.equal(nb[:, 0], torch.eye(4, dtype=b.dtype).expand(3, 4, 4))
    assert not torch.allclose(na[:, 1:], a[:, 1:])
    assert not torch.allclose(nb[:, 1:], b[:, 1:])
    # Still rigid transforms.
    r = na[..., :3, :3]
    eye = torch.eye(3, dtype=r.dtype)
    assert torch.allclose(r.transpose(-1, -2) @ r, eye.expand_as(r), atol=1e-10)
    assert torch.allclose(na[..., 3, :], torch.tensor([0, 0, 0, 1.0], dtype=r.dtype))


def test_noise_statistics():
    clean = random_group(5, 2).expand(4000, 5, 4, 4).contiguous()
    noisy = perturb_poses(clean, generator=torch.Generator().manual_seed(1)).numpy()
    clean = clean.numpy()
    # Right multiplication: delta = inv(T) @ T_noisy is the noise itself.
    delta = np.linalg.inv(clean[:, 1:]) @ noisy[:, 1:]
    angles = rotation_angle_deg(delta[..., :3, :3]).ravel()
    # |N(0, s)| has RMS s and mean s * sqrt(2/pi).
    assert math.sqrt(np.mean(angles ** 2)) == pytest.approx(1.5, rel=0.03)
    assert np.mean(angles) == pytest.approx(1.5 * math.sqrt(2 / math.pi), rel=0.03)
    dt = delta[..., :3, 3].reshape(-1, 3)
    np.testing.assert_allclose(dt.std(axis=0), [0.1, 0.1, 0.1], rtol=0.03)
    np.testing.assert_allclose(dt.mean(axis=0), [0, 0, 0], atol=0.005)
    # Axes are spread over the sphere: mean rotation vector ~ 0.
    rv = np.stack([delta[..., 2, 1] - delta[..., 1, 2], delta[..., 0, 2] - delta[..., 2, 0],
                   delta[..., 1, 0] - delta[..., 0, 1]], -1).reshape(-1, 3)
    assert np.abs(rv.mean(axis=0)).max() < 0.1 * np.abs(rv).mean()


def test_seeded_and_configurable():
    g = random_group(3, 3)
    x1 = perturb_poses(g, generator=torch.Generator().manual_seed(7))
    x2 = perturb_poses(g, generator=torch.Generator().manual_seed(7))
    x3 = perturb_poses(g, generator=torch.Generator().manual_seed(8))
    assert torch.equal(x1, x2) and not torch.equal(x1, x3)
    assert torch.equal(perturb_poses(g, NOISE_PRESETS["none"]), g)
    only_t = perturb_poses(g, ExtrinsicNoiseConfig(0.0, 0.1),
                           generator=torch.Generator().manual_seed(0))
    assert torch.allclose(only_t[:, :3, :3], g[:, :3, :3])
    with pytest.raises(ValueError, match="rot_std_deg"):
        ExtrinsicNoiseConfig(rot_std_deg=-1.0)
    with pytest.raises(ValueError, match="poses"):
        perturb_poses(torch.zeros(4, 4))


def test_perturb_poses_rotation_left_model():
    """Stage-1 pretraining's noise model: ``R <- R_noise R``, ``t <- t + n``, frame 0 kept; every
    frame draws, so the generator advances the same for any magnitude. The values are those of
    the pretraining code before the two noise functions became one (seed 0)."""
    clean = torch.eye(4).repeat(1, 3, 1, 1)
    noisy = perturb_poses(clean, ExtrinsicNoiseConfig(1.5, 0.1), torch.Generator().manual_seed(0),
                          model="rotation_left")
    expected_1 = torch.tensor([[0.99988937, -0.01177358, 0.00908471, 0.01227012],
                               [0.01173004, 0.99991953, 0.00482985, -0.05663175],
                               [-0.00914086, -0.00472273, 0.99994707, 0.03731146],
                               [0.0, 0.0, 0.0, 1.0]])
    torch.testing.assert_close(noisy[0, 1], expected_1, atol=1e-7, rtol=0)
    torch.testing.assert_close(noisy[0, 2, :3, 3],
                               torch.tensor([-0.08919954, -0.15091078, 0.03703935]),
                               atol=1e-7, rtol=0)
    assert torch.equal(noisy[:, 0], clean[:, 0])
    # Left multiplication: a translated pose keeps its translation up to the additive noise.
    moved = clean.clone()
    moved[..., :3, 3] = 5.0
    shifted = perturb_poses(moved, ExtrinsicNoiseConfig(1.5, 0.0),
                            torch.Generator().manual_seed(0), model="rotation_left")
    assert torch.equal(shifted[..., :3, 3], moved[..., :3, 3])
    # The generator advances identically with and without noise.
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    perturb_poses(clean, NOISE_PRESETS["none"], g1, model="rotation_left")
    perturb_poses(clean, NOISE_PRESETS["g2g"], g2, model="rotation_left")
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))
    with pytest.raises(ValueError, match="noise model"):
        perturb_poses(clean, model="left")
