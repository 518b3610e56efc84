"""The ROS-free localization engine: WindowSelector and Relocalizer, without DDS.

A map is built from one traversal of a small simulated scene with the embedded default model;
the query is the other traversal, with odometry poses in an ``odom`` frame that is offset from
the map by a known transform, so that a correct correction is known exactly. Verifiers here are
plain callables standing in for the geometric verifier (its interface is
:mod:`g2g_model.localization.verification`).
"""

import numpy as np
import pytest

from g2g_model.data.format import TrajectoryReader
from g2g_model.geometry import axis_angle_to_matrix, fuse_poses, invert_pose, make_pose
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.localization.correction import GateConfig, QueryFrame
from g2g_model.localization.relocalizer import G2G_COVARIANCE, Relocalizer
from g2g_model.localization.verification import StructureVerifier, Verification
from g2g_model.localization.selector_config import SelectorConfig
from g2g_model.localization.window_selector import WindowSelector
from g2g_model.maps.building import build_map_from_trajectory
from g2g_model.maps.format import MapError, save_map
from sim_fixtures import tiny_trajectories

W = 4
# map_T_odom of the query's odometry: what a perfect relocalization recovers.
MAP_T_ODOM = make_pose(axis_angle_to_matrix([0.0, 0.0, 0.3]), [1.0, -2.0, 0.1])
WIDE_OPEN = GateConfig(consistency_count=1, max_fusion_spread_m=1e3,
                       max_jump_translation_m=1e3, max_jump_rotation_deg=180.0)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    out = tmp_path_factory.mktemp("reloc_engine")
    trajs = tiny_trajectories(out, seed=20002, frames=16, traversals=2, rig="ring4")
    pipeline = G2GPipeline.default("relocalization")
    gmap = build_map_from_trajectory(trajs[0], pipeline, ["cam0", "cam1"], progress=False)
    return pipeline, gmap, save_map(gmap, out / "scene.g2gmap"), TrajectoryReader(trajs[1])


def _engine(pipeline, scorer="whitened", verifier=None, gate=WIDE_OPEN):
    selector = WindowSelector.from_config(
        SelectorConfig(scorer=scorer, window_size=W, pair_verifier="none"), pipeline)
    return Relocalizer(pipeline, selector, gate, min_translation_m=0.0, min_rotation_deg=0.0,
                       verifier=verifier)


def _fill(engine, query, start=2, cam="cam0", map_T_odom=MAP_T_ODOM):
    world_T_cam = query.world_T_cam(cam)
    for i in range(start, start + W):
        odom_T_cam = invert_pose(map_T_odom) @ world_T_cam[i]
        assert engine.add_frame(QueryFrame(int(query.timestamps_ns[i]), query.image(cam, i),
                                           query.rig[cam].K, odom_T_cam))
    return world_T_cam[start:start + W]


def test_nothing_runs_without_a_map_or_a_full_window(scene):
    pipeline, gmap, path, query = scene
    engine = _engine(pipeline)
    result = engine.localize()
    assert not result.accepted and "no map loaded" in result.message
    engine.use_map(gmap, "mem")
    result = engine.localize()
    assert not result.accepted and "query window not full (0/4 frames)" in result.message
    assert result.window_index is None and engine.current is None


def test_g2g_path_with_a_hint_publishes_the_g2g_covariance(scene):
    pipeline, gmap, path, query = scene
    engine = _engine(pipeline)
    assert "windows" in engine.load_map(str(path))
    truth = _fill(engine, query)
    result = engine.localize(hint=truth[-1])
    assert result.how == "pose hint" and np.isnan(result.score)
    assert result.accepted, result.message
    assert result.path == "g2g" and result.inliers == 0
    np.testing.assert_array_equal(result.covariance, G2G_COVARIANCE)
    assert result.prediction.poses_b.shape == (W, 4, 4)
    np.testing.assert_allclose(result.current, result.map_T_odom)
    # The chosen window is one camera's consecutive map frames near the hint.
    window = engine.selector.prepared.windows[result.window_index]
    assert len({gmap.frames[i].camera for i in window}) == 1
    assert engine.last is result and engine.tracking_hint() is not None


