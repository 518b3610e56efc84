"""Relocalization and latency metrics of g2g_ros.bags.evaluation on constructed outputs with
known errors (the end-to-end replay with a real node is in test_bag_replay.py)."""

import numpy as np
import pytest

pytest.importorskip("rosbags")
from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose  # noqa: E402
from g2g_ros.bags.evaluation import (  # noqa: E402
    GroundTruth, Outputs, alignment_pairs, corrected_trajectory, evaluate_latency,
    evaluate_relocalization, fix_corrections, odometry_pairs,
)
from g2g_ros.bags.alignment_fields import fix_stamp, pose_source_kind  # noqa: E402
from g2g_ros.bags.report import markdown  # noqa: E402
from g2g_ros.bags.typestore import bag_typestore  # noqa: E402
from g2g_ros.conversions import matrix_to_pose, to_stamp  # noqa: E402

STORE = bag_typestore()
T = STORE.types


def _time(ns):
    return to_stamp(ns, T["builtin_interfaces/msg/Time"])


def _pose(M):
    return matrix_to_pose(M, T["geometry_msgs/msg/Pose"](
        position=T["geometry_msgs/msg/Point"](x=0.0, y=0.0, z=0.0),
        orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)))


@pytest.fixture
def gt():
    stamps = np.arange(10, dtype=np.int64) * 10**8
    poses = np.stack([make_pose(axis_angle_to_matrix([0, 0, 0.1 * i]), [0.5 * i, 0.1 * i, 0])
                      for i in range(10)])
    cam = make_pose(axis_angle_to_matrix([-np.pi / 2, 0, 0]), [0.1, 0, 0.2])
    offset = make_pose(axis_angle_to_matrix([0, 0, 0.3]), [2.0, -1.0, 0.0])
    odom = {int(s): offset @ P for s, P in zip(stamps, poses)}   # map_T_odom = inv(offset)
    return GroundTruth(stamps, poses, {"cam0": cam}, odom), invert_pose(offset)


def test_relocalization_metrics_on_known_errors(gt):
    truth, map_T_odom = gt
    shift = make_pose(np.eye(3), [1.0, 0, 0])
    out = Outputs(
        odometry=[], alignments=[],
        reloc_poses=[(int(truth.stamps[4]), truth.world_T_base[4]),
                     (int(truth.stamps[8]), shift @ truth.world_T_base[8])],
        diagnostics={"relocalize: relocalization": {"accepted_corrections": "2",
                                                    "rejected_corrections": "2"}},
        stage_latency_ms={})
    rel = evaluate_relocalization(truth, out, truth.odom_input)
    assert (rel["attempts"], rel["accepted"], rel["correct_fixes"]) == (4, 2, 1)
    assert rel["success_rate_pct"] == pytest.approx(25.0)
    assert rel["fix_error_trans_m"]["mean"] == pytest.approx(0.5)
    assert rel["fix_error_trans_m"]["max"] == pytest.approx(1.0)
    assert rel["fix_error_rot_deg"]["max"] == pytest.approx(0.0, abs=1e-6)
    # Corrected trajectory: frames 4..9; 4..7 exact, 8..9 off by the 1 m shift.
    assert rel["corrected_frames"] == 6
    assert rel["corrected_error_trans_m"]["mean"] == pytest.approx(2.0 / 6)
    report = {"graph": "relocalize", "bag": "b", "outputs_bag": "o",
              "replay": {"mode": "paced", "groups": 10, "wait_timeouts": 0},
              "relocalization": rel, "latency": evaluate_latency(out, [])}
    assert "nan" not in markdown(report).lower()
    assert rel["published_covariance"]["n"] == 0   # no covariance recorded: no line
    assert "Published covariance" not in markdown(report)


def test_fixes_are_scored_in_their_published_standard_deviations(gt):
    """The report expresses each fix's errors in the covariance published with it (widest
    axis) and counts those within 3 sd, published and of the verifier's own (5x narrower)."""
    truth, _ = gt
    sd_m, sd_deg = 0.1, 1.0
    cov = np.diag([sd_m ** 2, 1e-4, 1e-4, 1e-6, 1e-6, np.radians(sd_deg) ** 2])
    stamps = [int(s) for s in truth.stamps[2:5]]
    off = [make_pose(axis_angle_to_matrix([0, 0, np.radians(d)]), [x, 0, 0])
           for x, d in ((0.02, 0.5), (0.5, 2.0), (0.0, 0.0))]
    out = Outputs(odometry=[], alignments=[], diagnostics={}, stage_latency_ms={},
                  reloc_poses=[(s, truth.at(s) @ o) for s, o in zip(stamps, off)],
                  reloc_covariances={stamps[0]: cov, stamps[1]: cov})   # none for the third
    c = evaluate_relocalization(truth, out, truth.odom_input)["published_covariance"]
    assert c["n"] == 2
    assert c["median_m"] == pytest.approx((0.2 + 5.0) / 2)
    assert (c["within_3sd_m"], c["within_3sd_deg"]) == (0.5, 1.0)
    assert (c["verifier_within_3sd_m"], c["verifier_within_3sd_deg"]) == (0.5, 0.5)
    report = {"graph": "relocalize", "bag": "b", "outputs_bag": "o",
              "replay": {"mode": "paced", "groups": 3, "wait_timeouts": 0},
              "relocalization": evaluate_relocalization(truth, out, truth.odom_input),
              "latency": evaluate_latency(out, [])}
    assert "Published covariance: 2 fixes" in markdown(report)


