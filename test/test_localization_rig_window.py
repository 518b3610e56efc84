"""The refined window of rig odometry (GTSAM bundle adjustment over the last keyframes) on a
stereo rig driving through synthetic points: a step published too long is pulled back by the
points the window's keyframes share, a refinement that would move a pose beyond what its step
explains is refused, and RigOdometry publishes the refined pose and restarts the window after a
step without geometry."""

from __future__ import annotations

import numpy as np
import pytest

from g2g_model.geometry import invert_pose, make_pose, relative_pose
from g2g_model.localization.rig_motion import MotionVerification
from g2g_model.localization.rig_window import KeyframeWindow
from g2g_ros.odometry_core import RigFrames, RigOdometry
from rig_fixtures import rig, yawed  # noqa: E402

K = np.array([[400.0, 0.0, 320.0], [0.0, 400.0, 240.0], [0.0, 0.0, 1.0]])
BASE_T_CAM = rig([(0.0, [0.0, 0.25, 1.2]), (0.0, [0.0, -0.25, 1.2])])  # a forward stereo pair
CAMERAS = [(T, K) for T in BASE_T_CAM]
STEP = make_pose(yawed(1.0), [1.0, 0.0, 0.0])  # 1 m ahead, turning 1 deg per keyframe


def drive(keyframes: int, seed: int = 0):
    """True odom_T_base per keyframe and, per consecutive pair, the correspondences of the
    points both keyframes see in any camera pair (the same noisy pixel of a point in both of
    its links, as a feature detector gives)."""
    rng = np.random.default_rng(seed)
    poses = [np.linalg.matrix_power(STEP, k) for k in range(keyframes)]
    points = np.c_[rng.uniform(4.0, 30.0, 600) + keyframes, rng.uniform(-12, 12, 600),
                   rng.uniform(-1.0, 4.0, 600)]
    pixels = []  # [keyframe][camera] -> ([P, 2] pixels, [P] visible)
    for pose in poses:
        per_cam = []
        for base_T_cam in BASE_T_CAM:
            cam = invert_pose(pose @ base_T_cam)
            local = points @ cam[:3, :3].T + cam[:3, 3]
            h = local @ K.T
            uv = h[:, :2] / h[:, 2:3] + rng.normal(0.0, 0.5, (len(points), 2))
            seen = (local[:, 2] > 0.5) & (uv[:, 0] > 0) & (uv[:, 0] < 640) & (uv[:, 1] > 0) \
                & (uv[:, 1] < 480)
            per_cam.append((uv, seen))
        pixels.append(per_cam)
    links = []
    for k in range(keyframes - 1):
        link = []
        for a in range(2):
            for b in range(2):
                both = pixels[k][a][1] & pixels[k + 1][b][1]
                link.append((a, b, pixels[k][a][0][both], pixels[k + 1][b][0][both]))
        links.append(link)
    return poses, links


def test_a_step_published_too_long_is_pulled_back():
    poses, links = drive(5)
    window = KeyframeWindow(5)
    window.restart(poses[0], np.zeros((6, 6)), CAMERAS)
    current = poses[0]
    refined = None
    for k in range(1, 5):
        step = relative_pose(poses[k - 1], poses[k])
        if k == 4:
            step = step.copy()
            step[:3, 3] *= 1.12  # the newest step measured 12 % long
        guess = current @ step
        refined = window.add(guess, np.eye(6) * 1e-4 * k, CAMERAS, links[k - 1])
        current = refined.pose if refined is not None else guess
    assert refined is not None and "window of 5 keyframes refined" in refined.reason
    before = np.linalg.norm(guess[:3, 3] - poses[4][:3, 3])
    after = np.linalg.norm(refined.pose[:3, 3] - poses[4][:3, 3])
    assert before == pytest.approx(0.12, abs=0.01)
    assert after < 0.02, (before, after)
    # The oldest keyframe is held: the covariance is its own plus the refinement's, PSD.
    assert np.all(np.linalg.eigvalsh(refined.covariance) > 0)
    assert refined.covariance.shape == (6, 6)


