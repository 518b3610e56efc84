"""Relocalization's verifier with the relative pose between the windows
(g2g_model.localization.window_relative): solved where the structure is not, never instead of
it, refused for another place, and published with a covariance that covers its errors.

Real simulated images (a test-split scene, mapping traversal in season 0, query traversal in
season 1), real SIFT, real PoseLib: no mocks.
"""

from __future__ import annotations

import pathlib
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sim_fixtures import tiny_trajectories  # noqa: E402
from test_localization_verification import (  # noqa: E402
    assert_covariance_covers, case, perturbed, pose_error,
)

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.estimation.groups import Group  # noqa: E402
from g2g_model.geometry import make_pose, axis_angle_to_matrix  # noqa: E402
from g2g_model.localization.rig_epipolar import perturbed as perturbed_step  # noqa: E402
from g2g_model.localization.verdict import PATH_REFINED, Fallback, judge  # noqa: E402
from g2g_model.localization.verification import (  # noqa: E402
    PATH_G2G, PATH_VERIFIED, StructureVerifier, VerifierConfig,
)
from g2g_model.localization.window_relative import (  # noqa: E402
    MIN_INLIER_SHARE, PREFIX, RelocalizationVerifier, map_covariance,
)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    out = tmp_path_factory.mktemp("window_relative_sim")
    paths = tiny_trajectories(out, seed=20003, frames=24, traversals=2)
    return [TrajectoryReader(p) for p in paths]


def two_frames(group_a: Group) -> Group:
    """The map window's first two frames: too little structure for the 2D-3D solve."""
    return Group(images=group_a.images[:2], intrinsics=np.asarray(group_a.intrinsics)[:2],
                 cam_to_world=np.asarray(group_a.cam_to_world)[:2])


def fallback_on() -> RelocalizationVerifier:
    return RelocalizationVerifier(replace(VerifierConfig(), relative_fallback=True))


def test_a_window_without_enough_structure_is_solved_between_the_windows(scene):
    group_a, query, truth = case(scene)
    short = two_frames(group_a)
    seed = perturbed(truth, 0.3, 5.0)
    structure = StructureVerifier()(short, query, seed)
    assert structure.path == PATH_G2G and "inliers" in structure.reason
    result = fallback_on()(short, query, seed)
    assert result.path == PATH_VERIFIED and result.reason.startswith(PREFIX), result.reason
    dt, dr = pose_error(truth[0], result.map_T_b0)
    assert dt < 0.03 and dr < 0.5, (dt, dr, result.reason)
    assert result.g2g_disagreement[0] == pytest.approx(0.3, abs=0.05)
    assert np.all(np.linalg.eigvalsh(result.covariance) > 0)
    assert_covariance_covers(result, truth[0])
    # Off (the default), it is the structure's verifier alone.
    alone = RelocalizationVerifier()(short, query, seed)
    assert alone.path == PATH_G2G and alone.reason == structure.reason


def test_a_relative_pose_the_map_s_points_do_not_confirm_is_refused(scene):
    """A map window seen from one spot has no points: its relative pose (a few centimetres and
    up to 3.5 deg off in this scene, depending on G2G's seed) has nothing to confirm it."""
    group_a, query, truth = case(scene)
    one = Group(images=[group_a.images[0]] * 5,
                intrinsics=np.stack([group_a.intrinsics[0]] * 5),
                cam_to_world=np.stack([group_a.cam_to_world[0]] * 5))
    result = fallback_on()(one, query, perturbed(truth, 0.3, 5.0))
    assert result.path == PATH_G2G
    assert "not confirmed by the map's points" in result.reason, result.reason


def test_where_the_structure_solves_its_pose_is_kept(scene):
    group_a, query, truth = case(scene)
    seed = perturbed(truth, 0.3, 5.0)
    structure = StructureVerifier()(group_a, query, seed)
    result = fallback_on()(group_a, query, seed)
    assert structure.path == result.path == PATH_VERIFIED
    np.testing.assert_allclose(result.map_T_b0, structure.map_T_b0, atol=1e-9)
    assert result.reason == structure.reason


def test_another_place_is_not_accepted_by_either_geometry(scene, tmp_path):
    other = TrajectoryReader(tiny_trajectories(tmp_path, seed=20004, frames=10)[0])
    _, query, truth = case(scene)
    result = fallback_on()(other.rig_group(range(0, 9, 2)), query, truth)
    assert result.path == PATH_G2G
    assert PREFIX in result.reason, result.reason  # both geometries said why


def test_blank_images_and_a_non_finite_estimate_fall_back(scene):
    group_a, query, truth = case(scene)
    blank = Group(images=[np.zeros_like(im) for im in query.images],
                  intrinsics=query.intrinsics, cam_to_world=query.cam_to_world)
    result = fallback_on()(two_frames(group_a), blank, truth)
    assert result.path == PATH_G2G and "too few features" in result.reason
    bad = truth.copy()
    bad[0, 0, 3] = np.nan
    result = fallback_on()(group_a, query, bad)
    assert result.path == PATH_G2G and "not finite" in result.reason


def test_a_relative_pose_explaining_few_of_its_matches_or_far_from_g2g_is_refused():
    verifier = fallback_on()
    with pytest.raises(Fallback, match="inliers of"):
        verifier._check(73, 1386)  # measured on another place
    verifier._check(int(np.ceil(MIN_INLIER_SHARE * 500)), 500)
    # 400 inliers are trusted 3 m from G2G as 2D-3D inliers, never as 2D-2D ones.
    far = make_pose(np.eye(3), [3.0, 0.0, 0.0])
    tight = np.eye(6) * 1e-6
    assert judge(np.eye(4), far, tight, 400, 500, verifier.config)[0] == PATH_REFINED
    with pytest.raises(Fallback, match=r"\(400 inliers\) is 3.00 m / 0.0 deg from G2G's"):
        judge(np.eye(4), far, tight, 400, 500, verifier.config, near_prior=True)


