"""Rotation matching (g2g_model/estimation/rotation_matching.py): the solver, real images, the
pipeline."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_fixtures import tiny_trajectories  # noqa: E402

from g2g_model.estimation.cell_matching import (  # noqa: E402
    cell_rays, group_matches, mutual_matches, subcell_offsets,
)
from g2g_model.estimation.rotation_matching import (  # noqa: E402
    MatchingConfig, RotationMatcher, kabsch, robust_rotation,
)
from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.geometry import invert_pose, rotation_angle_deg  # noqa: E402
from g2g_model.estimation.groups import Group, prepare_group  # noqa: E402
from g2g_model.estimation.pipeline import G2GPipeline  # noqa: E402
from g2g_model.assets import default_checkpoint  # noqa: E402

SIZE = (112, 112)  # the relocalization default's input size


def angle(r1, r2) -> float:
    return rotation_angle_deg(np.asarray(r1) @ np.asarray(r2).T)


def unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_kabsch_is_exact_and_batched():
    rng = np.random.default_rng(0)
    truth = Rotation.random(4, random_state=1).as_matrix()
    rays_b = unit(rng.normal(size=(4, 10, 3)))
    rays_a = rays_b @ np.swapaxes(truth, 1, 2)
    np.testing.assert_allclose(kabsch(rays_a, rays_b), truth, atol=1e-9)
    # Mirrored data must still give a rotation (det +1), not a reflection.
    assert np.linalg.det(kabsch(-rays_b[0], rays_b[0])) == pytest.approx(1.0)
    # Weights: a pair of weight 0 has no say.
    wrong = rays_a.copy()
    wrong[:, :3] = unit(rng.normal(size=(4, 3, 3)))
    weights = np.ones((4, 10))
    weights[:, :3] = 0.0
    np.testing.assert_allclose(kabsch(wrong, rays_b, weights), truth, atol=1e-9)


def test_robust_rotation_ignores_outliers():
    rng = np.random.default_rng(2)
    truth = Rotation.from_euler("xyz", [3, 25, -4], degrees=True).as_matrix()
    rays_b = unit(rng.normal(size=(300, 3)) + [0, 0, 2])
    noise = Rotation.from_rotvec(rng.normal(scale=np.radians(1.0), size=(300, 3))).as_matrix()
    rays_a = np.einsum("kij,kj->ki", noise, rays_b @ truth.T)
    outliers = rng.random(300) < 0.45
    rays_a[outliers] = unit(rng.normal(size=(outliers.sum(), 3)))
    rotation, inliers = robust_rotation(rays_a, rays_b, MatchingConfig())
    assert angle(rotation, truth) < 0.3
    assert inliers[~outliers].mean() > 0.95 and inliers[outliers].mean() < 0.1


def test_the_final_fit_trusts_the_matches_that_fit_best():
    # 70 % of the matches exact up to 0.5 deg of noise, 30 % displaced by 7 deg one way (inside
    # the 8 deg threshold: a neighbouring cell, parallax): the plain least-squares fit is pulled
    # towards the displaced ones, the Cauchy-weighted one much less.
    rng = np.random.default_rng(3)
    truth = Rotation.from_euler("xyz", [2, -15, 1], degrees=True).as_matrix()
    rays_b = unit(rng.normal(size=(400, 3)) + [0, 0, 2])
    noise = Rotation.from_rotvec(rng.normal(scale=np.radians(0.5), size=(400, 3))).as_matrix()
    rays_a = np.einsum("kij,kj->ki", noise, rays_b @ truth.T)
    shifted = rng.random(400) < 0.3
    rays_a[shifted] = rays_a[shifted] @ Rotation.from_euler("y", 7, degrees=True).as_matrix().T
    plain, _ = robust_rotation(rays_a, rays_b, MatchingConfig(final_scale_deg=0))
    weighted, inliers = robust_rotation(rays_a, rays_b, MatchingConfig())
    assert inliers.all()
    assert angle(plain, truth) > 1.5 and angle(weighted, truth) < 0.6 * angle(plain, truth)


def test_subcell_offsets_find_the_peak_between_cells():
    # A paraboloid peaking at column 3.3, row 5.8 of a 10 x 8 grid: the best cell is (3, 6) and
    # the offsets are exact; on the border and where the neighbours do not make a peak, 0.
    cols, rows = np.meshgrid(np.arange(10), np.arange(8))
    sim = 1 - 0.05 * ((cols - 3.3) ** 2 + (rows - 5.8) ** 2)
    flat = np.zeros_like(sim)
    maps = torch.tensor(np.stack([sim, sim, flat]), dtype=torch.float32)
    cells = torch.tensor([[3, 6], [0, 7], [4, 4]])
    out = subcell_offsets(maps, cells).numpy()
    np.testing.assert_allclose(out[0], [0.3, -0.2], atol=1e-5)
    np.testing.assert_allclose(out[1:], 0.0)


def test_subcell_matches_follow_a_shift_smaller_than_a_cell(traversals):
    # A frame and the same frame moved 6 px (3/8 of a 16 px cell) to the left: at whole cells
    # every match stays at its own cell; between cells they move left, and no row moves.
    image = torch.from_numpy(traversals[0].image("cam0", 4)).permute(2, 0, 1)[None] / 255.0
    image = torch.nn.functional.interpolate(image, size=(176, 192), mode="bilinear")
    trunk = RotationMatcher(MatchingConfig()).features
    fa, fb = trunk(image[..., :160, :160])[0], trunk(image[..., :160, 6:166])[0]
    whole = [c.double() for c in mutual_matches(fa, fb)]
    cells_a, cells_b = mutual_matches(fa, fb, subcell=True)
    assert len(cells_a) > 50 and cells_b.dtype == torch.float64
    np.testing.assert_allclose((whole[1] - whole[0]).numpy(), 0.0)
    moved = (cells_b - cells_a.double()).mean(0).numpy()
    assert -0.375 - 0.1 < moved[0] < -0.1 and abs(moved[1]) < 0.05, moved


def test_group_matches_are_the_matches_of_each_frame_pair():
    # All pairs in one batched product: the same matches, frame pair by frame pair, as one pair
    # at a time (grids of different sizes; features made so that many cells match).
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(32, 6, 9, generator=gen)
    fa = torch.stack([base + 0.3 * torch.randn(32, 6, 9, generator=gen) for _ in range(3)])
    fb = torch.stack([base[:, :5, 1:8] + 0.3 * torch.randn(32, 5, 7, generator=gen)
                      for _ in range(4)])
    fi, fj, cells_a, cells_b = group_matches(fa, fb, subcell=True)
    count = 0
    for i in range(3):
        for j in range(4):
            one_a, one_b = mutual_matches(fa[i], fb[j], subcell=True)
            pair = (fi == i) & (fj == j)
            assert len(one_a) > 5 and int(pair.sum()) == len(one_a)
            assert torch.equal(cells_a[pair], one_a) and torch.equal(cells_b[pair], one_b)
            count += len(one_a)
    assert count == len(fi)
    # Rays through the cells of several frames at once: each frame's own K and pose.
    ks = torch.tensor([[[100.0, 0, 40], [0, 90, 30], [0, 0, 1]],
                       [[80.0, 0, 50], [0, 80, 20], [0, 0, 1]]])
    poses = torch.stack([torch.eye(4), torch.from_numpy(np.eye(4))])
    poses[1, :3, :3] = torch.from_numpy(Rotation.from_euler("y", 30, degrees=True).as_matrix())
    frame = torch.tensor([0, 1, 1, 0])
    cells = torch.tensor([[1, 2], [3, 4], [0, 0], [5, 1]])
    batched = cell_rays(cells, 16.0, ks[frame], poses[frame])
    for k in range(4):
        one = cell_rays(cells[k:k + 1], 16.0, ks[frame[k]], poses[frame[k]])
        np.testing.assert_allclose(batched[k:k + 1].numpy(), one.numpy(), atol=1e-12)


def test_config_is_validated():
    for bad in ({"inlier_deg": 0}, {"hypotheses": 0}, {"min_inliers": 0},
                {"min_inlier_share": 1.0}, {"describe_px": 16}, {"final_scale_deg": -1},
                {"parallax_gain": 0.9}, {"parallax_px": 0}, {"parallax_max_m": 0},
                {"features": "sift"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            MatchingConfig(**bad).validate()


@pytest.fixture(scope="module")
def traversals(tmp_path_factory):
    """Two traversals (different seasons) of held-out scene 20001, 4-camera ring rig, the
    furnished preset of the evaluation scenes (the "small" one is an empty room whose season
    change re-textures every wall: nothing to match across seasons there)."""
    paths = tiny_trajectories(tmp_path_factory.mktemp("align"), seed=20001, frames=24,
                              traversals=2, rig="ring4", scene="default")
    return [TrajectoryReader(p) for p in paths]


@pytest.fixture(scope="module")
def matcher():
    return RotationMatcher(MatchingConfig())


def window(reader, cam, first, count=3) -> Group:
    frames = list(range(first, first + count))
    return Group(images=[reader.image(cam, i) for i in frames],
                 intrinsics=np.stack([reader.rig[cam].K for _ in frames]),
                 cam_to_world=reader.world_T_cam(cam)[frames])


def match(matcher, group_a, group_b):
    a, b = prepare_group(group_a, SIZE), prepare_group(group_b, SIZE)
    return matcher.match(a.images[0], a.intrinsics[0], a.cam_to_anchor[0],
                         b.images[0], b.intrinsics[0], b.cam_to_anchor[0])


def test_same_group_aligns_to_the_identity(traversals, matcher):
    group = window(traversals[0], "cam0", 4)
    out = match(matcher, group, group)
    # Frame pairs (A_i, A_i) match onto themselves; the others see the scene from up to 0.6 m
    # apart, so near things disagree (parallax) but not in the mean. The sub-cell peak of a cell
    # against its own image is not exactly at its centre (its two neighbours are not equally
    # alike): 0.19 deg when written, 0.01 at whole cells.
    assert out.rotation is not None and out.inliers > out.matches / 2 > 100
    assert angle(out.rotation, np.eye(3)) < 0.3
    whole = match(RotationMatcher(MatchingConfig(subcell=False, final_scale_deg=0)), group, group)
    assert angle(whole.rotation, np.eye(3)) < 0.05


def cross_season_pairs(traversals, count=6):
    """Windows of one camera in each traversal, 0.3 m apart at most and turned 5-25 deg."""
    (r0, r1), pairs = traversals, []
    for c1 in r1.cameras:
        for c0 in r0.cameras:
            w0, w1 = r0.world_T_cam(c0), r1.world_T_cam(c1)
            for j in range(0, 20, 3):
                for i in range(20):
                    rel = invert_pose(w0[i]) @ w1[j]
                    if (np.linalg.norm(rel[:3, 3]) < 0.3
                            and 5 < rotation_angle_deg(rel[:3, :3]) < 25):
                        pairs.append((c0, i, c1, j, rel[:3, :3]))
    assert len(pairs) >= count, pairs
    return pairs[:count]


def test_cross_season_rotation_from_the_images(traversals, matcher):
    """Across seasons the matched rotation is the turn where G2G's regression does not (measured
    when written: 2.4-6.4 deg against G2G's 9.7-21.4 on turns of 8-17 deg)."""
    plain = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                        rotation_matching=False)
    errors, g2g, turns = [], [], []
    for c0, i, c1, j, truth in cross_season_pairs(traversals):
        group_a, group_b = window(traversals[0], c0, i), window(traversals[1], c1, j)
        out = match(matcher, group_a, group_b)
        assert out.rotation is not None, out.reason
        errors.append(angle(out.rotation, truth))
        g2g.append(angle(plain.predict(group_a, group_b).a0_T_b0[:3, :3], truth))
        turns.append(rotation_angle_deg(truth))
    assert np.mean(errors) < np.mean(turns) / 2, (errors, turns)
    assert np.mean(errors) < np.mean(g2g) / 2, (errors, g2g)


