"""The real-sequence relocalization benchmark's own code: the map / query split of
tools/make_real_reloc.py and the fix scoring of benchmarks/reloc_scoring.py (the replay itself
is the benchmark, not a test)."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from make_real_reloc import main as make_main, split_frames  # noqa: E402

sys.path.insert(0, str(ROOT / "test"))
from test_data_convert_tum import _git_repo, cabinet_files  # noqa: E402

from benchmarks.reloc_scoring import (  # noqa: E402
    coverage, fix_records, is_false_accept, summarize,
)
from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.geometry import make_pose  # noqa: E402


def _yaw(deg):
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def test_split_frames_half_and_interleave():
    assert split_frames(10, "half") == (list(range(5)), list(range(5, 10)))
    assert split_frames(10, "half", 0.3) == ([0, 1, 2], list(range(3, 10)))
    assert split_frames(7, "interleave") == ([0, 2, 4, 6], [1, 3, 5])
    with pytest.raises(ValueError, match="at least 4"):
        split_frames(3, "half")
    with pytest.raises(ValueError, match="split must be"):
        split_frames(10, "thirds")


def _alignment(stamp_ns, path, inliers):
    stamp = SimpleNamespace(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp), path=path, inliers=inliers,
                           pose_source="feature matches (x)", overlap_score=0.5)


def test_fix_records_errors_evidence_and_false_accepts():
    truth = {10**9: np.eye(4), 2 * 10**9: make_pose(_yaw(90.0), np.array([1.0, 0.0, 0.0]))}
    fixes = [(10**9, make_pose(np.eye(3), np.array([0.1, 0.0, 0.0]))),
             (2 * 10**9, make_pose(_yaw(94.0), np.array([1.0, 0.0, 0.0]))),
             (3 * 10**9, np.eye(4))]                      # no ground truth: left out
    aligns = [_alignment(10**9, "verified", 120), _alignment(2 * 10**9, "", 0)]
    records = fix_records(fixes, truth, aligns)
    assert [r["stamp_ns"] for r in records] == [10**9, 2 * 10**9]
    assert records[0]["trans_err_m"] == pytest.approx(0.1)
    assert records[0]["rot_err_deg"] == pytest.approx(0.0, abs=1e-6)
    assert (records[0]["path"], records[0]["inliers"]) == ("verified", 120)
    assert records[1]["rot_err_deg"] == pytest.approx(4.0)
    assert records[1]["path"] == "g2g"                    # empty path: G2G alone
    assert [is_false_accept(r) for r in records] == [False, True]
    summary = summarize(records, localizations=8, covered_fraction=0.5)
    assert summary["fixes"] == 2 and summary["false_accepts"] == 1
    assert summary["by_path"] == {"verified": 1, "g2g": 1}
    assert summary["false_accepts_by_path"] == {"verified": 0, "g2g": 1}
    assert summary["trans_median_m"] == pytest.approx(0.05)
    assert summary["fix_rate_where_covered"] == pytest.approx(0.5)
    empty = summarize([], localizations=0, covered_fraction=0.0)
    assert empty["trans_median_m"] is None and empty["fix_rate_where_covered"] is None


def test_fix_errors_in_published_standard_deviations():
    """Each fix's error over the widest axis of the covariance published with it; the
    coverage counts the fixes within 3 sd, published and the verifier's own (5x narrower)."""
    from g2g_ros.bags.fix_covariance import coverage as covariance_coverage, widest_sd

    sd_m, sd_deg = 0.05, 1.0
    cov = np.diag([sd_m ** 2, (sd_m / 2) ** 2, 1e-6, 1e-8, np.radians(sd_deg) ** 2, 1e-8])
    assert widest_sd(cov) == pytest.approx((sd_m, sd_deg))
    truth = {k * 10**9: np.eye(4) for k in (1, 2, 3)}
    fixes = [(10**9, make_pose(_yaw(0.5), np.array([0.01, 0.0, 0.0]))),    # 0.2 / 0.5 sd
             (2 * 10**9, make_pose(_yaw(2.0), np.array([0.2, 0.0, 0.0]))),   # 4 / 2 sd
             (3 * 10**9, np.eye(4))]                           # no covariance published
    records = fix_records(fixes, truth, [], {10**9: cov, 2 * 10**9: cov})
    assert records[0]["sd_units_m"] == pytest.approx(0.2)
    assert records[0]["sd_units_deg"] == pytest.approx(0.5)
    assert records[1]["sd_units_m"] == pytest.approx(4.0)
    assert records[2]["sd_units_m"] is None and records[2]["published_sd_m"] is None
    units = [(r["sd_units_m"], r["sd_units_deg"]) for r in records]
    c = covariance_coverage(units)
    assert c["n"] == 2
    assert (c["within_3sd_m"], c["within_3sd_deg"]) == (0.5, 1.0)
    # Five times narrower: 0.2 sd -> 1, 0.5 -> 2.5 within; 4 and 2 -> 20 and 10 outside.
    assert (c["verifier_within_3sd_m"], c["verifier_within_3sd_deg"]) == (0.5, 0.5)
    assert c["median_m"] == pytest.approx(2.1)
    assert covariance_coverage(units[2:])["n"] == 0


