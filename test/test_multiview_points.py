"""Map points solved from every view that sees them (g2g_model.localization.multiview_points)."""

import cv2
import numpy as np

from g2g_model.localization.multiview_points import refine_points

K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])


def _projection(center):
    R = cv2.Rodrigues(np.array([0.0, -0.05 * center[0], 0.0]))[0]  # turned a little
    return K @ np.hstack([R, (-R @ center)[:, None]])


def _scene(noise_px, seed=0):
    rng = np.random.default_rng(seed)
    centers = [np.array([x, 0.0, 0.0]) for x in (0.0, 0.02, 0.3, 0.6)]
    proj = [_projection(c) for c in centers]
    points = rng.uniform([-1, -1, 3], [1, 1, 5], (300, 3))
    keypoints = []
    for P in proj:
        h = points @ P[:, :3].T + P[:, 3]
        keypoints.append(h[:, :2] / h[:, 2:3] + rng.normal(0, noise_px, (len(points), 2)))
    return proj, keypoints, points


def _pair_points(proj, keypoints, i, j):
    hom = cv2.triangulatePoints(proj[i], proj[j], keypoints[i].T, keypoints[j].T)
    return (hom[:3] / hom[3]).T


def test_all_views_beat_the_narrowest_pair():
    proj, keypoints, truth = _scene(noise_px=0.5)
    two_view = _pair_points(proj, keypoints, 0, 1)  # 2 cm apart: poor depth
    views = [[(f, n) for f in range(4)] for n in range(len(truth))]
    solved, ok = refine_points(proj, keypoints, views, two_view, max_error_px=4.0)
    assert ok.mean() > 0.95
    before = np.median(np.linalg.norm(two_view - truth, axis=1))
    after = np.median(np.linalg.norm(solved[ok] - truth[ok], axis=1))
    assert after < before / 5, (before, after)
    assert after < 0.05


def test_a_match_slid_along_its_epipolar_line_is_caught_and_two_views_are_left_alone():
    proj, keypoints, truth = _scene(noise_px=0.3, seed=1)
    # In frame 3 the first 50 keypoints belong to points 2 m further away along the ray of
    # frame 0: each pair with frame 0 still agrees (the epipolar line), the other views do not.
    slid = truth[:50] + 2.0 * truth[:50] / np.linalg.norm(truth[:50], axis=1, keepdims=True)
    h = slid @ proj[3][:, :3].T + proj[3][:, 3]
    keypoints[3][:50] = h[:, :2] / h[:, 2:3]
    views = [[(f, n) for f in range(4)] for n in range(len(truth))]
    views[60:] = [[(0, n), (2, n)] for n in range(60, len(truth))]   # two views only
    start = _pair_points(proj, keypoints, 0, 2)
    solved, ok = refine_points(proj, keypoints, views, start, max_error_px=4.0)
    assert not ok[:50].any()                        # inconsistent across views: not solved
    assert ok[50:60].all()
    assert not ok[60:].any() and np.array_equal(solved[60:], start[60:])   # nothing to add
    assert np.array_equal(solved[:50], start[:50])  # unsolved points are returned as given


def test_views_that_cannot_agree_are_returned_unsolved():
    """Keypoints of three different cameras given one camera's projection: no point
    reprojects into all of them, so none is solved and every point comes back as given."""
    proj, keypoints, truth = _scene(noise_px=0.0)
    same = [proj[0]] * 4
    views = [[(f, n) for f in range(3)] for n in range(10)]
    given = truth[:10] + 0.01
    solved, ok = refine_points(same, keypoints, views, given, max_error_px=4.0)
    assert not ok.any()
    assert np.array_equal(solved, given)
