"""Geometric verification of rig odometry (g2g_model.localization.rig_motion) and its use in
RigOdometry, on real simulated frames with the real shipped rig model: no mocks."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from sim_fixtures import tiny_trajectories  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.geometry import relative_pose, rotation_angle_deg  # noqa: E402
from g2g_model.estimation.groups import Group  # noqa: E402
from g2g_model.localization.rig_motion import (  # noqa: E402
    G2G_STEP_COVARIANCE, RigMotionVerifier, rig_verifier_config,
)
from g2g_model.localization.verification import (  # noqa: E402
    PATH_G2G, PATH_REFINED, PATH_VERIFIED,
)
from g2g_ros.odometry_core import RigFrames, RigOdometry  # noqa: E402


@pytest.fixture(scope="module")
def traj(tmp_path_factory):
    out = tmp_path_factory.mktemp("rig_motion_sim")
    return TrajectoryReader(tiny_trajectories(out, seed=20005, frames=25)[0])


def rig(reader: TrajectoryReader, i: int) -> Group:
    cams = reader.cameras
    return Group(images=[reader.image(c, i) for c in cams],
                 intrinsics=np.stack([reader.rig[c].K for c in cams]),
                 cam_to_world=np.stack([reader.rig[c].T_body_cam for c in cams]))


def error(a, b):
    rel = relative_pose(a, b)
    return float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))


def test_motion_is_verified_and_refined(traj):
    truth = relative_pose(traj.world_T_body[20], traj.world_T_body[22])
    verifier = RigMotionVerifier()
    near = truth.copy()
    near[:3, 3] *= 1.15  # a G2G motion 15 % too long
    result = verifier(rig(traj, 20), rig(traj, 22), near)
    assert result.path == PATH_VERIFIED, result.reason
    dt, dr = error(truth, result.delta)
    assert dt < 0.02 and dr < 0.2, (dt, dr, result.reason)
    assert np.all(np.linalg.eigvalsh(result.covariance) > 0)
    assert np.all(np.diag(result.covariance) < np.diag(G2G_STEP_COVARIANCE))
    far = truth.copy()
    far[:3, 3] += [0.0, 0.0, 0.8]  # G2G 0.8 m off: the geometry is still found
    result = verifier(rig(traj, 20), rig(traj, 22), far)
    assert result.path == PATH_REFINED, result.reason
    assert error(truth, result.delta)[0] < 0.02


def test_blank_keyframe_falls_back_with_the_reason(traj):
    blank = rig(traj, 8)
    blank = Group(images=[np.zeros_like(im) for im in blank.images],
                  intrinsics=blank.intrinsics, cam_to_world=blank.cam_to_world)
    prior = relative_pose(traj.world_T_body[4], traj.world_T_body[8])
    result = RigMotionVerifier()(rig(traj, 4), blank, prior)
    assert result.path == PATH_G2G and "too few features" in result.reason
    np.testing.assert_array_equal(result.delta, prior)


def test_verified_odometry_drifts_a_third_of_g2g_alone(traj):
    """The issue's goal: with verification the trajectory error is <= 1/3 of G2G alone (the
    shipped CPU rig model), over a real traversal."""
    from g2g_model.estimation.pipeline import G2GPipeline

    pipe = G2GPipeline.default("rig_odometry")
    base_T_cam = {c: traj.rig[c].T_body_cam for c in traj.cameras}

    def estimate(a, b):  # as the node does
        pred = pipe.predict(a, b)
        return pred.a0_T_b0, pred.b0_estimates

    runs = {}
    for name, verifier in (("g2g", None), ("verified", RigMotionVerifier())):
        odo = RigOdometry(estimate, base_T_cam, verifier=verifier)
        odo.reset(traj.world_T_body[0])
        paths = []
        for i in range(0, traj.num_frames, 2):
            g = rig(traj, i)
            upd = odo.process(RigFrames(int(traj.timestamps_ns[i]), list(traj.cameras),
                                        list(g.images), np.asarray(g.intrinsics)))
            paths.append(upd.path)
        runs[name] = (error(traj.world_T_body[i], odo.odom_T_base), paths, odo.covariance)
    (g2g_t, g2g_r), g2g_paths, _ = runs["g2g"]
    (ver_t, ver_r), ver_paths, ver_cov = runs["verified"]
    assert set(g2g_paths[1:]) == {PATH_G2G}
    assert ver_paths[1:].count(PATH_G2G) <= 3, ver_paths
    assert ver_t <= g2g_t / 3 and ver_r <= g2g_r / 3, runs
    assert ver_cov[0, 0] < runs["g2g"][2][0, 0]


def test_camera_pairs_follow_the_rig_geometry(traj):
    """A 5-camera ring, 80 deg fields of view 72 deg apart: with up to 30 deg of turn between
    keyframes each camera is paired with itself and its two neighbours (15 of 25 pairs), never
    with the cameras facing away; 180 pairs everything; a missing camera only drops its
    pairs."""
    from g2g_model.localization.rig_motion import overlapping_pairs, view_cone_deg

    group = rig(traj, 0)
    assert view_cone_deg(group.intrinsics[0], group.images[0]) == pytest.approx(
        np.degrees(np.arctan(np.sqrt(2) * np.tan(np.radians(40)))), abs=0.5)
    pairs = overlapping_pairs(group, group, 30.0)
    assert sorted(pairs) == sorted((i, j) for i in range(5) for j in range(5)
                                   if (i - j) % 5 in (0, 1, 4))
    assert len(overlapping_pairs(group, group, 180.0)) == 25
    four = Group(group.images[1:], group.intrinsics[1:], group.cam_to_world[1:])
    assert sorted(overlapping_pairs(group, four, 30.0)) == sorted(
        (i, j - 1) for i, j in pairs if j > 0)


def test_features_of_downscaled_images_are_in_the_cameras_pixels(traj):
    """``max_image_px``: a 2x upscaled 448 x 448 camera described at 224 px gives the keypoints
    of the 224 px image, scaled to the 448 px camera's pixels; the motion verified on such
    images is as precise as at native size."""
    import cv2

    from g2g_model.localization.local_features import LocalFeatures

    image = traj.image(traj.cameras[0], 10)
    big = cv2.resize(image, (448, 448), interpolation=cv2.INTER_LINEAR)
    native = LocalFeatures().describe(image).keypoints
    small = LocalFeatures(max_image_px=224).describe(big).keypoints
    assert len(small) > 50
    # Nearest native keypoint (scaled to 448 px pixel centres) of each downscaled one.
    scaled = (native + 0.5) * 2 - 0.5
    dist = np.linalg.norm(small[:, None] - scaled[None], axis=2).min(1)
    assert np.median(dist) < 1.0, np.median(dist)
    with pytest.raises(ValueError, match="max_image_px"):
        LocalFeatures(max_image_px=32)

    def upscaled(i):
        g = rig(traj, i)
        k = np.asarray(g.intrinsics) * np.array([[2.0], [2.0], [1.0]])  # rows fx, fy
        return Group([cv2.resize(im, (448, 448)) for im in g.images], k, g.cam_to_world)

    truth = relative_pose(traj.world_T_body[20], traj.world_T_body[22])
    result = RigMotionVerifier()(upscaled(20), upscaled(22), truth)  # defaults: 320 px
    assert result.path == PATH_VERIFIED, result.reason
    dt, dr = error(truth, result.delta)
    assert dt < 0.02 and dr < 0.2, (dt, dr, result.reason)


def test_a_parked_rig_does_not_turn(traj):
    """Standing still, the geometry has no parallax to solve, and G2G's answer for a repeated
    group is not exactly the identity (up to 2.4 deg per keyframe on held-out scenes; stood in
    for here by a 2 deg turn and 5 cm). With sensor noise on every image, the verifier sees no
    motion and the odometry stays where it was, keeping its keyframe; the step after it is
    measured from that keyframe. Without verification the same answers turn the rig 10 deg."""
    from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose

    rng = np.random.default_rng(0)
    wrong = make_pose(axis_angle_to_matrix([0.0, np.radians(2.0), 0.0]), [0.05, 0.0, 0.0])
    base_T_cam = {c: traj.rig[c].T_body_cam for c in traj.cameras}
    parked = rig(traj, 10)

    def estimate(a, b):  # a G2G stand-in whose answer for no motion is 2 deg off
        return wrong, wrong[None]

    def frames(stamp, group, noise=2.0):
        images = [np.clip(im + rng.normal(0, noise, im.shape), 0, 255).astype(np.uint8)
                  for im in group.images]
        return RigFrames(stamp, list(traj.cameras), images, np.asarray(group.intrinsics))

    odo = RigOdometry(estimate, base_T_cam, verifier=RigMotionVerifier())
    alone = RigOdometry(estimate, base_T_cam)
    for k in range(6):
        upd = odo.process(frames(10 ** 9 * (k + 1), parked))
        alone.process(frames(10 ** 9 * (k + 1), parked))
        if k:
            assert upd.stationary and upd.path in (PATH_VERIFIED, PATH_REFINED), upd.reason
            assert "standing still" in upd.reason and not upd.linear_velocity.any()
    np.testing.assert_array_equal(odo.odom_T_base, np.eye(4))
    assert error(np.eye(4), alone.odom_T_base)[1] == pytest.approx(10.0, abs=0.01)
    # A real step: two frames later, measured from the parked keyframe (not stationary).
    truth = relative_pose(traj.world_T_body[10], traj.world_T_body[12])
    cam0 = base_T_cam[traj.cameras[0]]
    a0_T_b0 = invert_pose(cam0) @ truth @ cam0  # the body's step seen from camera 0
    odo.estimate = lambda a, b: (a0_T_b0, a0_T_b0[None])
    upd = odo.process(frames(10 ** 10, rig(traj, 12)))
    assert not upd.stationary and upd.path == PATH_VERIFIED, upd.reason
    dt, dr = error(truth, odo.odom_T_base)
    assert dt < 0.02 and dr < 0.2, (dt, dr)
    with pytest.raises(ValueError, match="standstill_deg"):
        rig_verifier_config(standstill_deg=-1).validate()
    # The node's parameter reaches the verifier's configuration.
    import dataclasses

    from g2g_ros.nodes.rig_odometry_params import RigOdometryParams
    from g2g_ros.nodes.verify_params import verifier_config
    from g2g_ros.parameters import field_default

    params = {f.name: field_default(f) for f in dataclasses.fields(RigOdometryParams)}
    assert verifier_config(params).standstill_deg == 0.25
    assert verifier_config({**params, "verify_standstill_deg": 0.0}).standstill_deg == 0.0


@pytest.mark.timeout(60)
def test_one_camera_rig_is_solved_from_its_essential_matrix(tmp_path):
    """A one-camera rig (a mono bag through rig odometry): every match lies between one camera
    pair, where generalized relative pose is degenerate (PoseLib spent minutes per step, and the
    node never answered). The pair's essential matrix gives the rotation and the direction; the
    length is G2G's, and the reason says so; the step's path is ``g2g``, since its length is
    not verified."""
    mono = TrajectoryReader(tiny_trajectories(tmp_path, seed=20004, frames=8, rig="mono")[0])
    assert mono.cameras == ["cam0"]
    verifier = RigMotionVerifier()
    verified = 0
    for k in (1, 3, 5):
        truth = relative_pose(mono.world_T_body[0], mono.world_T_body[k])
        g2g = truth.copy()
        g2g[:3, 3] *= 1.1  # G2G's length 10 % long, its direction right
        tilt = np.array([[1.0, 0.0, 0.0], [0.0, 0.9986, -0.0523], [0.0, 0.0523, 0.9986]])
        g2g[:3, :3] = g2g[:3, :3] @ tilt  # and 3 deg off
        result = verifier(rig(mono, 0), rig(mono, k), g2g)
        assert result.path == PATH_G2G  # its length is not verified: never "verified"
        if not result.length_from_g2g:  # the essential matrix failed: G2G's step as it was
            assert np.allclose(result.delta, g2g) and result.method == "", result.reason
            continue
        verified += 1
        assert result.method == "one camera pair" and not result.carries_length
        assert "one camera pair" in result.reason and "length of the step from G2G" in \
            result.reason, result.reason
        dt, dr = error(truth, result.delta)
        assert dr < 1.0, (k, dr, result.reason)          # the geometry's rotation, not G2G's
        step = float(np.linalg.norm(truth[:3, 3]))
        assert dt < 0.1 * step + 0.02, (k, dt, step)      # G2G's length, the geometry's direction
    assert verified >= 2
