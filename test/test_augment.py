"""Extrinsic noise: anchor untouched, statistics as specified, inputs/targets untouched, seeded."""

import math

import numpy as np
import pytest
import torch

from g2g_model.augment import (
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
