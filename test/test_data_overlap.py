"""Depth cross-projection overlap: identity, facing away, a two-wall occlusion scene."""

import numpy as np
import pytest

from g2g_model.data.overlap import directional_overlap, overlap_matrix
from g2g_model.data.rig import pinhole_K
from g2g_model.geometry import axis_angle_to_matrix, make_pose

S = 56
K = pinhole_K(S, S, 90.0)  # fx = 28, cx = 27.5


def wall_depth(z, size=S):
    """Depth of a fronto-parallel wall at distance z for a camera looking at it."""
    return np.full((1, size, size), float(z), np.float32)


def test_identical_frame_has_overlap_one():
    rng = np.random.default_rng(0)
    depth = rng.uniform(1.0, 8.0, (1, S, S)).astype(np.float32)
    pose = make_pose(axis_angle_to_matrix([0.3, -0.2, 1.0]), [1.0, 2.0, 0.5])[None]
    assert overlap_matrix(depth, K, pose, depth, K, pose)[0, 0] == pytest.approx(1.0)


def test_camera_facing_away_has_overlap_zero():
    pose_a = np.eye(4)[None]
    pose_b = make_pose(axis_angle_to_matrix([0.0, np.pi, 0.0]), [0.0, 0.0, 0.0])[None]
    assert overlap_matrix(wall_depth(4), K, pose_a, wall_depth(4), K, pose_b)[0, 0] == 0.0


def test_sideways_translation_along_a_wall():
    # Both look at the wall z = 4 (HFOV 90: each sees 8 m of it). B is 2 m to the right, so 6 of
    # A's 8 m are in B's view and vice versa: 0.75 each way.
    pose_b = make_pose(np.eye(3), [2.0, 0.0, 0.0])[None]
    ov = overlap_matrix(wall_depth(4), K, np.eye(4)[None], wall_depth(4), K, pose_b, size=None)
    assert ov[0, 0] == pytest.approx(0.75, abs=1.0 / S)


def test_two_wall_scene_with_occlusion():
    # A sees only the far wall (z = 4). At the same pose, B sees a near wall (z = 2) covering the
    # right half of its image (u > cx) in front of the far wall. A's right-half points land where
    # B measures 2 m instead of 4 m: occluded. B's near-wall points land where A measures 4 m.
    # Both directions: exactly half of the pixels are covisible.
    depth_b = wall_depth(4)
    depth_b[0, :, S // 2:] = 2.0
    pose = np.eye(4)[None]
    ab = directional_overlap(wall_depth(4), K, pose, depth_b, K, pose, size=None)
    ba = directional_overlap(depth_b, K, pose, wall_depth(4), K, pose, size=None)
    assert ab[0, 0] == pytest.approx(0.5) and ba[0, 0] == pytest.approx(0.5)
    assert overlap_matrix(wall_depth(4), K, pose, depth_b, K, pose, size=None)[0, 0] == \
        pytest.approx(0.5)


def test_tolerance_and_invalid_depth():
    pose = np.eye(4)[None]
    near = overlap_matrix(wall_depth(4.0), K, pose, wall_depth(4.1), K, pose, tol=0.25)
    far = overlap_matrix(wall_depth(4.0), K, pose, wall_depth(4.4), K, pose, tol=0.25)
    assert near[0, 0] == pytest.approx(1.0) and far[0, 0] == 0.0
    empty = np.zeros((1, S, S), np.float32)
    assert overlap_matrix(empty, K, pose, wall_depth(4), K, pose)[0, 0] == 0.0
    with pytest.raises(ValueError, match="NaN"):
        overlap_matrix(np.full((1, S, S), np.nan, np.float32), K, pose, wall_depth(4), K, pose)


def test_matrix_batching_downsampling_and_symmetry():
    rng = np.random.default_rng(1)
    n, size = 5, 112
    k = pinhole_K(size, size, 80.0)
    depth = np.full((n, size, size), 5.0, np.float32)
    poses = np.stack([make_pose(axis_angle_to_matrix([0, rng.normal(0, 0.3), 0]),
                                [rng.normal(0, 0.8), 0, rng.normal(0, 0.5)]) for _ in range(n)])
    full = overlap_matrix(depth, k, poses, depth, k, poses, size=None, batch_pairs=1000)
    one = overlap_matrix(depth, k, poses, depth, k, poses, size=None, batch_pairs=1)
    small = overlap_matrix(depth, k, poses, depth, k, poses, size=56)
    np.testing.assert_allclose(full, one, atol=1e-6)
    np.testing.assert_allclose(full, full.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(full), 1.0)
    np.testing.assert_allclose(small, full, atol=0.05)
    assert 0.0 < full[~np.eye(n, dtype=bool)].min() < 1.0


def _reference_directional(depth_a, depth_b, k, pose_a, pose_b, tol):
    """Plain per-pixel loop-free numpy version for one pair, full resolution."""
    h, w = depth_a.shape
    vv, uu = np.mgrid[0:h, 0:w]
    valid = depth_a > 0
    rays = np.linalg.inv(k) @ np.stack([uu[valid], vv[valid], np.ones(valid.sum())])
    pts = rays * depth_a[valid]
    rel = np.linalg.inv(pose_b) @ pose_a
    p = rel[:3, :3] @ pts + rel[:3, 3:]
    z = p[2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.floor(k[0, 0] * p[0] / z + k[0, 2] + 0.5)
        v = np.floor(k[1, 1] * p[1] / z + k[1, 2] + 0.5)
    ok = (z > 1e-3) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    d_b = np.zeros_like(z)
    d_b[ok] = depth_b[v[ok].astype(int), u[ok].astype(int)]
    cov = ok & (d_b > 0) & (np.abs(z - d_b) < tol)
    return cov.sum() / max(valid.sum(), 1)


def test_culled_batched_matrix_matches_per_pair_reference():
    # Box-room-like depth: random smooth depth maps, cameras spread around and facing all ways
    # (so that frustum culling and the b -> a shortcut are both exercised).
    rng = np.random.default_rng(3)
    n, size = 6, 40
    k = pinhole_K(size, size, 100.0)
    yy, xx = np.mgrid[0:size, 0:size] / size
    depth = np.stack([2.0 + 2.0 * xx + rng.uniform(0, 1) * yy for _ in range(n)]).astype(
        np.float32)
    depth[0, :5] = 0.0  # some invalid pixels
    poses = np.stack([make_pose(axis_angle_to_matrix([0, rng.uniform(-np.pi, np.pi), 0]),
                                [rng.normal(0, 1), 0, rng.normal(0, 1)]) for _ in range(n)])
    got = directional_overlap(depth, k, poses, depth, k, poses, tol=0.3, size=None)
    ref = np.array([[_reference_directional(depth[i], depth[j], k, poses[i], poses[j], 0.3)
                     for j in range(n)] for i in range(n)])
    np.testing.assert_allclose(got, ref, atol=2.0 / size**2)
    sym = overlap_matrix(depth, k, poses, depth, k, poses, tol=0.3, size=None)
    np.testing.assert_allclose(sym, np.minimum(ref, ref.T), atol=2.0 / size**2)
    assert (ref == 0).any() and (ref > 0).sum() > n  # both kinds of pairs are present
