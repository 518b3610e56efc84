"""The query's anchor frame solved from its 2D-3D and 2D-2D matches with the map window
(g2g_model.localization.anchor_hybrid): accurate where the frame sees the map window's place,
with a covariance that covers its error, and uncertain where it does not.

Real simulated images, real SIFT, real PoseLib (``estimate_hybrid_pose``): no mocks.
"""

from __future__ import annotations

import pathlib
import sys
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sim_fixtures import tiny_trajectories  # noqa: E402
from test_localization_verification import (  # noqa: E402
    assert_covariance_covers, case, perturbed, pose_error,
)

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.estimation.groups import Group  # noqa: E402
from g2g_model.localization.anchor_hybrid import anchor_hybrid_pose  # noqa: E402
from g2g_model.localization.verification import StructureVerifier, VerifierConfig  # noqa: E402
from g2g_model.localization.verdict import Fallback, judge  # noqa: E402
from g2g_model.localization.window_relative import RelocalizationVerifier  # noqa: E402


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    out = tmp_path_factory.mktemp("anchor_hybrid_sim")
    paths = tiny_trajectories(out, seed=20003, frames=24, traversals=2)
    return [TrajectoryReader(p) for p in paths]


def _frames(group: Group, idx) -> Group:
    k = np.asarray(group.intrinsics)
    return Group([group.images[i] for i in idx], k[idx] if k.ndim == 3 else k,
                 np.asarray(group.cam_to_world)[idx])


def test_a_frame_among_the_map_frames_is_solved_with_an_honest_covariance(scene):
    group_a, _, _ = case(scene)
    window, anchor = _frames(group_a, [0, 1, 3, 4]), _frames(group_a, [2])
    truth = np.asarray(anchor.cam_to_world)
    structure = StructureVerifier()
    found = structure.query_matches(window, anchor)
    solved, cov, inliers, matched = anchor_hybrid_pose(
        structure.local, window, anchor, found, perturbed(truth, 0.3, 5.0)[0], 4.0)
    dt, dr = pose_error(truth[0], solved)
    assert dt < 0.02 and dr < 0.3, (dt, dr)
    assert inliers >= 100 and matched >= inliers
    assert_covariance_covers(SimpleNamespace(map_T_b0=solved, covariance=cov), truth[0])


def _accepted(structure, group_a, query, found, seed, cfg):
    """The anchor frame's pose if the verifier's rules accept it, else None (the rules of
    ``RelocalizationVerifier._anchor_hybrid``)."""
    try:
        solved, cov, inliers, matched = anchor_hybrid_pose(
            structure.local, group_a, query, found, seed, 4.0)
        if inliers < cfg.min_inliers:
            return None
        RelocalizationVerifier._check(inliers, matched)
        judge(seed, solved, cov, inliers, matched, cfg, near_prior=True)
    except Fallback:
        return None
    return solved


def test_another_season_s_frame_with_little_in_common_is_not_trusted(scene):
    """The query's frame of the other season against the whole map window has few matches
    with it (4 agree on one pose, measured 2026-11-30, with the first pair's map points; with
    points from all their views, since 2026-12-02, a pose 0.94 m / 11.9 deg off explains 38 of
    its 321 matches): from a seed 0.3 m / 5 deg or 0.1 m / 2 deg off, the verifier's rules
    (an outright refusal, verify_min_inliers, the share of the matches a pose must explain,
    judge's) accept no pose for it."""
    group_a, query, truth = case(scene)
    structure = StructureVerifier()
    found = structure.query_matches(group_a, query)
    cfg = VerifierConfig()
    for seed in (perturbed(truth, 0.3, 5.0)[0], perturbed(truth, 0.1, 2.0)[0]):
        solved = _accepted(structure, group_a, query, found, seed, cfg)
        assert solved is None, ("a pose from too little shared view passed the rules",
                                pose_error(truth[0], solved))