def test_a_verified_pose_makes_the_correction_and_its_covariance(scene):
    pipeline, gmap, path, query = scene
    seen = {}
    cov = np.diag([1e-4] * 3 + [1e-5] * 3)

    def verifier(group_a, q, map_T_b, **_):
        seen["map_T_b"], seen["group_a"], seen["query"] = map_T_b, group_a, q
        # The verifier's anchor is the query window's newest instant (given newest first).
        return Verification("verified", truth[-1], cov, inliers=57, reason="agrees with G2G")

    engine = _engine(pipeline, verifier=verifier)
    engine.use_map(gmap, "mem")
    truth = _fill(engine, query)
    result = engine.localize()  # no hint: the scorer picks the window
    assert result.how == "map-whitened similarity", result.how
    # The verifier saw the query window newest instant first, and G2G's pose of the first
    # query camera (B0) in the map frame carried to every query frame through their odometry
    # (one rigid pose for the whole group).
    assert seen["map_T_b"].shape == (W, 4, 4)
    map_T_b0 = result.group_a.cam_to_world[0] @ result.prediction.poses_b[0]
    odom = np.asarray(result.query.cam_to_world)
    np.testing.assert_allclose(seen["map_T_b"], map_T_b0 @ np.linalg.inv(odom[0]) @ odom[::-1],
                               atol=1e-9)
    # No rig views given: the query itself, newest first.
    np.testing.assert_array_equal(np.asarray(seen["query"].cam_to_world), odom[::-1])
    assert list(seen["query"].stamps) == list(result.query.stamps)[::-1]
    assert all(a is b for a, b in zip(seen["query"].images, result.query.images[::-1]))
    # The map side: the window's frames first, then the other cameras at its stamps.
    window = np.asarray(result.group_a.cam_to_world)
    np.testing.assert_array_equal(np.asarray(seen["group_a"].cam_to_world)[:W], window)
    assert len(seen["group_a"].images) == W * len(gmap.cameras())
    # map_T_odom = map_T_bN @ inv(odom_T_bN) at the newest frame: exactly the true offset; the
    # fix is published at that instant.
    np.testing.assert_allclose(result.map_T_odom, MAP_T_ODOM, atol=1e-9)
    assert result.fix_frame == W - 1
    assert result.accepted and (result.path, result.inliers) == ("verified", 57)
    np.testing.assert_array_equal(result.covariance, cov)
    assert "path verified, 57 inliers" in result.message
    assert result.verification_reason == "agrees with G2G"


def test_the_gate_receives_path_inliers_and_covariance(scene):
    pipeline, gmap, path, query = scene
    cov = np.diag([2e-4] * 3 + [1e-5] * 3)
    engine = _engine(pipeline, gate=GateConfig(consistency_count=2),
                     verifier=lambda a, q, m, **_: Verification("refined", truth[-1], cov, 31))
    engine.use_map(gmap, "mem")
    truth = _fill(engine, query)
    result = engine.localize()
    assert not result.accepted and "waiting for 2 consistent candidates" in result.message
    (cand,) = engine.gate.pending
    assert (cand.path, cand.inliers) == ("refined", 31)
    np.testing.assert_array_equal(cand.covariance, cov)
    assert cand.spread_m == 0.0  # one rigid pose for the whole group


def test_the_spread_gate_sees_both_directions(scene):
    # G2G's path: every estimate of T_{A0<-B0} of both directions (W of the query, W of the map
    # window) counts; the gate's spread is their largest distance from the fused one, and the
    # pipeline's answer (the fused translation; the rotation from the rotation matching where it
    # found one) gives map->odom.
    pipeline, gmap, path, query = scene
    engine = _engine(pipeline, gate=GateConfig(consistency_count=2))
    engine.use_map(gmap, "mem")
    _fill(engine, query)
    result = engine.localize()
    pred = result.prediction
    assert pred.directions == 2 and pred.b0_estimates.shape == (2 * W, 4, 4)
    fused = fuse_poses(pred.b0_estimates)
    odom_T_b0 = np.asarray(result.query.cam_to_world)[0]
    (cand,) = engine.gate.pending
    np.testing.assert_allclose(cand.map_T_odom, result.map_T_odom)
    assert ("pose from feature matches" in result.message
            or "pose from G2G (" in result.message), result.message
    answer = pred.a0_T_b0
    if pred.rotation_match is None or pred.rotation_match.rotation is None:
        np.testing.assert_allclose(answer, fused, atol=1e-9)
    else:
        np.testing.assert_allclose(answer[:3, :3], pred.rotation_match.rotation, atol=1e-9)
        np.testing.assert_allclose(answer[:3, 3], pred.rotation_match.translation, atol=1e-9)
    np.testing.assert_allclose(
        cand.map_T_odom, result.group_a.cam_to_world[0] @ answer @ invert_pose(odom_T_b0))
    expected = max(np.linalg.norm(e[:3, 3] - answer[:3, 3]) for e in pred.b0_estimates)
    assert cand.spread_m == pytest.approx(expected, rel=1e-9) and cand.spread_m > 0
    strict = _engine(pipeline, gate=GateConfig(consistency_count=1,
                                               max_fusion_spread_m=0.5 * cand.spread_m))
    strict.use_map(gmap, "mem")
    _fill(strict, query)
    rejected = strict.localize()
    assert not rejected.accepted and "per-frame estimates disagree" in rejected.message


