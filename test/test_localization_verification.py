"""Structure-based verification of G2G relocalization (g2g_model.localization.verification).

Real simulated images (a test-split scene, mapping traversal in season 0, query traversal in
season 1), real SIFT, real PoseLib: no mocks.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sim_fixtures import tiny_trajectories  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.geometry import (axis_angle_to_matrix, invert_pose, make_pose,  # noqa: E402
                                relative_pose, rotation_angle_deg)
from g2g_model.estimation.groups import Group  # noqa: E402
from g2g_model.localization.covariance import transfer_covariance  # noqa: E402
from g2g_model.localization.verification import (  # noqa: E402
    G2G_COVARIANCE, PATH_G2G, PATH_REFINED, PATH_VERIFIED, StructureVerifier, VerifierConfig,
)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify_sim")
    paths = tiny_trajectories(out, seed=20003, frames=24, traversals=2)
    return [TrajectoryReader(p) for p in paths]


def case(scene, start: int = 4):
    """(map group, query group with odometry poses in another frame, true map_T_b)."""
    mapping, query = scene
    q_frames = list(range(start, start + 10, 2))
    body = query.world_T_body[q_frames[0]]
    dist = np.linalg.norm(mapping.world_T_body[:, :3, 3] - body[:3, 3], axis=1)
    m0 = int(np.clip(np.argmin(dist) - 4, 0, mapping.num_frames - 9))
    group_a = mapping.rig_group(range(m0, m0 + 9, 2))
    truth = query.rig_group(q_frames)
    # Odometry lives in its own frame: only the query's relative poses may matter.
    odom_T_world = make_pose(axis_angle_to_matrix(np.array([0.0, 0.0, 0.7])), [3.0, -2.0, 0.1])
    query_group = Group(images=truth.images, intrinsics=truth.intrinsics,
                        cam_to_world=odom_T_world @ np.asarray(truth.cam_to_world))
    return group_a, query_group, np.asarray(truth.cam_to_world)


def perturbed(map_T_b: np.ndarray, metres: float, degrees: float) -> np.ndarray:
    """The whole query group moved rigidly: what a G2G estimate that is off looks like."""
    delta = make_pose(axis_angle_to_matrix(np.radians(degrees) * np.array([0.0, 1.0, 0.0])),
                      [metres, 0.0, 0.0])
    return np.stack([map_T_b[0] @ delta @ invert_pose(map_T_b[0]) @ T for T in map_T_b])


def pose_error(a: np.ndarray, b: np.ndarray):
    rel = relative_pose(a, b)
    return float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))


def assert_covariance_covers(result, truth_b0: np.ndarray) -> None:
    """The published covariance is honest: the position and rotation errors are within 3
    standard deviations along the largest axis."""
    dt, dr = pose_error(truth_b0, result.map_T_b0)
    sd_m = float(np.sqrt(np.linalg.eigvalsh(result.covariance[:3, :3]).max()))
    sd_deg = float(np.degrees(np.sqrt(np.linalg.eigvalsh(result.covariance[3:, 3:]).max())))
    assert dt <= 3 * sd_m and dr <= 3 * sd_deg, (dt, sd_m, dr, sd_deg)


@pytest.mark.parametrize("feature", ["sift", "aliked"])
def test_cross_season_query_is_verified_to_centimetres(scene, feature):
    group_a, query, truth = case(scene)
    verifier = StructureVerifier(VerifierConfig(feature=feature))
    result = verifier(group_a, query, perturbed(truth, 0.3, 5.0))
    assert result.path == PATH_VERIFIED, result.reason
    dt, dr = pose_error(truth[0], result.map_T_b0)
    assert dt < 0.03 and dr < 0.5, (dt, dr, result.reason)
    assert result.inliers >= VerifierConfig().min_inliers
    sd = np.sqrt(np.diag(result.covariance))
    assert np.all(np.isfinite(result.covariance)) and np.all(np.linalg.eigvalsh(
        result.covariance) > 0)
    # The refined covariance is far tighter than a G2G-only estimate's, and covers the errors
    # (within 3 standard deviations along its widest axis).
    assert np.all(sd < 0.2 * np.sqrt(np.diag(G2G_COVARIANCE)))
    assert_covariance_covers(result, truth[0])
    assert result.g2g_disagreement[0] == pytest.approx(0.3, abs=0.05)


def test_a_g2g_estimate_that_is_off_is_refined(scene):
    group_a, query, truth = case(scene)
    result = StructureVerifier()(group_a, query, perturbed(truth, 1.2, 30.0))
    assert result.path == PATH_REFINED, result.reason
    dt, dr = pose_error(truth[0], result.map_T_b0)
    assert dt < 0.03 and dr < 0.5, (dt, dr, result.reason)
    assert "was off" in result.reason


@pytest.mark.parametrize("feature", ["sift", "aliked"])
def test_another_place_is_not_accepted(scene, tmp_path, feature):
    """A map window of ANOTHER scene with this query, G2G seeding the true pose: every
    geometric pose would be a false accept, so the verifier must fall back."""
    other = TrajectoryReader(tiny_trajectories(tmp_path, seed=20004, frames=10)[0])
    _, query, truth = case(scene)
    verifier = StructureVerifier(VerifierConfig(feature=feature))
    result = verifier(other.rig_group(range(0, 9, 2)), query, truth)
    assert result.path == PATH_G2G, result.reason
    assert "inliers" in result.reason or "match" in result.reason


def test_blank_images_fall_back_to_g2g_with_the_reason(scene):
    group_a, query, truth = case(scene)
    seed = perturbed(truth, 0.3, 5.0)
    blank = Group(images=[np.zeros_like(im) for im in query.images],
                  intrinsics=query.intrinsics, cam_to_world=query.cam_to_world)
    result = StructureVerifier()(group_a, blank, seed)
    assert result.path == PATH_G2G and result.inliers == 0
    assert "too few features" in result.reason
    np.testing.assert_array_equal(result.map_T_b0, seed[0])
    np.testing.assert_array_equal(result.covariance, G2G_COVARIANCE)


def test_a_map_window_seen_from_one_spot_is_degenerate(scene):
    group_a, query, truth = case(scene)
    one = Group(images=[group_a.images[0]] * 5, intrinsics=np.stack([group_a.intrinsics[0]] * 5),
                cam_to_world=np.stack([group_a.cam_to_world[0]] * 5))
    result = StructureVerifier()(one, query, truth)
    assert result.path == PATH_G2G
    assert "triangulated points" in result.reason and "0.00 m" in result.reason


def test_a_non_finite_g2g_estimate_is_reported(scene):
    group_a, query, truth = case(scene)
    bad = truth.copy()
    bad[0, 0, 3] = np.nan
    result = StructureVerifier()(group_a, query, bad)
    assert result.path == PATH_G2G and "not finite" in result.reason


def test_features_are_described_once(scene):
    group_a, query, truth = case(scene)
    verifier = StructureVerifier()
    verifier(group_a, query, truth)
    cached = len(verifier.local)
    verifier(group_a, query, truth)
    assert len(verifier.local) == cached == len(group_a.images) + len(query.images)


def test_transfer_covariance_adds_the_lever_arm():
    cov = np.diag([1e-4] * 3 + [1e-2] * 3)
    np.testing.assert_allclose(transfer_covariance(cov, np.zeros(3)), cov)
    moved = transfer_covariance(cov, np.array([1.0, 0.0, 0.0]))
    # A rotation about z moves a point 1 m along x sideways (y); x is unaffected by rotation.
    assert moved[0, 0] == pytest.approx(1e-4)
    assert moved[1, 1] == pytest.approx(1e-4 + 1e-2)
    assert moved[2, 2] == pytest.approx(1e-4 + 1e-2)


@pytest.mark.parametrize("field,value,match", [
    ("feature", "orb", "verify_feature"), ("min_inliers", 0, "min_inliers"),
    ("reprojection_px", float("nan"), "reprojection_px"), ("ratio", 1.5, "ratio"),
])
def test_bad_settings_are_refused(field, value, match):
    with pytest.raises(ValueError, match=match):
        StructureVerifier(VerifierConfig(**{field: value}))


def test_a_view_prior_narrows_the_matching_and_keeps_the_accuracy(scene):
    group_a, query, truth = case(scene)
    verifier = StructureVerifier()
    seed = perturbed(truth, 0.3, 5.0)
    result = verifier(group_a, query, seed, view_prior=truth)
    assert result.path == PATH_VERIFIED, result.reason
    assert pose_error(truth[0], result.map_T_b0)[0] < 0.03
    # A prior that looks the other way leaves each query image only map frames that do not
    # see what it sees: no pose is found (the prior really decides what is matched).
    away = truth @ make_pose(axis_angle_to_matrix([0.0, np.pi, 0.0]), [0.0, 0.0, 0.0])
    assert StructureVerifier()(group_a, query, seed, view_prior=away).path == PATH_G2G


def test_tracking_matches_near_the_priors_projections(scene):
    """verify_tracking_radius_px: with the true prior the pose is as accurate and at least as
    well supported; with a prior 0.5 m off the candidates near its projections are not the
    true ones, and no pose near that prior is made of them."""
    group_a, query, truth = case(scene)
    seed = perturbed(truth, 0.3, 5.0)
    plain = StructureVerifier()(group_a, query, seed, view_prior=truth)
    tracking = StructureVerifier(VerifierConfig(tracking_radius_px=20.0))
    result = tracking(group_a, query, seed, view_prior=truth)
    assert result.path == PATH_VERIFIED, result.reason
    assert pose_error(truth[0], result.map_T_b0)[0] < 0.03
    assert result.inliers >= plain.inliers
    off = perturbed(truth, 0.5, 0.0)
    wrong = tracking(group_a, query, seed, view_prior=off)
    assert wrong.path == PATH_G2G or pose_error(truth[0], wrong.map_T_b0)[0] < 0.03, \
        wrong.reason


def test_a_refinement_near_the_start_moves_no_further_than_drift_explains(scene):
    # The query's later instants placed 0.5 m off by the odometry (in a window of 0.53 m of
    # travel): the whole window's rigid solve is bent by about that much. Refined on the
    # instants within 0.5 m of the first, the anchor would move further than drift over the
    # window can explain, so the whole window's solution stands (window_span).
    group_a, query, truth = case(scene)
    instant = np.arange(len(query.images)) % 5  # rig_group: camera-major, 5 instants
    bent = np.asarray(query.cam_to_world).copy()
    bent[instant >= 2, :3, 3] += np.array([0.5, 0.0, 0.0])

    def run(query_poses, **config):
        q = Group(images=query.images, intrinsics=query.intrinsics, cam_to_world=query_poses,
                  stamps=list(instant))
        return StructureVerifier(VerifierConfig(**config))(group_a, q, perturbed(truth, 0.1, 2.0))

    whole = run(bent, window_span_m=0.0)
    assert whole.path != PATH_G2G and pose_error(truth[0], whole.map_T_b0)[0] > 0.1, whole.reason
    near = run(bent)
    np.testing.assert_allclose(near.map_T_b0, whole.map_T_b0, atol=1e-9)
    straight = run(np.asarray(query.cam_to_world))
    assert straight.path == PATH_VERIFIED and pose_error(truth[0], straight.map_T_b0)[0] < 0.03


def test_the_whole_window_stands_where_the_odometry_is_right(scene):
    # Right odometry inside the window: the instants near the start fit the refined pose no
    # better than noise explains, so the solve on all frames is published (window_span.
    # bend_shown); test_window_span.py has the bent case.
    group_a, query, truth = case(scene)
    q = Group(images=query.images, intrinsics=query.intrinsics, cam_to_world=query.cam_to_world,
              stamps=list(np.arange(len(query.images)) % 5))  # camera-major, 5 instants
    seed = perturbed(truth, 0.1, 2.0)
    published = StructureVerifier()(group_a, q, seed)
    whole = StructureVerifier(VerifierConfig(window_span_m=0.0))(group_a, q, seed)
    assert published.path == PATH_VERIFIED, published.reason
    assert "bent" not in published.reason
    np.testing.assert_allclose(published.map_T_b0, whole.map_T_b0, atol=1e-9)
