"""Trajectory format: round trip, atomic completion and every bad-input case."""

import json

import cv2
import numpy as np
import pytest

from g2g_model.data.format import (POSES_FILE, TrajectoryReader, TrajectoryWriter,
                                   find_trajectories, is_complete, partial_dir)
from g2g_model.data.rig import CameraSpec, Rig, pinhole_K
from g2g_model.geometry import axis_angle_to_matrix, make_pose

W, H = 16, 12


def _rig():
    return Rig([CameraSpec("front", pinhole_K(W, H, 90), W, H, np.eye(4)),
                CameraSpec("left", pinhole_K(W, H, 70), W, H,
                           make_pose(axis_angle_to_matrix([0, 0, 1.2]), [0.1, 0.2, 0.0]))])


def _frames(n=3, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        pose = make_pose(axis_angle_to_matrix(rng.normal(0, 0.5, 3)), rng.normal(0, 2, 3))
        imgs = {c: rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for c in ("front", "left")}
        deps = {c: rng.uniform(0.3, 20.0, (H, W)) for c in ("front", "left")}
        out.append((1_000_000_000 + 100_000_000 * i, pose, imgs, deps))
    return out


def _write(path, frames, depth=True):
    with TrajectoryWriter(path, _rig(), with_depth=depth, meta={"source": "test"}) as w:
        for stamp, pose, imgs, deps in frames:
            w.add_frame(stamp, pose, imgs, deps if depth else None)
    return path


def test_round_trip(tmp_path):
    frames = _frames()
    path = _write(tmp_path / "traj", frames)
    assert is_complete(path) and not partial_dir(path).exists()
    r = TrajectoryReader(path)
    r.validate_files()
    assert r.num_frames == 3 and r.cameras == ["front", "left"] and r.has_depth
    assert r.meta["source"] == "test"
    np.testing.assert_array_equal(r.timestamps_ns, [f[0] for f in frames])
    np.testing.assert_allclose(r.world_T_body, np.stack([f[1] for f in frames]), atol=1e-9)
    np.testing.assert_allclose(r.rig["left"].T_body_cam, _rig()["left"].T_body_cam)
    np.testing.assert_allclose(r.rig["left"].K, _rig()["left"].K)
    for i, (_, pose, imgs, deps) in enumerate(frames):
        for cam in ("front", "left"):
            np.testing.assert_array_equal(r.image(cam, i), imgs[cam])
            np.testing.assert_allclose(r.depth(cam, i), deps[cam], atol=0.0005 + 1e-6)
    np.testing.assert_allclose(r.world_T_cam("left")[1],
                               frames[1][1] @ _rig()["left"].T_body_cam, atol=1e-9)
    assert find_trajectories(tmp_path) == [path]
    # A collection of links to other collections' scenes (a link loop does not hang it).
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "scene").symlink_to(tmp_path)
    (linked / "loop").symlink_to(linked)
    assert find_trajectories(linked) == [linked / "scene" / "traj"]


def test_exception_leaves_nothing_complete(tmp_path):
    frames = _frames()
    path = tmp_path / "traj"
    with pytest.raises(RuntimeError):
        with TrajectoryWriter(path, _rig(), with_depth=True) as w:
            w.add_frame(*frames[0])
            raise RuntimeError("interrupted")
    assert not path.exists() and not partial_dir(path).exists()
    assert find_trajectories(tmp_path) == []


def test_interrupted_writer_is_not_complete_and_is_restarted(tmp_path):
    frames = _frames()
    path = tmp_path / "traj"
    w = TrajectoryWriter(path, _rig(), with_depth=True)
    w.add_frame(*frames[0])  # process "dies" here: no close()
    assert not is_complete(path) and find_trajectories(tmp_path) == []
    with pytest.raises(ValueError, match="meta.json"):
        TrajectoryReader(partial_dir(path))
    _write(path, frames)  # a restart removes the stale partial directory
    assert TrajectoryReader(path).num_frames == 3


def test_writer_rejects_bad_frames(tmp_path):
    stamp, pose, imgs, deps = _frames(1)[0]
    with TrajectoryWriter(tmp_path / "t", _rig(), with_depth=True) as w:
        w.add_frame(stamp, pose, imgs, deps)
        with pytest.raises(ValueError, match="not after"):
            w.add_frame(stamp, pose, imgs, deps)
        with pytest.raises(ValueError, match="uint8"):
            w.add_frame(stamp + 1, pose, {**imgs, "left": imgs["left"][:-1]}, deps)
        with pytest.raises(ValueError, match="NaN"):
            bad = deps["front"].copy()
            bad[2, 3] = np.nan
            w.add_frame(stamp + 2, pose, imgs, {**deps, "front": bad})
        with pytest.raises(ValueError, match="finite"):
            w.add_frame(stamp + 3, np.full((4, 4), np.nan), imgs, deps)
        with pytest.raises(ValueError, match="images for"):
            w.add_frame(stamp + 4, pose, {"front": imgs["front"]}, deps)
    with pytest.raises(ValueError, match="already exists"):
        TrajectoryWriter(tmp_path / "t", _rig())
    # Rejected frames left no files behind.
    assert sorted(p.name for p in (tmp_path / "t" / "images" / "front").iterdir()) == \
        ["000000.png"]