def test_aliked_cells_match_like_the_trunk(traversals):
    """The matcher on ALIKED-t16's cell descriptors: a stride-16 map of unit vectors, the same
    group aligns to the identity and the cross-season turns are recovered to under half."""
    aliked = RotationMatcher(MatchingConfig(features="aliked_t16"))
    cells = aliked.features(torch.rand(2, 3, 64, 96))
    assert cells.shape[:1] + cells.shape[2:] == (2, 4, 6)
    torch.testing.assert_close(cells.norm(dim=1), torch.ones(2, 4, 6))
    group = window(traversals[0], "cam0", 4)
    same = match(aliked, group, group)
    assert same.rotation is not None and angle(same.rotation, np.eye(3)) < 0.5
    errors, turns = [], []
    for c0, i, c1, j, truth in cross_season_pairs(traversals):
        out = match(aliked, window(traversals[0], c0, i), window(traversals[1], c1, j))
        assert out.rotation is not None, out.reason
        errors.append(angle(out.rotation, truth))
        turns.append(rotation_angle_deg(truth))
    assert np.mean(errors) < np.mean(turns) / 2, (errors, turns)


def test_blank_images_are_declined_and_the_pipeline_keeps_g2g(traversals, matcher):
    group = window(traversals[0], "cam0", 4)
    blank = Group(images=[np.zeros_like(im) for im in group.images],
                  intrinsics=group.intrinsics, cam_to_world=group.cam_to_world)
    out = match(matcher, group, blank)
    assert out.rotation is None and "min_inliers" in out.reason
    matching = G2GPipeline.default("relocalization")
    without = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                          rotation_matching=False)
    pred, plain = matching.predict(group, blank), without.predict(group, blank)
    assert pred.rotation_match is not None and pred.rotation_match.rotation is None
    np.testing.assert_allclose(pred.poses_b, plain.poses_b, atol=1e-6)


