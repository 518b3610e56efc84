"""The ambiguity check of relocalization's structure verifier (g2g_model.localization.ambiguity):
2D-3D matches of a two-frame query window made by two poses, as repeated texture makes them."""

from __future__ import annotations

import numpy as np
import pytest

from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose
from g2g_model.localization.ambiguity import (
    MARGIN_SD, Ambiguous, check_unambiguous, lead_sd, rival_pose,
)
from g2g_model.localization.verifier_config import VerifierConfig
from g2g_model.poselib_conversions import camera_pose, pinhole_camera

K = np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
SIZE = (480, 640)
# The query window: its first camera and a second one 0.3 m to its right, turned 5 deg.
B0_T_CAM = [np.eye(4), make_pose(axis_angle_to_matrix(np.radians([0.0, 5.0, 0.0])),
                                 [0.3, 0.0, 0.0])]
TRUE = make_pose(axis_angle_to_matrix(np.radians([2.0, -10.0, 1.0])), [1.0, 0.5, -2.0])


def matches(world_T_b0: np.ndarray, count: int, rng: np.random.Generator):
    """``count`` 2D-3D matches per camera that ``world_T_b0`` explains (0.5 px noise)."""
    p2d, p3d = [], []
    for b0_T_cam in B0_T_CAM:
        world_T_cam = world_T_b0 @ b0_T_cam
        pix = rng.uniform([20, 20], [620, 460], (count, 2))
        depth = rng.uniform(2.0, 8.0, count)
        rays = np.c_[(pix - K[:2, 2]) / K[0, 0], np.ones(count)] * depth[:, None]
        p3d.append(rays @ world_T_cam[:3, :3].T + world_T_cam[:3, 3])
        p2d.append(pix + rng.normal(0.0, 0.5, pix.shape))
    return p2d, p3d


def window(*parts):
    """The matches of every part together, and the window's PoseLib cameras."""
    p2d = [np.concatenate([p[0][i] for p in parts]) for i in range(2)]
    p3d = [np.concatenate([p[1][i] for p in parts]) for i in range(2)]
    exts = [camera_pose(invert_pose(t)) for t in B0_T_CAM]
    cams = [pinhole_camera(K, SIZE)] * 2
    return p2d, p3d, exts, cams, np.stack([K, K])


def shifted(metres: float) -> np.ndarray:
    return TRUE @ make_pose(np.eye(3), [metres, 0.0, 0.0])


def test_a_rival_one_texture_period_away_with_as_many_matches_is_refused():
    rng = np.random.default_rng(0)
    args = window(matches(TRUE, 60, rng), matches(shifted(0.75), 55, rng),
                  (list(rng.uniform(0, 640, (2, 40, 2))), list(rng.uniform(-5, 5, (2, 40, 3)))))
    best, count, rival = rival_pose(*args, TRUE, VerifierConfig())
    assert best.sum() == pytest.approx(120, abs=3) and count.sum() == pytest.approx(110, abs=3)
    assert np.linalg.norm(rival[:3, 3] - shifted(0.75)[:3, 3]) < 0.02
    with pytest.raises(Ambiguous, match=r"0\.75 m / 0\.0 deg away explains 1\d\d matches"):
        check_unambiguous(*args, TRUE, VerifierConfig())


def test_a_clear_winner_and_a_near_rival_stand():
    rng = np.random.default_rng(1)
    cfg = VerifierConfig()
    # The same period, a quarter of the support: a lead of far more than MARGIN_SD.
    check_unambiguous(*window(matches(TRUE, 80, rng), matches(shifted(0.75), 20, rng)),
                      TRUE, cfg)
    # As many matches 5 cm away: the same place, not a wrong one.
    check_unambiguous(*window(matches(TRUE, 60, rng), matches(shifted(0.05), 60, rng)),
                      TRUE, cfg)
    # Every match the pose's: nothing to search.
    best, count, rival = rival_pose(*window(matches(TRUE, 50, rng)), TRUE, cfg)
    assert best.tolist() == [50, 50] and count.tolist() == [0, 0] and rival is None


def test_a_window_bent_by_drift_is_not_ambiguous():
    # The second image placed 0.5 m off by the odometry: each image sides with its own pose,
    # as many matches each; no image is contested.
    rng = np.random.default_rng(2)
    first = window(matches(TRUE, 70, rng))
    other = window(matches(shifted(0.5), 70, rng))
    p2d, p3d = [first[0][0], other[0][1]], [first[1][0], other[1][1]]
    best, count, rival = rival_pose(p2d, p3d, *other[2:], TRUE, VerifierConfig())
    assert best.tolist()[0] == 70 and best[1] < 5 and count[1] > 60 and rival is not None
    check_unambiguous(p2d, p3d, *other[2:], TRUE, VerifierConfig())


def test_the_lead_is_counted_in_standard_deviations():
    assert lead_sd(104, 97) == pytest.approx(7 / np.sqrt(201))
    assert lead_sd(30, 6) == pytest.approx(4.0)
    assert lead_sd(0, 0) == float("inf") and MARGIN_SD == 3.0
