"""Dense covisibility labels from depth on analytic scenes."""

import numpy as np
import pytest

from g2g_model.covisibility.labels import covisible_mask, pair_labels, pool_mask, resize_depth
from g2g_model.geometry import axis_angle_to_matrix, make_pose

K = np.array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]])  # 64 x 48 image
PLANE = np.full((48, 64), 2.0)  # fronto-parallel wall 2 m ahead


def test_same_view_fully_covisible():
    pose = make_pose(axis_angle_to_matrix([0.1, -0.2, 0.3]), [1.0, 2.0, 3.0])
    out = pair_labels(PLANE, K, pose, PLANE, K, pose, grid_hw=(4, 4))
    assert out["r_ab"] == 1.0 and out["r_ba"] == 1.0
    np.testing.assert_array_equal(out["dense_a"], np.ones((4, 4)))


def test_sideways_shift_analytic():
    # b is 0.64 m to the right of a: a wall point at u_a lands at u_a - 50 * 0.64 / 2 = u_a - 16.
    a = np.eye(4)
    b = make_pose(np.eye(3), [0.64, 0.0, 0.0])
    out = pair_labels(PLANE, K, a, PLANE, K, b, grid_hw=(4, 4))
    assert out["r_ab"] == pytest.approx(48 / 64)
    assert out["r_ba"] == pytest.approx(48 / 64)
    np.testing.assert_array_equal(out["dense_a"], np.tile([0.0, 1, 1, 1], (4, 1)))
    np.testing.assert_array_equal(out["dense_b"], np.tile([1.0, 1, 1, 0], (4, 1)))


def test_occlusion_behind_and_invalid_depth():
    a = np.eye(4)
    # b sees a closer surface where a's wall would be: depth disagreement -> nothing covisible.
    cov, valid = covisible_mask(PLANE, K, a, np.full((48, 64), 1.0), K, a)
    assert valid.all() and not cov.any()
    # b looks backwards: every point is behind it.
    back = make_pose(axis_angle_to_matrix([0.0, np.pi, 0.0]), [0.0, 0.0, 0.0])
    cov, _ = covisible_mask(PLANE, K, a, PLANE, K, back)
    assert not cov.any()
    # Half of a has no depth: the ratio counts valid pixels only.
    depth = PLANE.copy()
    depth[:, :32] = 0.0
    depth[0, 40] = np.nan
    out = pair_labels(depth, K, a, PLANE, K, a, grid_hw=(4, 4))
    assert out["r_ab"] == 1.0
    np.testing.assert_array_equal(out["dense_a"][:, :2], 0.0)
    # b's pixels whose match in a is invalid are not covisible.
    assert out["r_ba"] == pytest.approx((32 * 48 - 1) / (64 * 48))
    with pytest.raises(ValueError, match="tol"):
        covisible_mask(PLANE, K, a, PLANE, K, a, tol=0.0)


def test_tolerance():
    a = np.eye(4)
    cov, _ = covisible_mask(PLANE, K, a, PLANE + 0.2, K, a, tol=0.25)
    assert cov.all()
    cov, _ = covisible_mask(PLANE, K, a, PLANE + 0.3, K, a, tol=0.25)
    assert not cov.any()


def test_resize_depth_keeps_projection():
    rng = np.random.default_rng(0)
    depth = rng.uniform(1, 5, (48, 64))
    small, k_small = resize_depth(depth, K, (12, 16))
    assert small.shape == (12, 16)
    # A 3-D point projects to the same place, in each image's own pixel units.
    point = np.array([0.3, -0.2, 2.0])
    uv = (K @ point)[:2] / point[2]
    uv_small = (k_small @ point)[:2] / point[2]
    np.testing.assert_allclose((uv + 0.5) / 4.0 - 0.5, uv_small)
    # Nearest sampling: small pixel (r, c) takes the full-res pixel under its centre.
    assert small[3, 5] == depth[3 * 4 + 2, 5 * 4 + 2]
    # Labels at reduced resolution agree with the analytic shift (16 px -> 4 px).
    small_plane, k2 = resize_depth(PLANE, K, (12, 16))
    out = pair_labels(small_plane, k2, np.eye(4), small_plane, k2,
                      make_pose(np.eye(3), [0.64, 0, 0]), grid_hw=(4, 4))
    assert out["r_ab"] == pytest.approx(0.75)


def test_pool_mask_fraction_of_valid():
    cov = np.zeros((4, 4), bool)
    cov[0, 0] = True
    valid = np.ones((4, 4), bool)
    valid[0, 1] = False
    valid[2:, 2:] = False
    frac = pool_mask(cov, valid, (2, 2))
    np.testing.assert_allclose(frac, [[1 / 3, 0], [0, 0]])
    with pytest.raises(ValueError, match="grid_hw"):
        pool_mask(cov, valid, (8, 8))


def test_samples_from_depth():
    import torch

    from g2g_model.covisibility.samples import SamplesError, samples_from_depth

    poses = np.stack([np.eye(4), make_pose(np.eye(3), [0.64, 0, 0]),
                      make_pose(axis_angle_to_matrix([0, np.pi, 0]), [0, 0, 0])])
    tokens = torch.randn(3, 16, 8)
    s = samples_from_depth(tokens, [PLANE] * 3, np.stack([K] * 3), poses,
                           pairs=[(0, 1), (1, 0), (0, 2)], dense_hw=(4, 4), label_hw=(24, 32),
                           encoder={"name": "compact", "config_hash": "h"})
    np.testing.assert_allclose(s.ratios.numpy(), [[0.75, 0.75], [0.75, 0.75], [0, 0]])
    np.testing.assert_array_equal(s.dense_a[0].numpy(), np.tile([0.0, 1, 1, 1], (4, 1)))
    np.testing.assert_array_equal(s.dense_a[1].numpy(), np.tile([1.0, 1, 1, 0], (4, 1)))
    batch = s.batch(torch.tensor([1]))
    torch.testing.assert_close(batch["tokens_a"][0], tokens[1])
    with pytest.raises(SamplesError, match="same frames"):
        samples_from_depth(tokens, [PLANE] * 2, np.stack([K] * 3), poses, [(0, 1)], (4, 4))