def test_the_covariance_is_carried_into_the_map_frame():
    """The linearisation against moving the correction by small steps of its own
    parametrisation (a translation and a rotation about the first map camera's axes)."""
    rng = np.random.default_rng(3)
    correction = make_pose(axis_angle_to_matrix(np.radians([4.0, -7.0, 20.0])), [0.3, -0.2, 0.5])
    b0 = np.array([1.5, 0.2, -0.4])
    map_T_a0 = make_pose(axis_angle_to_matrix(np.radians([10.0, 30.0, -60.0])), [5.0, 1.0, 0.0])

    def centre_and_rotation(d6):
        pose = map_T_a0 @ perturbed_step(correction, d6) @ make_pose(np.eye(3), b0)
        return pose[:3, 3], pose[:3, :3]

    c0, r0 = centre_and_rotation(np.zeros(6))
    jac = np.zeros((6, 6))
    for k in range(6):
        d = np.zeros(6)
        d[k] = 1e-6
        c, r = centre_and_rotation(d)
        jac[:3, k] = (c - c0) / 1e-6
        small = r @ r0.T  # a small rotation: its axis times its angle from the skew part
        jac[3:, k] = 0.5 * np.array([small[2, 1] - small[1, 2], small[0, 2] - small[2, 0],
                                     small[1, 0] - small[0, 1]]) / 1e-6
    a = rng.normal(size=(6, 6))
    cov = a @ a.T
    np.testing.assert_allclose(map_covariance(cov, correction, b0, map_T_a0),
                               jac @ cov @ jac.T, rtol=1e-4, atol=1e-8)


def test_g2g_eval_turns_it_on_for_relocalization_only():
    from g2g_model.training.evaluate import default_methods, verifier_config

    specs = default_methods(["model.safetensors"], None, False, verify=True,
                            relative_fallback=True)
    verified = [s for s in specs if s.verify]
    assert [s.label for s in verified] == ["geometry", "model+verified"]
    assert all(s.relative_fallback for s in verified)
    assert verifier_config("reloc", verified[0]).relative_fallback
    assert verifier_config("rig", verified[0]) is None
    plain = default_methods(["model.safetensors"], None, False, verify=True)
    assert all(verifier_config("reloc", s) is None for s in plain)


def upside_down(query: Group, truth: np.ndarray):
    """The query taken by cameras mounted upside down: images turned 180 deg, their principal
    points moved to match, the camera poses turned about their optical axes."""
    flip = np.diag([-1.0, -1.0, 1.0, 1.0])
    intrinsics = np.array(query.intrinsics, float)
    h, w = np.asarray(query.images[0]).shape[:2]
    intrinsics[:, 0, 2] = w - 1 - intrinsics[:, 0, 2]
    intrinsics[:, 1, 2] = h - 1 - intrinsics[:, 1, 2]
    images = [np.ascontiguousarray(np.asarray(im)[::-1, ::-1]) for im in query.images]
    return Group(images, intrinsics, np.asarray(query.cam_to_world) @ flip), truth @ flip


def test_the_fallback_feature_solves_where_the_first_finds_nothing(scene):
    """ALIKED's descriptors are not rotation invariant, RootSIFT's are: under an upside-down
    query ALIKED finds too few inliers and RootSIFT, its fallback here, solves."""
    group_a, query, truth = case(scene)
    query, truth = upside_down(query, truth)
    seed = perturbed(truth, 0.3, 5.0)
    alone = RelocalizationVerifier(VerifierConfig(feature="aliked"))(group_a, query, seed)
    assert alone.path == PATH_G2G and "inliers" in alone.reason
    both = RelocalizationVerifier(VerifierConfig(feature="aliked", fallback_feature="sift"))
    result = both(group_a, query, seed)
    assert result.path == PATH_VERIFIED, result.reason
    assert result.reason.startswith("sift: ") and f"(aliked: {alone.reason})" in result.reason
    dt, dr = pose_error(truth[0], result.map_T_b0)
    assert dt < 0.02 and dr < 0.5, (dt, dr)
    assert both.other.cache_bytes() > 0
    # The two kinds of features share the verifier's memory bound.
    given = VerifierConfig().cache_mb
    assert both.config.cache_mb == both.other.config.cache_mb == given / 2


def test_the_fallback_feature_is_not_used_where_the_first_solves_and_says_why_it_failed(scene):
    group_a, query, truth = case(scene)
    seed = perturbed(truth, 0.3, 5.0)
    both = RelocalizationVerifier(VerifierConfig(fallback_feature="aliked"))
    result = both(group_a, query, seed)
    plain = RelocalizationVerifier()(group_a, query, seed)
    assert result.path == plain.path == PATH_VERIFIED and result.reason == plain.reason
    np.testing.assert_allclose(result.map_T_b0, plain.map_T_b0, atol=1e-9)
    assert both.other.cache_bytes() == 0  # ALIKED never ran
    blank = Group([np.zeros_like(im) for im in query.images], query.intrinsics,
                  query.cam_to_world)
    failed = both(group_a, blank, seed)
    assert failed.path == PATH_G2G
    assert failed.reason.startswith("too few features") and "; aliked: " in failed.reason


@pytest.mark.parametrize("feature, fallback", [("sift", "sift"), ("sift", "orb")])
def test_a_fallback_feature_that_cannot_help_is_refused(feature, fallback):
    with pytest.raises(ValueError, match="fallback_feature must be empty"):
        VerifierConfig(feature=feature, fallback_feature=fallback).validate()