def test_a_refinement_beyond_what_the_step_explains_is_refused():
    poses, links = drive(4, seed=1)
    window = KeyframeWindow(4, max_shift=0.05)
    window.restart(poses[0], np.zeros((6, 6)), CAMERAS)
    for k in range(1, 4):
        guess = poses[k].copy()
        if k == 3:
            guess[:3, 3] += [0.3, 0.0, 0.0]  # 30 % of the 1 m step
        out = window.add(guess, np.zeros((6, 6)), CAMERAS, links[k - 1])
    assert out is None and "the step stands" in window.last_note


def test_a_failing_refinement_leaves_the_step_as_measured(monkeypatch):
    """Whatever the solver raises, the step stands, the reason says why, and the keyframe
    stays in the window (the odometry moved on from it)."""
    import gtsam

    poses, links = drive(3)
    window = KeyframeWindow(3)
    window.restart(poses[0], np.zeros((6, 6)), CAMERAS)
    window.add(poses[1], np.zeros((6, 6)), CAMERAS, links[0])

    def broken(*args):
        raise RuntimeError("Indeterminant linear system")

    monkeypatch.setattr(gtsam, "LevenbergMarquardtOptimizer", broken)
    assert window.add(poses[2], np.zeros((6, 6)), CAMERAS, links[1]) is None
    assert "the refinement failed (RuntimeError: Indeterminant" in window.last_note
    assert len(window.frames) == 3 and len(window.links) == 2


def test_no_correspondences_restart_the_window_and_a_short_window_is_refused():
    poses, links = drive(3)
    window = KeyframeWindow(3)
    window.restart(poses[0], np.zeros((6, 6)), CAMERAS)
    assert window.add(poses[1], np.zeros((6, 6)), CAMERAS, links[0]) is None  # 2 keyframes
    assert window.add(poses[2], np.zeros((6, 6)), CAMERAS, []) is None
    assert len(window.frames) == 1 and not window.links
    with pytest.raises(ValueError, match="at least 3 keyframes"):
        KeyframeWindow(2)


def test_rig_odometry_publishes_the_refined_pose_and_restarts_after_g2g():
    poses, links = drive(6, seed=2)
    answers = iter([("refined", 1.0), ("refined", 1.0), ("refined", 1.15), ("g2g", 1.0),
                    ("refined", 1.0)])
    calls = []

    class Verifier:
        def __call__(self, a, b, delta):
            k = len(calls) + 1
            path, scale = next(answers)
            step = relative_pose(poses[k - 1], poses[k]).copy()
            step[:3, 3] *= scale
            calls.append(path)
            out = MotionVerification(path, step, np.eye(6) * 1e-4, 99, path)
            out.correspondences = links[k - 1] if path != "g2g" else []
            return out

    odo = RigOdometry(lambda a, b: (np.eye(4), np.eye(4)[None]),
                      {"left": BASE_T_CAM[0], "right": BASE_T_CAM[1]}, verifier=Verifier(),
                      window=KeyframeWindow(3))
    image = np.zeros((8, 8, 3), np.uint8)
    updates = [odo.process(RigFrames(stamp_ns=(k + 1) * 10**8, cameras=["left", "right"],
                                     images=[image, image], intrinsics=np.stack([K, K])))
               for k in range(6)]
    assert "window" not in updates[1].reason  # two keyframes: nothing to refine yet
    assert "window of 3 keyframes refined" in updates[2].reason
    # The step measured 15 % long is published refined: within 2 cm of the truth.
    assert "window of 3 keyframes refined" in updates[3].reason
    assert np.linalg.norm(updates[3].odom_T_base[:3, 3] - poses[3][:3, 3]) < 0.02
    np.testing.assert_allclose(updates[3].odom_T_base,
                               updates[2].odom_T_base @ updates[3].delta, atol=1e-9)
    # After a step left to G2G the window starts again: two keyframes, no refinement.
    assert updates[4].path == "g2g" and "window" not in updates[5].reason
