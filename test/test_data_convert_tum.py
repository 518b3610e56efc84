"""TUM RGB-D converter, pose-only overlap proxy and the real-val build tool, on tiny fakes."""

import importlib.util
import json
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from g2g_model.data.convert_tum import T_BODY_OPTICAL, convert_tum
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.frustum_pairs import frustum_overlap_matrix, frustum_window_pairs

W, H = 40, 30
FX, FY, CX, CY = 50.0, 52.0, 19.5, 14.5
GT_T = np.arange(10.05, 10.70, 0.02)          # ground truth 10.05 .. 10.69 s
IMG_T = ["9.990000", "10.100000", "10.250000", "10.400000", "10.550000", "10.800000"]


def _gt_pose(t):
    rot = Rotation.from_euler("y", 20.0 * (t - 10.0), degrees=True)
    return rot, np.array([0.5 * (t - 10.0), 0.1, 1.0 + 0.2 * (t - 10.0)])


def _tum_tree(root: Path, header="# ground truth trajectory\n"):
    (root / "rgb").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = {}
    for name in IMG_T:
        img = rng.integers(0, 255, (H, W, 3), dtype=np.uint8)
        cv2.imwrite(str(root / "rgb" / f"{name}.png"), img)
        images[name] = img
    lines = [header]
    for t in GT_T:
        rot, pos = _gt_pose(t)
        q = rot.as_quat()
        lines.append(f"{t:.4f} {pos[0]:.6f} {pos[1]:.6f} {pos[2]:.6f} "
                     f"{q[0]:.8f} {q[1]:.8f} {q[2]:.8f} {q[3]:.8f}\n")
    (root / "groundtruth.txt").write_text("".join(lines))
    return images


def test_convert_tum_poses_images_and_provenance(tmp_path):
    src = tmp_path / "src"
    images = _tum_tree(src)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in src.rglob("*"))
    out = convert_tum(src, tmp_path / "traj", camera=None, intrinsics=(FX, FY, CX, CY),
                      meta={"repo": "someone/something", "commit": "abc"})
    assert sorted((p.name, p.stat().st_mtime_ns) for p in src.rglob("*")) == before
    r = TrajectoryReader(out)
    r.validate_files()
    kept = ["10.100000", "10.250000", "10.400000", "10.550000"]  # inside the ground truth
    assert r.num_frames == len(kept)
    np.testing.assert_allclose(r.rig["cam0"].K, [[FX, 0, CX], [0, FY, CY], [0, 0, 1]])
    np.testing.assert_allclose(r.rig["cam0"].T_body_cam, T_BODY_OPTICAL)
    slerp = Slerp(GT_T, Rotation.from_quat([_gt_pose(t)[0].as_quat() for t in GT_T]))
    world_T_cam = r.world_T_cam("cam0")
    for k, name in enumerate(kept):
        t = float(name)
        np.testing.assert_allclose(world_T_cam[k][:3, :3], slerp([t]).as_matrix()[0], atol=1e-5)
        np.testing.assert_allclose(world_T_cam[k][:3, 3], _gt_pose(t)[1], atol=1e-5)
        np.testing.assert_array_equal(r.image("cam0", k), images[name][..., ::-1])
    meta = json.loads((out / "meta.json").read_text())
    assert meta["repo"] == "someone/something" and meta["source"] == "tum-rgbd"
    assert meta["images_outside_ground_truth"] == 2
    first_row = (out / "poses.csv").read_text().splitlines()[1]
    assert first_row.split(",")[0] == "10100000000"


def test_convert_tum_preset_with_distortion(tmp_path):
    _tum_tree(tmp_path / "src")
    r = TrajectoryReader(convert_tum(tmp_path / "src", tmp_path / "t", camera="fr1"))
    assert r.num_frames == 4 and r.rig["cam0"].K[0, 0] == pytest.approx(517.3)