def test_the_spread_does_not_grow_with_the_distance_from_the_odom_origin(scene):
    # The same query, its odometry frame 300 m away: the estimates are the same, so the spread
    # and the correction's error must be too (measured in the map->odom frame instead, the
    # estimates' rotation disagreement times 300 m rejected this candidate by the 1 m gate).
    pipeline, gmap, path, query = scene
    far = MAP_T_ODOM @ make_pose(axis_angle_to_matrix([0.0, 0.0, -1.0]), [300.0, -200.0, 5.0])
    results = []
    for map_T_odom in (MAP_T_ODOM, far):
        engine = _engine(pipeline, gate=GateConfig(consistency_count=2))
        engine.use_map(gmap, "mem")
        _fill(engine, query, map_T_odom=map_T_odom)
        result = engine.localize()
        (cand,) = engine.gate.pending
        results.append((result, cand))
    (near, near_cand), (away, away_cand) = results
    np.testing.assert_allclose(away.prediction.b0_estimates, near.prediction.b0_estimates,
                               atol=1e-5)
    assert away_cand.spread_m == pytest.approx(near_cand.spread_m, abs=1e-4)
    assert 0 < near_cand.spread_m < 1.0  # the default gate's 1 m passes both
    np.testing.assert_allclose(away.map_T_odom @ invert_pose(far),
                               near.map_T_odom @ invert_pose(MAP_T_ODOM), atol=1e-4)


@pytest.mark.parametrize("answer, reason", [
    ("raise", "verification failed: RuntimeError: no features"),
    ("g2g", "too few features in the query (3)"),
    ("nan", "verifier returned a non-finite or malformed pose"),
])
def test_verification_failures_fall_back_to_g2g(scene, answer, reason):
    pipeline, gmap, path, query = scene

    def verifier(group_a, q, map_T_b, **_):
        if answer == "raise":
            raise RuntimeError("no features")
        if answer == "nan":
            return Verification("verified", np.full((4, 4), np.nan), inliers=40)
        return Verification("g2g", map_T_b[0], np.eye(6), reason="too few features in the "
                            "query (3)")

    engine = _engine(pipeline, verifier=verifier)
    engine.use_map(gmap, "mem")
    _fill(engine, query)
    result = engine.localize()
    assert result.path == "g2g" and result.inliers == 0
    assert result.verification_reason == reason
    np.testing.assert_array_equal(result.covariance, G2G_COVARIANCE)
    assert result.accepted and np.all(np.isfinite(result.map_T_odom))
    # The correction is G2G's fusion, not the verifier's pose.
    assert np.allclose(result.map_T_odom, result.current)


def test_a_bad_map_keeps_the_previous_one(scene, tmp_path):
    pipeline, gmap, path, query = scene
    engine = _engine(pipeline)
    engine.load_map(str(path))
    with pytest.raises(MapError, match="does not exist"):
        engine.load_map(str(tmp_path / "missing.g2gmap"))
    assert engine.gmap is not None and engine.map_path == str(path)
    small = type(gmap)(frames=gmap.frames[:2], backbone=gmap.backbone,
                       features=gmap.features[:2])
    with pytest.raises(ValueError, match="has no camera with 4 frames"):
        engine.use_map(small, "small")
    assert engine.map_path == str(path)


def test_default_selector_picks_one_window_and_says_how(scene):
    """The node's default configuration (combined + shipped pair verifier) through select()."""
    pipeline, gmap, path, query = scene
    selector = WindowSelector.from_config(SelectorConfig(window_size=W), pipeline)
    with pytest.raises(ValueError, match="no map prepared"):
        selector.select(None)
    selector.prepare(gmap)
    engine = Relocalizer(pipeline, selector, WIDE_OPEN, 0.0, 0.0)
    engine.selector.prepared = selector.prepared
    _fill(engine, query)
    pick = selector.select(engine.buffer.group())
    assert 0 <= pick.index < len(selector.prepared.windows)
    assert pick.how.startswith("token + image covisibility embeddings + pair verifier ")
    assert -1.0 <= pick.score <= 1.0 and np.isfinite(pick.verification)
    assert pick.block.shape == (W, W) and pick.pairs_scored == len(gmap) * W
    # Restricted to the windows of cam1, the pick is one of them.
    allowed = [gmap.frames[int(w[0])].camera == "cam1" for w in selector.prepared.windows]
    pick = selector.select(engine.buffer.group(), allowed=allowed)
    assert allowed[pick.index]