def test_pipeline_takes_the_pose_from_the_matches(traversals):
    assert G2GPipeline.default("rig_odometry").rotation_matcher is None
    pipe = G2GPipeline.default("relocalization")
    assert pipe.rotation_matcher is not None and pipe.image_size == SIZE
    # The compact_mnv2 backbone's frozen trunk is shared, not loaded twice.
    assert pipe.rotation_matcher.trunk is pipe.backbone.stem.trunk
    plain = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                        rotation_matching=False)
    c0, i, c1, j, truth = cross_season_pairs(traversals, 1)[0]
    group_a, group_b = window(traversals[0], c0, i), window(traversals[1], c1, j)
    pred, base = pipe.predict(group_a, group_b), plain.predict(group_a, group_b)
    assert pred.rotation_match.rotation is not None
    np.testing.assert_allclose(pred.a0_T_b0[:3, :3], pred.rotation_match.rotation, atol=1e-9)
    np.testing.assert_allclose(pred.a0_T_b0[:3, 3], pred.rotation_match.translation, atol=1e-9)
    t_true = (invert_pose(group_a.cam_to_world[0]) @ group_b.cam_to_world[0])[:3, 3]
    assert (np.linalg.norm(pred.a0_T_b0[:3, 3] - t_true)
            < np.linalg.norm(base.a0_T_b0[:3, 3] - t_true) + 0.05)
    np.testing.assert_allclose(pred.b0_estimates, base.b0_estimates, atol=1e-9)
    # Group B stays rigid with its input poses (float32 in the pipeline), and world_T_b follows.
    input_b = invert_pose(group_b.cam_to_world[0]) @ group_b.cam_to_world
    for pose, rel in zip(pred.poses_b, input_b):
        np.testing.assert_allclose(pose, pred.a0_T_b0 @ rel, atol=1e-5)
    np.testing.assert_allclose(pred.world_T_b, group_a.cam_to_world[0] @ pred.poses_b,
                               atol=1e-9)
    assert pred.timing_ms["match"] > 0
    assert angle(pred.a0_T_b0[:3, :3], truth) < angle(base.a0_T_b0[:3, :3], truth) + 1.0