@pytest.mark.parametrize("what, kwargs, message", [
    ("no_gt", {}, "groundtruth.txt"),
    ("no_rgb", {}, "missing image folder"),
    ("outside", {}, "no image lies inside"),
    ("ok", {"camera": "fr9"}, "unknown TUM camera"),
    ("ok", {"camera": "fr3", "intrinsics": (1, 1, 1, 1)}, "exactly one"),
    ("ok", {"camera": None, "intrinsics": (0, 1, 1, 1)}, "fx fy > 0"),
    ("bad_name", {}, "not <sec>.<fraction>"),
    ("bad_size", {}, "not 40x30"),
])
def test_convert_tum_errors(tmp_path, what, kwargs, message):
    src = tmp_path / "src"
    _tum_tree(src)
    if what == "no_gt":
        (src / "groundtruth.txt").unlink()
    elif what == "no_rgb":
        for f in (src / "rgb").iterdir():
            f.unlink()
        (src / "rgb").rmdir()
    elif what == "outside":
        for f in (src / "rgb").iterdir():
            if f.stem not in ("9.990000", "10.800000"):
                f.unlink()
    elif what == "bad_name":
        cv2.imwrite(str(src / "rgb" / "frame.png"), np.zeros((H, W, 3), np.uint8))
    elif what == "bad_size":
        cv2.imwrite(str(src / "rgb" / "10.400000.png"), np.zeros((H + 2, W, 3), np.uint8))
    kwargs = {"camera": "fr3", **kwargs}
    with pytest.raises(ValueError, match=message):
        convert_tum(src, tmp_path / "traj", **kwargs)
    assert not (tmp_path / "traj").exists()


def _cam(yaw_deg=0.0, x=0.0):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("y", yaw_deg, degrees=True).as_matrix()
    T[0, 3] = x
    return T


def test_frustum_overlap_proxy():
    K = np.array([[FX, 0, CX], [0, FY, CY], [0, 0, 1]])
    poses = np.stack([_cam(), _cam(x=0.5), _cam(yaw_deg=180.0), _cam(x=10.0)])
    o = frustum_overlap_matrix(K, W, H, poses, depth_m=2.0)
    np.testing.assert_allclose(np.diag(o), 1.0)
    np.testing.assert_allclose(o, o.T)
    assert 0.3 < o[0, 1] < 0.95          # half a metre sideways at 2 m: partial overlap
    assert o[0, 2] == 0.0 and o[0, 3] == 0.0
    with pytest.raises(ValueError, match="depth_m"):
        frustum_overlap_matrix(K, W, H, poses, depth_m=0.0)


def test_frustum_window_pairs():
    overlap = np.full((10, 10), 0.5)
    np.fill_diagonal(overlap, 1.0)
    pairs = frustum_window_pairs(overlap, "t", "cam0", window=3, gaps=[3, 4])
    # starts 0..7; gap 3: i = 0..4, gap 4: i = 0..3; both directions
    assert len(pairs) == 2 * (5 + 4)
    assert all(abs(p.start_a - p.start_b) >= 3 and p.window == 3 for p in pairs)
    assert {(p.start_a, p.start_b) for p in pairs} >= {(0, 3), (3, 0), (3, 7), (7, 3)}
    assert len(frustum_window_pairs(overlap, "t", "cam0", 3, [3], both_directions=False)) == 5
    with pytest.raises(ValueError, match="share frames"):
        frustum_window_pairs(overlap, "t", "cam0", window=3, gaps=[2])


def _load_tool():
    path = Path(__file__).resolve().parents[1] / "tools" / "make_real_val.py"
    spec = importlib.util.spec_from_file_location("make_real_val", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _git_repo(root: Path, files: dict) -> str:
    root.mkdir(parents=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), *env, "commit", "-qm", "x"], check=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_real_val_tool_builds_set_from_git_clones(tmp_path, monkeypatch):
    tool = _load_tool()
    src = tmp_path / "tum"
    _tum_tree(src)
    frames = {f"{tool.FRAMES['path']}/{p.name}": p.read_bytes()
              for p in sorted((src / "rgb").iterdir())}
    frames_commit = _git_repo(tmp_path / "frames_repo", frames)
    gt_commit = _git_repo(tmp_path / "gt_repo",
                          {tool.GROUND_TRUTH["path"]: (src / "groundtruth.txt").read_bytes()})
    monkeypatch.setattr(tool, "FRAMES", dict(tool.FRAMES, commit=frames_commit))
    monkeypatch.setattr(tool, "GROUND_TRUTH", dict(tool.GROUND_TRUTH, commit=gt_commit))
    monkeypatch.setattr(tool, "PAIR_SETS", {1: (1, 2)})
    out = tmp_path / "real_val"
    assert tool.main(["--superglue-repo", str(tmp_path / "frames_repo"), "--edgeicp-repo",
                      str(tmp_path / "gt_repo"), "--out", str(out)]) == 0
    r = TrajectoryReader(out / tool.TRAJ_NAME)
    assert r.num_frames == 4
    meta = json.loads((out / tool.TRAJ_NAME / "meta.json").read_text())
    assert meta["frames_source"]["commit"] == frames_commit
    assert meta["ground_truth_source"]["commit"] == gt_commit
    pairs = json.loads((out / "pairs_w1.json").read_text())
    assert len(pairs) == 2 * (3 + 2) and set(pairs[0]) == {
        "traj_a", "cam_a", "start_a", "traj_b", "cam_b", "start_b", "window", "score"}
    assert json.loads((out / "sources.json").read_text())["summary"]["frames"] == 4
    # A commit the clone does not have is a clear error, not a traceback.
    monkeypatch.setattr(tool, "GROUND_TRUTH", dict(tool.GROUND_TRUTH, commit="0" * 40))
    assert tool.main(["--superglue-repo", str(tmp_path / "frames_repo"), "--edgeicp-repo",
                      str(tmp_path / "gt_repo"), "--out", str(tmp_path / "other")]) == 2