def test_away_from_the_map_g2g_alone_makes_no_fix_with_geometric_fix(scene, tmp_path):
    """A query from ANOTHER scene with the real verifier and the node's default gate limits:
    the verifier finds no geometry, G2G answers about the same wrong pose at each localization
    and, without ``geometric_fix``, consistency accepts it (metres off); with it, nothing is
    accepted and the result says why (docs/VERIFICATION.md, "The gate")."""
    pipeline, gmap, _, _ = scene
    other = TrajectoryReader(tiny_trajectories(tmp_path, seed=20004, frames=W + 3)[0])
    accepted = {}
    for geometric_fix in (False, True):
        engine = _engine(pipeline, verifier=StructureVerifier(),
                         gate=GateConfig(geometric_fix=geometric_fix))
        engine.use_map(gmap)
        _fill(engine, other, start=0)
        results = [engine.localize()]
        for i in range(W, W + 3):
            engine.add_frame(QueryFrame(int(other.timestamps_ns[i]), other.image("cam0", i),
                                        other.rig["cam0"].K,
                                        invert_pose(MAP_T_ODOM) @ other.world_T_cam("cam0")[i]))
            results.append(engine.localize())
        assert all(r.path == "g2g" for r in results), [r.message for r in results]
        accepted[geometric_fix] = [r for r in results if r.accepted]
        if geometric_fix:
            assert engine.current is None
            assert all("is reported, not published" in r.message for r in results), \
                [r.message for r in results]
    assert accepted[False], "the other scene no longer fools G2G: the test lost its point"


@pytest.mark.parametrize("interrupt", ["reset", "new map"])
def test_a_localization_running_across_a_reset_or_new_map_makes_no_correction(scene, interrupt):
    """``~/reset`` (or ``~/load_map``) is served on another thread than the localization: one
    that started before must not put a correction back afterwards (seen under load: the status
    said DEGRADED, localized, right after a reset)."""
    pipeline, gmap, path, query = scene
    engine = None

    def verifier(group_a, q, map_T_b, **_):  # runs between the window pick and the gate
        engine.reset() if interrupt == "reset" else engine.use_map(gmap, "other")
        return Verification("g2g", map_T_b[0], G2G_COVARIANCE.copy(), 0, "no geometry")

    engine = _engine(pipeline, verifier=verifier)
    engine.use_map(gmap, "mem")
    truth = _fill(engine, query)
    result = engine.localize(hint=truth[-1])
    assert not result.accepted and "discarded" in result.message, result.message
    assert engine.current is None and result.current is None
    engine.forget_query()  # the next run, after the interruption, counts again
    engine.verifier = None
    truth = _fill(engine, query)
    assert engine.localize(hint=truth[-1]).accepted


@pytest.mark.parametrize("second", [False, True])
def test_a_window_without_geometry_gets_a_second_disjoint_window(scene, second):
    """The first window gives no geometric pose: with ``second_window`` the verifier is asked
    once more, about the window nearest to G2G's estimate that shares no keyframe with the
    first, and its pose makes the correction; without it, G2G's stays."""
    pipeline, gmap, path, query = scene
    calls = []

    def verifier(group_a, q, map_T_b, **_):
        calls.append((np.asarray(group_a.cam_to_world)[:W].copy(), map_T_b[0].copy()))
        if len(calls) == 1:
            return Verification("g2g", map_T_b[0], np.eye(6), reason="9 inliers (< 30)")
        return Verification("verified", truth[-1], np.diag([1e-4] * 3 + [1e-5] * 3), 44)

    selector = WindowSelector.from_config(
        SelectorConfig(scorer="whitened", window_size=W, pair_verifier="none"), pipeline)
    engine = Relocalizer(pipeline, selector, WIDE_OPEN, min_translation_m=0.0,
                         min_rotation_deg=0.0, verifier=verifier, second_window=second)
    engine.use_map(gmap, "mem")
    truth = _fill(engine, query)
    result = engine.localize()
    if not second:
        assert len(calls) == 1 and result.path == "g2g"
        assert result.verified_window == result.window_index
        return
    assert len(calls) == 2 and result.path == "verified" and result.inliers == 44
    windows = engine.selector.prepared.windows
    first, other = windows[result.window_index], windows[result.verified_window]
    assert not set(first.tolist()) & set(other.tolist())
    np.testing.assert_allclose(calls[1][0][:len(other)],
                               np.stack([gmap.frames[i].world_T_cam for i in other]))
    # The nearest disjoint window to where G2G put the query (position + 2 m per radian).
    from g2g_model.maps.windows import nearest_window
    g2g_pose = calls[0][1]
    assert result.verified_window == nearest_window(gmap, windows, g2g_pose[:3, 3],
                                                    direction=g2g_pose[:3, 2],
                                                    disjoint_from=first)
    assert f"second window {result.verified_window}" in result.verification_reason
    assert f"geometry of window {result.verified_window})" in result.message
    np.testing.assert_allclose(result.map_T_odom, MAP_T_ODOM, atol=1e-9)
