"""tools/make_real_stereo.py: the stereo rig from KITTI's projection matrices and the
conversion of a source repository into the dataset format (a small repository made here, in
the source's layout)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import make_real_stereo  # noqa: E402
from make_real_stereo import main, stereo_rig  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402

# KITTI odometry sequence 06's P0 and P1 (its calib.txt): fx 707.0912, baseline 0.537 m.
P0 = np.array([[707.0912, 0, 601.8873, 0], [0, 707.0912, 183.1104, 0], [0, 0, 1, 0]])
P1 = P0.copy()
P1[0, 3] = -379.8145


def test_the_right_camera_sits_a_baseline_to_the_left_cameras_right():
    rig = stereo_rig(np.stack([P0, P1]), 1226, 370)
    left, right = rig["left"].T_body_cam, rig["right"].T_body_cam
    np.testing.assert_allclose(left[:3, 3], 0.0)
    np.testing.assert_allclose(right[:3, 3], [0.0, -379.8145 / 707.0912, 0.0])  # body y: left
    np.testing.assert_allclose(left[:3, 2], [1.0, 0.0, 0.0])   # both look forward (body x)
    np.testing.assert_allclose(right[:3, :3], left[:3, :3])
    np.testing.assert_allclose(rig["right"].K, P0[:, :3])
    other = P1.copy()
    other[0, 0] = 700.0
    with pytest.raises(ValueError, match="not rectified"):
        stereo_rig(np.stack([P0, other]), 1226, 370)
    far = P1.copy()
    far[0, 3] = -707.0912 * 9
    with pytest.raises(ValueError, match="baseline"):
        stereo_rig(np.stack([P0, far]), 1226, 370)


def _source_repo(tmp_path: Path, frames: int) -> Path:
    """A git repository in the source's layout: one clip of ``frames`` stereo frames, the left
    camera moving 1.2 m forward (its +z) per frame."""
    repo = tmp_path / "src"
    clip = repo / "KITTI_sequence_1"
    rng = np.random.default_rng(0)
    for sub in ("image_l", "image_r"):
        (clip / sub).mkdir(parents=True)
        for k in range(frames):
            cv2.imwrite(str(clip / sub / f"{k:06d}.png"),
                        rng.integers(0, 255, (40, 120), dtype=np.uint8))
    # KITTI's field of view on the small images: P scaled by 120 / 1226.
    small = [P * np.array([[0.0979], [0.0979], [1.0]]) for P in (P0, P1)]
    (clip / "calib.txt").write_text("\n".join(" ".join(f"{v:e}" for v in P.ravel())
                                              for P in small))
    poses = [np.hstack([np.eye(3), [[0.0], [0.0], [1.2 * k]]]).ravel() for k in range(frames)]
    (clip / "poses.txt").write_text("\n".join(" ".join(f"{v:e}" for v in p) for p in poses))
    for cmd in (["init", "-q"], ["add", "."],
                ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "clip"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True)
    return repo


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_source_file_that_is_not_the_recorded_one_is_refused(tmp_path, capsys):
    repo = _source_repo(tmp_path, 3)
    assert main(["--visualslam-repo", str(repo), "--commit", "HEAD",
                 "--out", str(tmp_path / "out")]) == 2
    assert "is not the recorded" in capsys.readouterr().err


def test_conversion_into_the_dataset_format(tmp_path, monkeypatch):
    repo = _source_repo(tmp_path, 14)
    clip = repo / "KITTI_sequence_1"
    monkeypatch.setattr(make_real_stereo, "FRAMES", 14)
    monkeypatch.setattr(make_real_stereo, "CLIPS", {"KITTI_sequence_1": (
        "clip", "06", _sha(clip / "calib.txt"), _sha(clip / "poses.txt"))})
    out = tmp_path / "out"
    assert main(["--visualslam-repo", str(repo), "--commit", "HEAD", "--out", str(out)]) == 0
    traj = TrajectoryReader(out / "clip")
    assert traj.num_frames == 14 and list(traj.cameras) == ["left", "right"]
    # World = the body at the first frame, z up; the car drives along its x axis.
    np.testing.assert_allclose(traj.world_T_body[0], np.eye(4), atol=1e-9)
    np.testing.assert_allclose(traj.world_T_body[2][:3, 3], [2.4, 0.0, 0.0], atol=1e-9)
    image = traj.image("right", 1)
    assert image.shape == (40, 120, 3) and np.array_equal(image[..., 0], image[..., 2])
    source = cv2.imread(str(clip / "image_r" / "000001.png"), cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(image[..., 0], source)
    sources = json.loads((out / "sources.json").read_text())
    assert sources["clips"]["clip"]["sha256"]
    # Relocalization windows of the left camera along the drive, both ways, no shared frame.
    pairs = json.loads((out / "pairs_w5.json").read_text())
    assert pairs and sources["window_pairs"]["pairs_w5"] == len(pairs)
    assert all(p["traj_a"] == "clip" and p["cam_a"] == "left" and
               abs(p["start_a"] - p["start_b"]) >= 5 for p in pairs)
    # A second run keeps the trajectory and its record.
    assert main(["--visualslam-repo", str(repo), "--commit", "HEAD", "--out", str(out)]) == 0
    assert json.loads((out / "sources.json").read_text())["clips"]["clip"]["sha256"]