def test_stage_runs_count_each_run_once():
    from g2g_ros.bags.stage_runs import all_stage_runs, stage_runs

    nan = float("nan")
    samples = [{"verify": nan, "total": nan}, {"verify": 800.0, "total": 900.0},
               {"verify": 800.0, "total": 900.0, "convert": 3.0},
               {"verify": 200.0, "total": 300.0}, {"total": 300.0}]
    t = stage_runs(samples, "verify")
    assert t["n"] == 2 and t["median_ms"] == pytest.approx(500.0) and t["max_ms"] == 800.0
    assert stage_runs(samples, "select") == {"n": 0}
    assert list(all_stage_runs(samples)) == ["verify", "total", "convert"]
    assert all_stage_runs(samples)["convert"]["n"] == 1


def _alignment(stamps_b):
    return T["g2g_msgs/msg/GroupAlignment"](
        header=T["std_msgs/msg/Header"](stamp=_time(stamps_b[0]),
                                        frame_id="cam0_optical_frame@map"),
        group_a_id="a", group_b_id="b", stamps_a=[], stamps_b=[_time(s) for s in stamps_b],
        poses_a=[], poses_b=[], overlap_score=float("nan"), inference_time_ms=1.0, path="g2g",
        inliers=0, pose_source="")


def test_correction_counts_from_the_query_newest_frame(gt):
    # The fix at B0 = frame 2 was computed on the query frames 2..5: the corrected trajectory
    # starts at frame 5, with the correction recovered from the fix and the odometry input.
    truth, map_T_odom = gt
    out = Outputs(odometry=[], reloc_poses=[(int(truth.stamps[2]), truth.world_T_base[2])],
                  alignments=[_alignment([int(s) for s in truth.stamps[2:6]])],
                  diagnostics={}, stage_latency_ms={})
    (start, corr), = fix_corrections(out, truth.odom_input)
    assert start == int(truth.stamps[5])
    np.testing.assert_allclose(corr, map_T_odom, atol=1e-9)
    stamps, poses = corrected_trajectory(truth, out, truth.odom_input)
    assert list(stamps) == [int(s) for s in truth.stamps[5:]]
    np.testing.assert_allclose(poses, truth.world_T_base[5:], atol=1e-9)


def test_fix_between_odometry_samples_is_interpolated(gt):
    truth, map_T_odom = gt
    odom = {s: P for s, P in truth.odom_input.items() if s != int(truth.stamps[3])}
    out = Outputs(odometry=[], reloc_poses=[(int(truth.stamps[3]), truth.world_T_base[3]),
                                            (-5, truth.world_T_base[0])],  # before the odometry
                  alignments=[], diagnostics={}, stage_latency_ms={})
    (start, corr), = fix_corrections(out, odom)
    assert start == int(truth.stamps[3])
    # Constant turn rate and speed: interpolating the odometry at frame 3 is exact.
    np.testing.assert_allclose(corr, map_T_odom, atol=1e-9)