def test_a_given_config_and_bad_settings(traversals):
    path = default_checkpoint("relocalization")
    pipe = G2GPipeline.from_checkpoint(path, rotation_matching=MatchingConfig(inlier_deg=4.0))
    assert pipe.rotation_matcher.config.inlier_deg == 4.0
    group = window(traversals[0], "cam0", 4)
    assert pipe.predict(group, group).rotation_match.rotation is not None
    with pytest.raises(ValueError, match="rotation_matching must be"):
        G2GPipeline.from_checkpoint(path, rotation_matching="yes")
    with torch.no_grad():
        on = G2GPipeline.from_checkpoint(path, rotation_matching=True)
        assert on.rotation_matcher is not None


def test_a_low_share_of_agreeing_matches_is_declined(traversals):
    # The same pair as the cross-season test; demanding that nearly all matches agree turns the
    # rotation down with the reason (real pairs far apart for their depth agree at 0.17-0.23).
    c0, i, c1, j, _ = cross_season_pairs(traversals, 1)[0]
    strict = RotationMatcher(MatchingConfig(min_inlier_share=0.99))
    out = match(strict, window(traversals[0], c0, i), window(traversals[1], c1, j))
    assert out.rotation is None and "min_inlier_share" in out.reason, out
    assert 0 < out.inliers < out.matches