def _poses_lines(path):
    return (path / POSES_FILE).read_text().splitlines()


def _set_line(path, lineno, text):
    lines = _poses_lines(path)
    lines[lineno - 1] = text
    (path / POSES_FILE).write_text("\n".join(lines) + "\n")


def test_reader_nan_pose_names_file_and_line(tmp_path):
    path = _write(tmp_path / "t", _frames())
    fields = _poses_lines(path)[2].split(",")
    fields[3] = "nan"
    _set_line(path, 3, ",".join(fields))
    with pytest.raises(ValueError, match=r"poses\.csv:3: non-finite"):
        TrajectoryReader(path)


def test_reader_unsorted_timestamps(tmp_path):
    path = _write(tmp_path / "t", _frames())
    lines = _poses_lines(path)
    first = lines[1].split(",")
    third = lines[3].split(",")
    third[0] = first[0]
    _set_line(path, 4, ",".join(third))
    with pytest.raises(ValueError, match=r"poses\.csv:4: timestamp_ns .* not after"):
        TrajectoryReader(path)


@pytest.mark.parametrize("text,match", [
    ("1,2,3", "expected 8 fields"),
    ("12,a,0,0,0,0,0,1", r"poses\.csv:2"),
    ("12,0,0,0,0,0,0,2", "quaternion norm"),
])
def test_reader_malformed_rows(tmp_path, text, match):
    path = _write(tmp_path / "t", _frames())
    _set_line(path, 2, text)
    with pytest.raises(ValueError, match=match):
        TrajectoryReader(path)


def test_reader_missing_image_names_file(tmp_path):
    path = _write(tmp_path / "t", _frames())
    (path / "images" / "left" / "000001.png").unlink()
    with pytest.raises(ValueError, match=r"images/left/000001\.png: missing"):
        TrajectoryReader(path)


def test_reader_missing_depth_and_files(tmp_path):
    path = _write(tmp_path / "t", _frames())
    (path / "depth" / "front" / "000002.png").unlink()
    with pytest.raises(ValueError, match=r"depth/front/000002\.png: missing"):
        TrajectoryReader(path)
    (path / "rig.yaml").unlink()
    with pytest.raises(ValueError, match=r"rig\.yaml: missing"):
        TrajectoryReader(path)


def test_reader_wrong_image_size_and_depth_dtype(tmp_path):
    path = _write(tmp_path / "t", _frames())
    cv2.imwrite(str(path / "images" / "front" / "000000.png"), np.zeros((H + 1, W, 3), np.uint8))
    cv2.imwrite(str(path / "depth" / "left" / "000001.png"), np.zeros((H, W), np.uint8))
    r = TrajectoryReader(path)  # sizes are checked on load
    with pytest.raises(ValueError, match=r"images/front/000000\.png: expected uint8 \[12,16,3\]"):
        r.image("front", 0)
    with pytest.raises(ValueError, match=r"depth/left/000001\.png: expected uint16"):
        r.depth("left", 1)
    with pytest.raises(ValueError, match="000000.png"):
        r.validate_files()


def test_reader_incomplete_or_inconsistent_meta(tmp_path):
    path = _write(tmp_path / "t", _frames())
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "num_frames": 5}))
    with pytest.raises(ValueError, match="num_frames 5"):
        TrajectoryReader(path)
    (path / "meta.json").write_text(json.dumps({**meta, "complete": False}))
    with pytest.raises(ValueError, match="complete"):
        TrajectoryReader(path)
    assert not is_complete(path)
    (path / "meta.json").unlink()
    with pytest.raises(ValueError, match="meta.json: missing"):
        TrajectoryReader(path)


def test_reader_bad_rig(tmp_path):
    path = _write(tmp_path / "t", _frames())
    text = (path / "rig.yaml").read_text()
    (path / "rig.yaml").write_text(text.replace("width: 16", "width: -16", 1))
    with pytest.raises(ValueError, match=r"rig\.yaml.*size -16x12"):
        TrajectoryReader(path)


def test_camera_spec_validation():
    with pytest.raises(ValueError, match="K needs"):
        CameraSpec("a", np.diag([-1.0, 1.0, 1.0]), 4, 4)
    with pytest.raises(ValueError, match="not a rotation"):
        CameraSpec("a", pinhole_K(4, 4, 90), 4, 4, np.diag([2.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="unique"):
        Rig([CameraSpec("a", pinhole_K(4, 4, 90), 4, 4)] * 2)