def test_alignment_pairs_against_map_and_ground_truth(gt):
    truth, _ = gt
    Tbc = truth.base_T_cam["cam0"]
    map_frames = {10**12 + k: make_pose(axis_angle_to_matrix([0.05 * k, 0, 0]), [k, 1.0, 0])
                  for k in range(3)}
    sa, sb = sorted(map_frames), [int(s) for s in truth.stamps[2:5]]
    a0_inv = invert_pose(map_frames[sa[0]])
    gt_b = [a0_inv @ truth.world_T_base[i] @ Tbc for i in range(2, 5)]
    gt_a = [a0_inv @ map_frames[s] for s in sa]
    bad = make_pose(axis_angle_to_matrix([0, np.radians(10), 0]), [0, 0, 0]) @ gt_b[0]
    msg = T["g2g_msgs/msg/GroupAlignment"](
        header=T["std_msgs/msg/Header"](stamp=_time(sb[0]), frame_id="cam0_optical_frame@map"),
        group_a_id="a", group_b_id="b", stamps_a=[_time(s) for s in sa],
        stamps_b=[_time(s) for s in sb], poses_a=[_pose(M) for M in gt_a],
        poses_b=[_pose(bad)] + [_pose(M) for M in gt_b[1:]], overlap_score=float("nan"),
        inference_time_ms=12.0, path="g2g", inliers=0, pose_source="feature matches")
    pairs = alignment_pairs(truth, [msg], {("cam0", s): T for s, T in map_frames.items()},
                            "cam0")
    assert [len(pairs[k][0]) for k in ("b0", "b_all", "a_all")] == [1, 3, 2]
    np.testing.assert_allclose(pairs["b0"][1][0], gt_b[0], atol=1e-9)
    from g2g_model.metrics import pose_errors

    err = pose_errors(np.stack(pairs["b_all"][0]), np.stack(pairs["b_all"][1]))
    np.testing.assert_allclose(err.rot_deg, [10.0, 0, 0], atol=1e-4)
    lat = evaluate_latency(Outputs([], [], [msg], {}, {}), [0.1, 0.3])
    assert lat["reloc_inference_ms"]["mean"] == pytest.approx(12.0)
    assert lat["replay_wait_ms"]["mean"] == pytest.approx(200.0)


def test_odometry_pairs_skip_stamps_without_ground_truth(gt):
    truth, _ = gt
    odo = [(int(s), truth.world_T_base[i]) for i, s in enumerate(truth.stamps[:4])]
    odo.insert(2, (123, np.eye(4)))  # no ground truth at this stamp: its pairs are dropped
    stamps, preds, gts = odometry_pairs(truth, odo, "cam0")
    assert stamps == [(int(truth.stamps[0]), int(truth.stamps[1])),
                      (int(truth.stamps[2]), int(truth.stamps[3]))]
    np.testing.assert_allclose(preds, gts, atol=1e-9)


def test_bags_recorded_before_pose_source_still_read(tmp_path, gt):
    """GroupAlignment gained a trailing ``pose_source``; a bag recorded with the earlier
    definition carries that definition and still loads (the reader uses the bag's own)."""
    import shutil

    from rosbags.rosbag2 import StoragePlugin, Writer

    from g2g_ros.bags.evaluation import fixes_by, load_outputs
    from g2g_ros.bags.typestore import MSGS_DIR, bag_qos

    old_msgs = tmp_path / "msg"
    shutil.copytree(MSGS_DIR, old_msgs)
    text = (old_msgs / "GroupAlignment.msg").read_text()
    assert "string pose_source" in text
    (old_msgs / "GroupAlignment.msg").write_text(
        "\n".join(line for line in text.splitlines() if "pose_source" not in line) + "\n")
    old = bag_typestore(old_msgs)
    fields = [f[0] for f in old.fielddefs["g2g_msgs/msg/GroupAlignment"][1]]
    assert "inliers" in fields and "pose_source" not in fields
    truth, _ = gt
    stamps = [int(s) for s in truth.stamps[2:6]]
    ot = old.types
    time_type = ot["builtin_interfaces/msg/Time"]
    msg = ot["g2g_msgs/msg/GroupAlignment"](
        header=ot["std_msgs/msg/Header"](stamp=to_stamp(stamps[0], time_type),
                                         frame_id="cam0_optical_frame@map"),
        group_a_id="a", group_b_id="b", stamps_a=[],
        stamps_b=[to_stamp(s, time_type) for s in stamps], poses_a=[],
        poses_b=[], overlap_score=0.5, inference_time_ms=3.0, path="verified", inliers=40)
    bag = tmp_path / "old_outputs"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("relocalize/alignment", "g2g_msgs/msg/GroupAlignment",
                                typestore=old, offered_qos_profiles=[bag_qos()])
        w.write(conn, stamps[0], old.serialize_cdr(msg, "g2g_msgs/msg/GroupAlignment"))
    aligns = load_outputs(bag).alignments
    assert len(aligns) == 1 and aligns[0].path == "verified" and aligns[0].inliers == 40
    assert [s.sec * 10**9 + s.nanosec for s in aligns[0].stamps_b] == stamps
    assert not hasattr(aligns[0], "pose_source")
    # The report's count by pose source files such fixes under "not recorded".
    # A verified fix is stamped at the query window's newest instant (fix_stamp).
    rows = fixes_by(aligns, pose_source_kind, {stamps[-1]: 0.7}, {stamps[-1]: 1.0}, 0.5, 5.0)
    assert rows == {"not recorded": {"fixes": 1, "with_gt": 1, "false_accepts": 1,
                                     "median_trans_m": 0.7, "median_rot_deg": 1.0}}


