"""`make demo`'s table and g2g-eval-bag's report agree on the same input: the demo's node rows
are the report's numbers, on constructed outputs with known errors (the replay itself is
tested in test_bag_replay.py and test_eval_bag_reloc.py)."""

import numpy as np
import pytest

pytest.importorskip("rosbags")
from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose  # noqa: E402
from g2g_model.metrics import format_value  # noqa: E402
from g2g_ros.bags import eval_bag, evaluation  # noqa: E402
from g2g_ros.bags.evaluation import GroundTruth, Outputs, evaluate_odometry  # noqa: E402
from g2g_ros.bags.player import PlayStats  # noqa: E402
from g2g_ros.bags.typestore import bag_typestore  # noqa: E402
from g2g_ros.demo_report import demo_report, demo_summaries  # noqa: E402
from test_bag_evaluation import _pose, _time  # noqa: E402  (the same message builders)

T = bag_typestore().types


def _rot(axis, deg):
    return make_pose(axis_angle_to_matrix(np.radians(deg) * np.asarray(axis, float)), [0, 0, 0])


@pytest.fixture
def replay(monkeypatch, tmp_path):
    """Ground truth, recorded outputs and a map, served to build_report as if read from bags."""
    stamps = np.arange(10, dtype=np.int64) * 10**8
    world = np.stack([make_pose(axis_angle_to_matrix([0, 0, 0.1 * i]), [0.5 * i, 0.1 * i, 0])
                      for i in range(10)])
    cam = make_pose(axis_angle_to_matrix([-np.pi / 2, 0, 0]), [0.1, 0, 0.2])
    gt = GroundTruth(stamps, world, {"cam0": cam}, {int(s): P for s, P in zip(stamps, world)},
                     {"cameras": ["cam0"]})
    # Rig odometry: every step 2 deg off about z (composed: the error of each step is 2 deg).
    odometry, pose = [], world[0]
    for i in range(10):
        if i:
            pose = pose @ invert_pose(world[i - 1]) @ world[i] @ _rot([0, 0, 1], 2.0)
        odometry.append((int(stamps[i]), pose))
    # One relocalization: G2G's B0 10 deg off, the published fix exact (a verified fix is
    # stamped at the query window's newest instant).
    map_frames = {10**12 + k: make_pose(axis_angle_to_matrix([0.05 * k, 0, 0]), [k, 1.0, 0])
                  for k in range(3)}
    sa, sb = sorted(map_frames), [int(s) for s in stamps[2:5]]
    a0_inv = invert_pose(map_frames[sa[0]])
    gt_b = [a0_inv @ world[i] @ cam for i in range(2, 5)]
    msg = T["g2g_msgs/msg/GroupAlignment"](
        header=T["std_msgs/msg/Header"](stamp=_time(sb[0]), frame_id="cam0_optical_frame@map"),
        group_a_id="a", group_b_id="b", stamps_a=[_time(s) for s in sa],
        stamps_b=[_time(s) for s in sb],
        poses_a=[_pose(a0_inv @ map_frames[s]) for s in sa],
        poses_b=[_pose(_rot([0, 1, 0], 10.0) @ gt_b[0])] + [_pose(M) for M in gt_b[1:]],
        overlap_score=0.5, inference_time_ms=12.0, path="verified", inliers=50,
        pose_source="feature matches")
    out = Outputs(odometry=odometry, reloc_poses=[(sb[-1], world[4])], alignments=[msg],
                  diagnostics={}, stage_latency_ms={})
    monkeypatch.setattr(eval_bag, "load_ground_truth", lambda bag: gt)
    monkeypatch.setattr(eval_bag, "load_outputs", lambda bag: out)
    monkeypatch.setattr(evaluation, "map_frames_by_camera_stamp",
                        lambda path: {("cam0", s): M for s, M in map_frames.items()})
    report = eval_bag.build_report(tmp_path / "in.mcap", tmp_path / "outputs", "relocalize",
                                   PlayStats(groups=10), tmp_path, map_path="map.g2gmap")
    return gt, out, report


def _summary(rot):
    return {"n": 3, "n_failed": 0, "rot_err_mean": rot, "rot_err_median": rot,
            "trans_err_mean": 0.5, "trans_err_median": 0.5, "rra@5": 0.0, "rta@15": 100.0}


def test_demo_rows_are_the_bag_evaluations_numbers(replay):
    gt, out, report = replay
    # g2g-eval's results on the written pair indexes, as evaluate_methods returns them.
    reloc = {"classical": {"b0": {"all": _summary(30.0)}},
             "identity": {"b0": {"all": _summary(40.0)}}}
    rig = {"g2g_rig_compact": {"b0": {"all": _summary(1.5)}},
           "classical": {"b0": {"all": _summary(3.0)}}, "identity": {"b0": {"all": _summary(4.0)}}}
    rows = demo_summaries(report, reloc, rig)
    node = rows["rig odometry node: G2G + verification (per keyframe step)"]
    assert node == report["rig_odometry"]["pairwise"] == evaluate_odometry(gt, out,
                                                                           "cam0")["pairwise"]
    assert node["n"] == 9 and node["rot_err_mean"] == pytest.approx(2.0, abs=1e-6)
    g2g = rows["relocalization node: G2G alone (the node's windows)"]
    assert g2g == report["relocalization"]["predicted"]["b0"]
    assert g2g["n"] == 1 and g2g["rot_err_mean"] == pytest.approx(10.0, abs=1e-4)
    fix = rows["relocalization published fix (G2G + verification)"]
    assert fix == report["relocalization"]["predicted"]["fix"]
    assert fix["rot_err_mean"] == pytest.approx(0.0, abs=1e-4)
    assert fix["trans_err_mean"] == pytest.approx(0.0, abs=1e-9)
    assert rows["rig odometry G2G alone, same steps"]["rot_err_mean"] == 1.5
    assert rows["relocalization classical, same windows"]["rot_err_mean"] == 30.0
    assert len(rows) == 8
    text = demo_report(report, reloc, rig)
    for name, row in rows.items():
        line = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        assert format_value(row["rot_err_mean"]) in line and str(row["n"]) in line, line
    assert "1 verified, 0 refined" in text


def test_demo_report_without_outputs_says_so():
    text = demo_report({"relocalization": {}}, {}, {})
    assert text.startswith("(no outputs recorded)")
