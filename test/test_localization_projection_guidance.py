"""Tracking's projection-guided 2D-3D matching (projection_guidance.py, point_matches.py)."""

import numpy as np

from g2g_model.geometry import make_pose
from g2g_model.localization.local_features import Features
from g2g_model.localization.point_matches import point_matches
from g2g_model.localization.projection_guidance import projected_candidates
from g2g_model.localization.verifier_config import VerifierConfig

K = np.array([[100.0, 0.0, 64.0], [0.0, 100.0, 48.0], [0.0, 0.0, 1.0]])


def test_candidates_are_the_points_projected_near_each_keypoint():
    cam = make_pose(np.eye(3), [1.0, 0.0, 0.0])  # camera 1 m along x, looking along z
    points = np.array([[1.0, 0.0, 2.0],     # straight ahead: pixel (64, 48)
                       [1.2, 0.0, 2.0],     # 10 px to the right
                       [1.0, 0.0, -2.0],    # behind the camera
                       [1.0, 0.5, 2.0]])    # 25 px down
    keypoints = np.array([[64.0, 48.0], [74.0, 48.0], [200.0, 200.0]])
    allowed = projected_candidates(keypoints, points, K, cam, radius_px=5.0)
    np.testing.assert_array_equal(allowed, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    wide = projected_candidates(keypoints, points, K, cam, radius_px=30.0)
    np.testing.assert_array_equal(wide[0], [1, 1, 0, 1])  # never the point behind


def _look_alikes(rng, n=40, dim=16):
    """n map points in two look-alike copies (descriptors equal up to noise, 1 m apart) and a
    query that sees the first copy: the ratio test cannot tell the copies apart."""
    base = rng.normal(size=(n, dim))
    descs = np.concatenate([base, base + 0.01 * rng.normal(size=(n, dim))])
    descs /= np.linalg.norm(descs, axis=1, keepdims=True)
    x = rng.uniform(-0.5, 0.5, n)
    y = rng.uniform(-0.4, 0.4, n)
    near = np.stack([x, y, np.full(n, 2.0)], 1)
    points = np.concatenate([near, near + [1.0, 0.0, 0.0]])
    uv = near @ K.T
    keypoints = uv[:, :2] / uv[:, 2:] + rng.normal(scale=0.5, size=(n, 2))
    query = base + 0.05 * rng.normal(size=(n, dim))
    query /= np.linalg.norm(query, axis=1, keepdims=True)
    return Features(keypoints, query.astype(np.float32)), points, descs.astype(np.float32)


def test_look_alikes_fail_the_ratio_test_unless_the_prior_separates_them():
    feats, points, descs = _look_alikes(np.random.default_rng(0))
    cfg = VerifierConfig()
    x, X = point_matches(feats, points, descs, cfg)
    assert len(x) <= 2  # every keypoint has a twin as close: nothing is distinctive
    allowed = projected_candidates(feats.keypoints, points, K, np.eye(4), radius_px=10.0)
    x, X = point_matches(feats, points, descs, cfg, allowed)
    assert len(x) >= 35
    np.testing.assert_allclose(X[:, 2], 2.0)
    assert np.all(np.abs(X[:, 0]) <= 0.5)  # the copy in view, never its twin


def test_a_wrong_prior_matches_little_rather_than_wrongly():
    feats, points, descs = _look_alikes(np.random.default_rng(1))
    wrong = make_pose(np.eye(3), [0.3, 0.0, 0.0])  # 15 px off everywhere
    allowed = projected_candidates(feats.keypoints, points, K, wrong, radius_px=10.0)
    x, X = point_matches(feats, points, descs, VerifierConfig(), allowed)
    assert len(x) <= 4