def test_node_model_loading_follows_the_parameter():
    # The relocalize node's rotation_matching parameter (read at configure) reaches the pipeline.
    from g2g_ros.model_loading import describe_model, load_pipeline

    on = load_pipeline("", "cpu", "relocalization")
    off = load_pipeline("", "cpu", "relocalization", rotation_matching=False)
    assert on.rotation_matcher is not None and off.rotation_matcher is None
    assert "rotation from feature matches" in describe_model(on, "", "relocalization")
    assert "rotation from" not in describe_model(on, "", "relocalization", encoder_only=True)
    assert "rotation from" not in describe_model(off, "", "relocalization")
    assert load_pipeline("", "cpu", "rig_odometry").rotation_matcher is None


def test_translation_given_rotation_recovers_a_known_offset():
    # Two groups of three cameras 0.5 m apart along x, the B group turned 10 deg and displaced;
    # rays to random points 2-6 m away: the linear solve recovers the offset from the centres'
    # spread, whatever the prior, and the prior fixes what the rays do not (no baseline).
    from g2g_model.estimation.match_geometry import translation_given_rotation

    rng = np.random.default_rng(4)
    rot = Rotation.from_euler("y", 10, degrees=True).as_matrix()
    t_true = np.array([0.3, -0.05, 0.2])
    centres = np.array([[0.0, 0, 0], [0.5, 0, 0], [1.0, 0, 0]])
    pts = rng.uniform([-3, -1, 2], [3, 1, 6], size=(200, 3))
    ca, cb = centres[rng.integers(0, 3, 200)], centres[rng.integers(0, 3, 200)]
    rays_a = unit(pts - ca)
    pts_b = (pts - t_true) @ rot               # the points in B0's frame
    rays_b = unit(pts_b - cb)
    for prior in (np.zeros(3), np.array([1.0, 1.0, -1.0])):
        t = translation_given_rotation(rays_a, rays_b, ca, cb, rot, prior, 1e-4)
        assert np.linalg.norm(t - t_true) < 0.01, t
        # At the pipeline's weight (1) the prior pulls (these rows are weak: a 1 m baseline for
        # points 2-6 m away; Huber gives far-off rows less say), but the answer moves towards
        # the truth.
        t = translation_given_rotation(rays_a, rays_b, ca, cb, rot, prior, 1.0)
        assert np.linalg.norm(t - t_true) < 0.6 * np.linalg.norm(prior - t_true), t
    # One centre per group: the scale is not observable; the prior's length along the
    # direction the rays allow is kept.
    zero = np.zeros_like(ca)
    rays_a0, rays_b0 = unit(pts), unit(((pts - t_true) @ rot))
    t = translation_given_rotation(rays_a0, rays_b0, zero, zero, rot, 2 * t_true, 1.0)
    assert np.linalg.norm(np.cross(unit(t), unit(t_true))) < 0.05