def test_pose_source_kind_drops_counts_and_reasons():
    from types import SimpleNamespace

    from g2g_model.localization.relocalizer import pose_source

    def kind(match):
        return pose_source_kind(SimpleNamespace(pose_source=pose_source(match)))

    plain = SimpleNamespace(rotation=np.eye(3), parallax=False, inliers=30, matches=50)
    assert kind(plain) == "feature matches"
    assert kind(SimpleNamespace(**{**vars(plain), "parallax": True})) == \
        "feature matches solved with parallax"
    assert kind(SimpleNamespace(rotation=None, reason="too few matches")) == "G2G"
    assert kind(None) == "G2G"
    assert pose_source_kind(SimpleNamespace(pose_source="")) == "not recorded"


def test_a_fix_is_paired_with_its_alignment_at_the_instant_it_holds():
    """A geometric fix is stamped at its query window's newest instant, G2G alone at B0 (the
    alignment's header); a bag recorded without paths counts as G2G alone."""
    from types import SimpleNamespace

    def align(path, stamps):
        return SimpleNamespace(header=SimpleNamespace(stamp=to_stamp(stamps[0])), path=path,
                               stamps_b=[to_stamp(s) for s in stamps])

    stamps = [3 * 10**9, 3 * 10**9 + 10**8, 3 * 10**9 + 2 * 10**8]
    assert fix_stamp(align("verified", stamps)) == stamps[-1]
    assert fix_stamp(align("refined", stamps)) == stamps[-1]
    assert fix_stamp(align("g2g", stamps)) == stamps[0]
    assert fix_stamp(align("", stamps)) == stamps[0]


def test_published_covariance_and_stage_samples_are_read(tmp_path):
    """load_outputs keeps relocalize/pose's covariance per stamp and the status topic's stage
    latencies once per change (a node repeats its last values between localizations)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from g2g_ros.bags.evaluation import load_outputs
    from g2g_ros.bags.typestore import bag_qos

    pose_type, status_type = ("geometry_msgs/msg/PoseWithCovarianceStamped",
                              "g2g_msgs/msg/EstimatorStatus")
    cov = np.diag([4e-4, 1e-4, 1e-4, 1e-5, 1e-5, 3e-4])
    cov[0, 1] = cov[1, 0] = 5e-5
    bag = tmp_path / "outputs"
    latencies = [[np.nan, np.nan], [2.0, 800.0], [2.5, 800.0], [2.5, 800.0], [2.5, 650.0]]
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("relocalize/pose", pose_type, typestore=STORE,
                                offered_qos_profiles=[bag_qos()])
        msg = T[pose_type](
            header=T["std_msgs/msg/Header"](stamp=_time(10**9), frame_id="map"),
            pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=_pose(np.eye(4)),
                                                           covariance=cov.reshape(36)))
        w.write(conn, 10**9, STORE.serialize_cdr(msg, pose_type))
        conn = w.add_connection("relocalize/status", status_type, typestore=STORE,
                                offered_qos_profiles=[bag_qos()])
        for k, values in enumerate(latencies):
            msg = T[status_type](
                header=T["std_msgs/msg/Header"](stamp=_time(k * 10**9), frame_id=""),
                state=0, message="", cameras_used=["cam0"], groups_processed=k,
                groups_dropped=0, stage_names=["convert", "verify"],
                stage_latency_ms=np.array(values, np.float32))
            w.write(conn, k * 10**9, STORE.serialize_cdr(msg, status_type))
    out = load_outputs(bag)
    runs = evaluate_latency(out, [])["node_stage_runs_ms"]["relocalize/status"]
    assert runs["verify"]["n"] == 2 and runs["verify"]["max_ms"] == 800.0
    report = {"graph": "relocalize", "bag": "b", "outputs_bag": "o",
              "replay": {"mode": "paced", "groups": 5, "wait_timeouts": 0},
              "latency": evaluate_latency(out, [])}
    assert "| verify | 2 | 725.0 | 785.0 | 800.0 |" in markdown(report)
    assert list(out.reloc_covariances) == [10**9]
    np.testing.assert_allclose(out.reloc_covariances[10**9], cov)
    samples = out.stage_samples["relocalize/status"]
    assert [s["convert"] for s in samples][1:] == [2.0, 2.5, 2.5]
    assert [s["verify"] for s in samples][1:] == [800.0, 800.0, 650.0]
    assert np.isnan(samples[0]["verify"]) and len(samples) == 4