def test_coverage_needs_position_and_viewing_direction():
    def cam(x, yaw):   # optical axis (z) horizontal, turned by yaw about the world z
        look = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
        return make_pose(_yaw(yaw) @ look, np.array([x, 0.0, 1.0]))

    mapped = np.stack([cam(0.0, 0.0)])
    query = np.stack([cam(0.3, 10.0), cam(0.3, 90.0), cam(2.0, 0.0)])
    assert coverage(query, mapped).tolist() == [True, False, False]
    assert coverage(query, mapped[:0]).tolist() == [False] * 3


def test_make_real_reloc_from_a_tum_folder(tmp_path):
    src = tmp_path / "seq"
    (src / "rgb").mkdir(parents=True)
    lines, gt = [], ["# timestamp tx ty tz qx qy qz qw"]
    for i in range(9):
        t = 100.0 + 0.1 * i
        img = np.full((48, 64, 3), 20 * i, np.uint8)
        cv2.imwrite(str(src / "rgb" / f"{t:.6f}.jpg"), img)
        lines.append(f"{t:.6f} rgb/{t:.6f}.jpg")
    for k in range(100):
        gt.append(f"{99.95 + 0.01 * k:.6f} {0.01 * k:.3f} 0 0 0 0 0 1")
    (src / "rgb.txt").write_text("\n".join(lines) + "\n")
    (src / "groundtruth.txt").write_text("\n".join(gt) + "\n")
    out = tmp_path / "out"
    assert make_main(["--tum-dir", str(src), "--split", "half", "--out", str(out)]) == 0
    assert TrajectoryReader(out / "map").num_frames == 4
    assert TrajectoryReader(out / "query").num_frames == 5
    sources = json.loads((out / "sources.json").read_text())
    assert sources["split"] == "half" and len(sources["input_sha256"]) == 10
    assert all(len(v) == 64 for v in sources["input_sha256"].values())
    with pytest.raises(SystemExit):
        make_main(["--tum-dir", str(tmp_path / "missing"), "--out", str(out)])


def test_make_real_reloc_from_the_cabinet_clone(tmp_path, monkeypatch):
    """cube_slam's frames (JPEG, named by index) take the stamps of its pose file's lines, one
    pose per frame 0.67 s apart (the ground truth already associated with them)."""
    import make_real_reloc as tool
    import make_real_val as real_sources

    files = cabinet_files(tool.CABINET, lambda i: (Rotation.identity(),
                                                   np.array([0.1 * i, 0.0, 1.1])))
    poses = files[tool.CABINET["ground_truth"]].decode().splitlines()
    files[f"{tool.CABINET['frames']}/notes.txt"] = b"not a frame"
    commit = _git_repo(tmp_path / "clone", files)
    for module in (tool, real_sources):
        monkeypatch.setattr(module, "CABINET", dict(tool.CABINET, commit=commit))
    out = tmp_path / "out"
    assert make_main(["--cubeslam-repo", str(tmp_path / "clone"), "--out", str(out)]) == 0
    m, q = TrajectoryReader(out / "map"), TrajectoryReader(out / "query")
    assert (m.num_frames, q.num_frames) == (3, 3)                    # interleaved
    np.testing.assert_allclose(q.world_T_cam("cam0")[:, 0, 3], [0.1, 0.3, 0.5], atol=1e-6)
    sources = json.loads((out / "sources.json").read_text())
    assert sources["dataset"]["name"].endswith("freiburg3_cabinet")
    assert len(sources["input_sha256"]) == 7
    assert all(k.startswith(f"shichaoy/cube_slam@{commit[:12]}:")
               for k in sources["input_sha256"])
    # A pose file that does not list every frame is a clear error.
    files[tool.CABINET["ground_truth"]] = ("\n".join(poses[:5]) + "\n").encode()
    commit = _git_repo(tmp_path / "clone2", files)
    for module in (tool, real_sources):
        monkeypatch.setattr(module, "CABINET", dict(tool.CABINET, commit=commit))
    assert make_main(["--cubeslam-repo", str(tmp_path / "clone2"), "--out",
                      str(tmp_path / "o2")]) == 2
    with pytest.raises(SystemExit):
        make_main(["--cubeslam-repo", str(tmp_path / "clone"), "--tum-dir", str(tmp_path),
                   "--out", str(tmp_path / "o3")])