def test_generalized_pose_and_plane_inliers_on_exact_pixels():
    # Two groups of three pinhole cameras (0.3 m apart, turned up to 20 deg within each group),
    # B0 one metre from A0 and turned 25 deg, looking at points 1.5-3 m away: parallax that no
    # one rotation explains. From exact pixels PoseLib's generalized relative pose recovers the
    # pose, every match lies on its epipolar plane under it, far fewer under the best rotation.
    from g2g_model.estimation.match_geometry import generalized_pose, plane_inliers

    rng = np.random.default_rng(5)
    K = np.array([[80.0, 0, 79.5], [0, 80.0, 79.5], [0, 0, 1]])

    def pose(yaw, x):
        T = np.eye(4)
        T[:3, :3] = Rotation.from_euler("y", yaw, degrees=True).as_matrix()
        T[:3, 3] = [x, 0, 0]
        return T

    poses = np.stack([pose(0, 0), pose(10, 0.3), pose(-20, -0.3)])     # T_{X0<-Xi}
    truth = pose(25, 1.0)                                              # T_{A0<-B0}
    truth[:3, 3] += [0, 0.1, 0.2]
    points = rng.uniform([-2, -1, 1.5], [2, 1, 3], size=(400, 3))     # in A0's frame
    rows = {"pa": [], "pb": [], "fa": [], "fb": [], "ra": [], "rb": [], "ca": [], "cb": []}
    for i in range(3):
        for j in range(3):
            in_a = (points - poses[i, :3, 3]) @ poses[i, :3, :3]       # camera A_i's frame
            b_j = truth @ poses[j]                                     # T_{A0<-Bj}
            in_b = (points - b_j[:3, 3]) @ b_j[:3, :3]
            px_a, px_b = in_a @ K.T, in_b @ K.T
            px_a, px_b = px_a[:, :2] / px_a[:, 2:], px_b[:, :2] / px_b[:, 2:]
            seen = ((in_a[:, 2] > 0.1) & (in_b[:, 2] > 0.1) & np.all(px_a > 0, 1)
                    & np.all(px_a < 160, 1) & np.all(px_b > 0, 1) & np.all(px_b < 160, 1))
            rows["pa"].append(px_a[seen]), rows["pb"].append(px_b[seen])
            rows["fa"].append(np.full(seen.sum(), i)), rows["fb"].append(np.full(seen.sum(), j))
            rows["ra"].append(unit(points[seen] - poses[i, :3, 3]))
            in_b_j = (points - truth[:3, 3]) @ truth[:3, :3] - poses[j, :3, 3]
            rows["rb"].append(unit(in_b_j[seen]))
            rows["ca"].append(np.repeat(poses[i, :3, 3][None], seen.sum(), 0))
            rows["cb"].append(np.repeat(poses[j, :3, 3][None], seen.sum(), 0))
    m = {k: np.concatenate(v) for k, v in rows.items()}
    assert len(m["pa"]) > 300
    ks = np.stack([K] * 3)
    solved = generalized_pose(m["pa"], m["pb"], m["fa"], m["fb"], ks, ks, poses, poses,
                              (160, 160), np.eye(4), 1.0)
    assert angle(solved[:3, :3], truth[:3, :3]) < 0.1
    assert np.linalg.norm(solved[:3, 3] - truth[:3, 3]) < 0.01
    args = (m["ra"], m["rb"], m["ca"], m["cb"])
    assert plane_inliers(*args, truth[:3, :3], truth[:3, 3], 0.1) == len(m["pa"])
    rotation, _ = robust_rotation(m["ra"], m["rb"], MatchingConfig())
    assert plane_inliers(*args, rotation, np.zeros(3), 1.0) < 0.5 * len(m["pa"])


def test_far_apart_groups_take_the_pose_solved_with_parallax(traversals):
    # Windows of the two traversals 1.3 m apart in a room a few metres deep: 46 % of the
    # matches agree with one rotation (under parallax_share 0.5; the default 0.4 keeps the
    # rotation here), the joint solve explains more of them and is taken, with its own
    # translation (no prior needed). The switches: parallax_share 0 never solves it; a joint
    # pose further from the prior than parallax_max_m is not taken.
    from g2g_model.localization.relocalizer import rotation_note

    (r0, r1) = traversals
    group_a, group_b = window(r0, "cam2", 0), window(r1, "cam0", 20)
    truth = invert_pose(group_a.cam_to_world[0]) @ group_b.cam_to_world[0]
    assert 1.0 < np.linalg.norm(truth[:3, 3]) < 1.5
    out = match(RotationMatcher(MatchingConfig(parallax_share=0.5)), group_a, group_b)
    assert out.parallax and out.rotation is not None and out.translation is not None, out
    assert out.inliers >= 24 and out.matches > 2 * out.inliers
    # Better than "no motion" (when written: 0.65 m against 1.31, 7.2 deg against 13.2).
    assert np.linalg.norm(out.translation - truth[:3, 3]) < 0.7 * np.linalg.norm(truth[:3, 3])
    assert angle(out.rotation, truth[:3, :3]) < 0.75 * rotation_angle_deg(truth[:3, :3])
    assert "solved with parallax" in rotation_note(out)
    assert not match(RotationMatcher(MatchingConfig()), group_a, group_b).parallax
    never = match(RotationMatcher(MatchingConfig(parallax_share=0)), group_a, group_b)
    assert not never.parallax
    near = match(RotationMatcher(MatchingConfig(parallax_share=0.5, parallax_max_m=0.1)),
                 group_a, group_b)
    assert not near.parallax