def cabinet_files(cabinet: dict, pose_of, frames: int = 6) -> dict:
    """The files of a fake ``shichaoy/cube_slam`` clone at ``cabinet``'s paths: ``frames`` JPEG
    frames named by index and its pose file, one line per frame 0.67 s apart
    (``stamp tx ty tz qx qy qz qw``, tab-separated; ``pose_of(i)`` -> (Rotation, position))."""
    files, lines = {}, []
    for i in range(frames):
        ok, jpg = cv2.imencode(".jpg", np.full((H, W, 3), 30 * i, np.uint8))
        files[f"{cabinet['frames']}/{i:04d}_rgb_raw.jpg"] = jpg.tobytes()
        rot, pos = pose_of(i)
        lines.append(f"{1341841278.8427 + 0.67 * i:.4f}\t" + "\t".join(
            f"{v:.6f}" for v in (*pos, *rot.as_quat())))
    files[cabinet["ground_truth"]] = ("\n".join(lines) + "\n").encode()
    return files


def test_real_val_tool_builds_the_cabinet_set(tmp_path, monkeypatch):
    """--cubeslam-repo: the frames (JPEG, named by index) with one pose per frame, converted
    to data/real_val_cabinet's layout with its window pairs."""
    tool = _load_tool()
    files = cabinet_files(tool.CABINET, lambda i: _gt_pose(10.0 + 0.1 * i))
    monkeypatch.setattr(tool, "CABINET", dict(tool.CABINET, commit=_git_repo(
        tmp_path / "clone", files)))
    monkeypatch.setattr(tool, "PAIR_SETS", {1: (1, 2)})
    out = tmp_path / "cabinet"
    assert tool.main(["--cubeslam-repo", str(tmp_path / "clone"), "--out", str(out)]) == 0
    r = TrajectoryReader(out / tool.CABINET_TRAJ_NAME)
    assert r.num_frames == 6
    np.testing.assert_allclose(r.world_T_cam("cam0")[3][:3, 3], _gt_pose(10.3)[1], atol=1e-6)
    assert len(json.loads((out / "pairs_w1.json").read_text())) == 2 * (5 + 4)
    written = json.loads((out / "sources.json").read_text())
    assert written["dataset"]["name"].endswith("freiburg3_cabinet")
    assert written["source"]["repo"] == "shichaoy/cube_slam"
    with pytest.raises(SystemExit):   # one source at a time
        tool.main(["--cubeslam-repo", str(tmp_path / "clone"), "--superglue-repo",
                   str(tmp_path), "--out", str(tmp_path / "x")])


def test_g2g_data_convert_tum_cli(tmp_path, capsys):
    from g2g_model.data.cli import main

    _tum_tree(tmp_path / "src")
    assert main(["convert-tum", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "t"),
                 "--intrinsics", str(FX), str(FY), str(CX), str(CY)]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == 4
    with pytest.raises(SystemExit, match="convert-tum: error: .*groundtruth.txt: missing"):
        main(["convert-tum", "--src", str(tmp_path / "nowhere"), "--out", str(tmp_path / "u")])