def test_make_real_reloc_from_a_stereo_trajectory(tmp_path):
    """A dataset-format trajectory (a KITTI clip of make_real_stereo): each part keeps one
    camera, renamed cam0, with its calibration and the body poses; the set names its cover
    distance for the benchmark; a camera the rig lacks is a clear error."""
    from g2g_model.data.format import TrajectoryWriter
    from g2g_model.data.rig import CameraSpec, Rig

    K = np.array([[50.0, 0, 32], [0, 50.0, 24], [0, 0, 1]])
    right = make_pose(np.eye(3), [0.0, -0.5, 0.0])
    rig = Rig([CameraSpec("left", K, 64, 48), CameraSpec("right", K, 64, 48, right)])
    src = tmp_path / "clip"
    with TrajectoryWriter(src, rig, meta={"kitti_sequence": "06", "kitti_frames": [0, 6],
                                          "dataset_source": {"repo": "o/r", "commit": "c" * 40,
                                                             "license": "L", "path": "P"}}) as w:
        for i in range(7):
            w.add_frame(100 + 10 * i, make_pose(np.eye(3), [1.2 * i, 0, 0]),
                        {"left": np.full((48, 64, 3), i, np.uint8),
                         "right": np.full((48, 64, 3), 100 + i, np.uint8)})
    out = tmp_path / "out"
    assert make_main(["--trajectory", str(src), "--query-camera", "right",
                      "--out", str(out)]) == 0
    m, q = TrajectoryReader(out / "map"), TrajectoryReader(out / "query")
    assert m.rig.names == q.rig.names == ["cam0"]
    assert (m.num_frames, q.num_frames) == (4, 3)                    # interleaved
    np.testing.assert_allclose(q.world_T_cam("cam0")[:, 0, 3], [1.2, 3.6, 6.0])
    np.testing.assert_allclose(q.world_T_cam("cam0")[:, 1, 3], -0.5)
    assert q.image("cam0", 0)[0, 0, 0] == 101 and m.image("cam0", 1)[0, 0, 0] == 2
    sources = json.loads((out / "sources.json").read_text())
    assert sources["cover_trans_m"] == 2.0 and sources["sources"]["trajectory"]["repo"] == "o/r"
    assert sources["dataset"] == {"name": "KITTI odometry, sequence 06 frames 0-6",
                                  "license": "L"}
    assert len(sources["input_sha256"]) == 8                         # 7 images + poses.csv
    assert make_main(["--trajectory", str(src), "--map-camera", "centre",
                      "--out", str(tmp_path / "o2")]) == 2


def test_solver_evidence_on_an_exact_scene():
    """Spread, residuals and the anchor-alone solve of a recorded generalized solve whose
    inputs are exact: zero residuals, and the anchor alone lands on the group's anchor."""
    from benchmarks.verifier_evidence import _evidence_of_solve
    from g2g_model.poselib_conversions import camera_pose, pinhole_camera

    rng = np.random.default_rng(0)
    K = np.array([[300.0, 0, 160], [0, 300.0, 120], [0, 0, 1]])
    world = rng.uniform([-2, -1.5, 3], [2, 1.5, 6], (200, 3))
    b0_T_map = make_pose(_yaw(5.0), np.array([0.1, -0.05, 0.2]))
    frames = [np.eye(4), make_pose(np.eye(3), np.array([-0.3, 0.0, 0.0]))]   # cam_j_T_b0
    p2d, p3d, exts, cams = [], [], [], []
    for cam_T_b0 in frames:
        Rt = cam_T_b0 @ b0_T_map
        cam = world @ Rt[:3, :3].T + Rt[:3, 3]
        uv = cam[:, :2] / cam[:, 2:3] @ K[:2, :2].T + K[:2, 2]
        inside = (uv[:, 0] > 0) & (uv[:, 0] < 320) & (uv[:, 1] > 0) & (uv[:, 1] < 240)
        p2d.append(uv[inside])
        p3d.append(world[inside])
        exts.append(camera_pose(cam_T_b0))
        cams.append(pinhole_camera(K, (240, 320)))
    call = {"p2d": p2d, "p3d": p3d, "exts": exts, "cams": cams,
            "pose": camera_pose(b0_T_map), "inliers": [np.ones(len(p), bool) for p in p2d],
            "threshold": 4.0}
    out = _evidence_of_solve(call)
    assert out["residual_px_median"] == pytest.approx(0.0, abs=1e-6)
    assert out["frames_with_inliers"] == 2 and out["spread"] > 0.8
    assert out["anchor_m"] == pytest.approx(0.0, abs=1e-4)
    assert out["anchor_deg"] == pytest.approx(0.0, abs=1e-2)
    assert out["anchor_inliers"] == len(p2d[0])


def test_rule_table_counts_rejections():
    from benchmarks.verifier_evidence import rule_table

    records = [{"residual_px_median": 2.0, "anchor_m": 0.2, "anchor_inliers": 100,
                "inliers": 300},
               {"residual_px_median": 1.0, "anchor_m": 0.2, "anchor_inliers": 10,
                "inliers": 30}]
    table = rule_table(records, [True, False])
    assert table["residual median > 1.5 px"] == {"bad_rejected": 1, "bad": 1,
                                                 "good_kept": 1, "good": 1}
    # The anchor-alone gap counts only with enough inliers of its own
    assert table["anchor alone vs group > 0.1 m (anchor alone >= 30 inliers)"]["good_kept"] == 1
    assert table["inliers < 35"] == {"bad_rejected": 0, "bad": 1, "good_kept": 0, "good": 1}
    assert table["published position sd > 25 mm"]["bad_rejected"] == 0  # no value: not applied