def test_convert_tum_follows_rgb_txt_with_any_image_format(tmp_path):
    """rgb.txt names the images (here JPEG files in another folder, names without stamps); an
    image it does not list is not taken."""
    src = tmp_path / "src"
    _tum_tree(src)
    (src / "frames").mkdir()
    lines = ["# timestamp filename\n"]
    for k, name in enumerate(IMG_T):
        png = cv2.imread(str(src / "rgb" / f"{name}.png"))
        cv2.imwrite(str(src / "frames" / f"f{k}.jpg"), png)
        if name != "10.400000":
            lines.append(f"{name} frames/f{k}.jpg\n")
    (src / "rgb.txt").write_text("".join(lines))
    r = TrajectoryReader(convert_tum(src, tmp_path / "traj", camera=None,
                                     intrinsics=(FX, FY, CX, CY)))
    assert [int(t) for t in r.timestamps_ns] == [10_100_000_000, 10_250_000_000, 10_550_000_000]
    jpeg = cv2.imread(str(src / "frames" / "f4.jpg"))[..., ::-1]   # 10.550000
    np.testing.assert_array_equal(r.image("cam0", 2), jpeg)
    (src / "rgb.txt").write_text("10.100000 frames/missing.jpg\n")
    with pytest.raises(ValueError, match="missing.jpg does not exist"):
        convert_tum(src, tmp_path / "t2", camera="fr3")


def test_convert_tum_lists_jpeg_folders_without_rgb_txt(tmp_path):
    src = tmp_path / "src"
    _tum_tree(src)
    for f in list((src / "rgb").iterdir()):
        cv2.imwrite(str(f.with_suffix(".jpg")), cv2.imread(str(f)))
        f.unlink()
    assert TrajectoryReader(convert_tum(src, tmp_path / "traj", camera="fr3")).num_frames == 4


def test_convert_tum_rotates_a_y_down_world_to_z_up(tmp_path):
    """The fake's camera turns about the world's y axis, level: a y-down world. With
    world_up="y-down" gravity (+y there) ends up along -z: the body's z axis (up) is +z in
    every frame; left as it is (z-up, the default) it is not."""
    from g2g_model.data.cli import main
    from g2g_model.data.convert_tum import Y_DOWN_TO_Z_UP

    np.testing.assert_allclose(Y_DOWN_TO_Z_UP[:3, :3] @ [0, 1, 0], [0, 0, -1])
    _tum_tree(tmp_path / "src")
    assert main(["convert-tum", "--src", str(tmp_path / "src"), "--out", str(tmp_path / "up"),
                 "--camera", "fr3", "--world-up", "y-down"]) == 0
    up = TrajectoryReader(tmp_path / "up")
    np.testing.assert_allclose(up.world_T_body[:, :3, 2], np.tile([0, 0, 1], (4, 1)), atol=1e-6)
    # Gravity in each body frame is its -z, as for a level robot on the ground.
    down = np.einsum("nji,j->ni", up.world_T_body[:, :3, :3], [0, 0, -1])
    np.testing.assert_allclose(down, np.tile([0, 0, -1], (4, 1)), atol=1e-6)
    assert json.loads((tmp_path / "up" / "meta.json").read_text())["world_up"] == "y-down"
    same = TrajectoryReader(convert_tum(tmp_path / "src", tmp_path / "as_is", camera="fr3"))
    assert np.all(np.abs(same.world_T_body[:, 2, 2]) < 0.5)    # body z lies in the y-down plane
    # Positions: new x = old z, new y = -old x, new z = -old y.
    old = same.world_T_body[:, :3, 3]
    np.testing.assert_allclose(up.world_T_body[:, :3, 3],
                               np.stack([old[:, 2], -old[:, 0], -old[:, 1]], 1), atol=1e-9)


def test_convert_tum_takes_a_ground_truth_sampled_at_the_images(tmp_path):
    """A ground truth already associated with the images (one sample per image, here 0.15 s
    apart: more than the 50 ms interpolation gap) gives every image its own sample; an image
    between two such samples is still dropped."""
    src = tmp_path / "src"
    _tum_tree(src)
    lines = ["# timestamp tx ty tz qx qy qz qw\n"]
    for name in IMG_T[1:5]:
        rot, pos = _gt_pose(float(name))
        lines.append(f"{name} {' '.join(f'{v:.6f}' for v in pos)} "
                     f"{' '.join(f'{v:.8f}' for v in rot.as_quat())}\n")
    (src / "groundtruth.txt").write_text("".join(lines))
    cv2.imwrite(str(src / "rgb" / "10.300000.png"), np.zeros((H, W, 3), np.uint8))
    r = TrajectoryReader(convert_tum(src, tmp_path / "traj", camera=None,
                                     intrinsics=(FX, FY, CX, CY)))
    assert [int(t) for t in r.timestamps_ns] == [10_100_000_000, 10_250_000_000,
                                                 10_400_000_000, 10_550_000_000]
    np.testing.assert_allclose(r.world_T_cam("cam0")[2][:3, 3], _gt_pose(10.4)[1], atol=1e-6)
