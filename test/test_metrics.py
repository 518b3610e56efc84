"""Metrics: hand-computed cases for every statistic (ARCHITECTURE §6)."""

import math

import numpy as np
import pytest

from g2g_model import metrics as M
from g2g_model.geometry import axis_angle_to_matrix, make_pose


def rot_z(deg):
    return axis_angle_to_matrix(np.array([0.0, 0.0, math.radians(deg)]))


def pose(deg=0.0, t=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)):
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return make_pose(axis_angle_to_matrix(axis * math.radians(deg)), np.asarray(t, dtype=float))


def test_rotation_error_90_deg_and_symmetry():
    assert M.rotation_error_deg(pose(90), pose(0)) == pytest.approx(90.0)
    assert M.rotation_error_deg(pose(0), pose(90)) == pytest.approx(90.0)
    # Different axes: 90 deg about x vs 90 deg about y -> relative angle 120 deg.
    a = pose(90, axis=(1, 0, 0))
    b = pose(90, axis=(0, 1, 0))
    assert M.rotation_error_deg(a, b) == pytest.approx(120.0)
    assert M.rotation_error_deg(pose(180), pose(0)) == pytest.approx(180.0)


def test_translation_error_and_rta_known_values():
    pred = pose(t=(3.0, 4.0, 0.0))
    gt = pose(t=(3.0, 0.0, 0.0))
    assert M.translation_error_m(pred, gt) == pytest.approx(4.0)
    ang, gt_undef, pred_undef = M.translation_angle_deg(pred, gt)
    assert ang == pytest.approx(math.degrees(math.atan2(4.0, 3.0)))
    assert not gt_undef and not pred_undef
    # Opposite direction -> 180 deg, scale does not matter.
    ang, _, _ = M.translation_angle_deg(np.array([-2.0, 0, 0]), np.array([5.0, 0, 0]))
    assert ang == pytest.approx(180.0)


def test_rta_zero_translation_excluded_and_counted():
    gts = np.stack([pose(t=(1, 0, 0)), pose(t=(0, 0, 0)), pose(t=(0, 1, 0)), pose(t=(1, 1, 0))])
    preds = np.stack([
        pose(t=(1, 0.0, 0)),   # RTA 0
        pose(t=(1, 0, 0)),     # GT zero length -> undefined (gt)
        pose(t=(0, 0, 0)),     # pred zero length -> undefined (pred)
        pose(t=(1, 0, 0)),     # RTA 45
    ])
    errs = M.pose_errors(preds, gts)
    assert errs.rta_undefined_gt.tolist() == [False, True, False, False]
    assert errs.rta_undefined_pred.tolist() == [False, False, True, False]
    s = M.summarize_errors(errs)
    assert s["rta_n"] == 2
    assert s["rta_undefined_gt"] == 1 and s["rta_undefined_pred"] == 1
    assert s["rta_mean"] == pytest.approx(22.5)
    assert s["rta@5"] == pytest.approx(50.0)  # over the 2 defined pairs
    assert s["rta@15"] == pytest.approx(50.0)
    for v in s.values():
        assert not (isinstance(v, float) and math.isnan(v))
    # Everything undefined -> None, printed as n/a with the count, never nan.
    s0 = M.summarize_errors(M.pose_errors(np.stack([pose()]), np.stack([pose()])))
    assert s0["rta_mean"] is None and s0["rta_n"] == 0 and s0["rta_undefined_gt"] == 1
    md = M.format_markdown_table({"x": s0})
    assert "nan" not in md.lower() and "n/a (n=0)" in md


def test_rra_percentages():
    gts = np.stack([pose()] * 4)
    preds = np.stack([pose(1), pose(4.9), pose(10), pose(20)])
    s = M.summarize_errors(M.pose_errors(preds, gts))
    assert s["rra@5"] == pytest.approx(50.0)
    assert s["rra@15"] == pytest.approx(75.0)
    assert s["rot_err_mean"] == pytest.approx((1 + 4.9 + 10 + 20) / 4)
    assert s["rot_err_median"] == pytest.approx((4.9 + 10) / 2)


def test_maa_constructed_distribution():
    # Rotation errors 0.5, 10.5, 40 deg with RTA 0 (pred translation along gt): max(r, t) = r.
    # Fraction under tau (tau = 1..30): the 0.5 pair passes all 30, the 10.5 one passes
    # tau = 11..30 (20 of 30), the 40 one none. mAA = (30 + 20 + 0) / (3 * 30).
    gts = np.stack([pose(t=(1, 0, 0))] * 3)
    preds = np.stack([pose(0.5, (2, 0, 0)), pose(10.5, (1, 0, 0)), pose(40, (1, 0, 0))])
    errs = M.pose_errors(preds, gts)
    assert M.mean_average_accuracy(errs, 30) == pytest.approx(100.0 * 50 / 90)
    # RTA dominating: rotation exact, translation 20.5 deg off -> passes tau = 21..30.
    t = (math.cos(math.radians(20.5)), math.sin(math.radians(20.5)), 0)
    errs = M.pose_errors(np.stack([pose(0, t)]), np.stack([pose(t=(1, 0, 0))]))
    assert M.mean_average_accuracy(errs, 30) == pytest.approx(100.0 * 10 / 30)


def test_maa_undefined_rta_rules():
    # GT translation zero: scored on rotation only (2.5 deg -> passes tau = 3..30: 28/30).
    errs = M.pose_errors(np.stack([pose(2.5, (1, 0, 0))]), np.stack([pose()]))
    assert M.mean_average_accuracy(errs, 30) == pytest.approx(100.0 * 28 / 30)
    # Predicted translation zero while GT is defined: failure at every threshold.
    errs = M.pose_errors(np.stack([pose(0.0)]), np.stack([pose(t=(1, 0, 0))]))
    assert M.mean_average_accuracy(errs, 30) == pytest.approx(0.0)


def test_failed_predictions_stay_in_means():
    gts = np.stack([pose(t=(3, 4, 0)), pose(t=(1, 0, 0))])
    nan_pose = pose(t=(1, 0, 0))
    nan_pose[:3, 3] = np.nan
    errs = M.pose_errors([None, nan_pose], gts)
    assert errs.failed.tolist() == [True, True]
    s = M.summarize_errors(errs)
    assert s["n_failed"] == 2 and s["n"] == 2
    assert s["rot_err_mean"] == pytest.approx(180.0)
    assert s["trans_err_mean"] == pytest.approx((5.0 + 1.0) / 2)
    assert s["rra@15"] == 0.0 and s["maa@30"] == 0.0


def test_overlap_bins_and_tables():
    gts = np.stack([pose(t=(1, 0, 0))] * 4)
    preds = np.stack([pose(1, (1, 0, 0)), pose(3, (1, 0, 0)), pose(7, (1, 0, 0)),
                      pose(9, (1, 0, 0))])
    out = M.summarize_pairs(preds, gts, overlaps=[0.15, 0.35, 1.0, 0.05])
    assert out["all"]["n"] == 4
    bins = out["bins"]
    assert list(bins) == ["[0.1,0.3)", "[0.3,0.5)", "[0.5,1]"]
    assert bins["[0.1,0.3)"]["rot_err_mean"] == pytest.approx(1.0)
    assert bins["[0.3,0.5)"]["rot_err_mean"] == pytest.approx(3.0)
    assert bins["[0.5,1]"]["rot_err_mean"] == pytest.approx(7.0)  # 1.0 falls in the closed bin
    assert out["n_unbinned"] == 1
    rows = M.flatten_group_summary(out)
    md = M.format_markdown_table(rows)
    csv_text = M.format_csv_table(rows)
    assert md.count("\n") == 2 + 4
    assert csv_text.splitlines()[0].startswith("set,n,n_failed")
    assert "nan" not in (md + csv_text).lower()
    with pytest.raises(ValueError, match="overlaps"):
        M.summarize_pairs(preds, gts, overlaps=[0.1, 0.2])


def test_group_errors_b0_b_all_a_all():
    gt_a = np.stack([pose(), pose(t=(1, 0, 0)), pose(t=(2, 0, 0))])
    gt_b = np.stack([pose(10, (0, 0, 3)), pose(10, (1, 0, 3))])
    pred_a = gt_a.copy()
    pred_a[2] = pose(4, (2, 0, 0))
    pred_b = gt_b.copy()
    pred_b[1, :3, 3] += [0, 0.5, 0]
    errs = M.group_errors(pred_a, pred_b, gt_a, gt_b)
    assert len(errs["b0"]) == 1 and len(errs["b_all"]) == 2 and len(errs["a_all"]) == 2
    assert errs["b0"].trans_m[0] == pytest.approx(0.0)
    assert errs["b_all"].trans_m.tolist() == pytest.approx([0.0, 0.5])
    assert errs["a_all"].rot_deg.tolist() == pytest.approx([0.0, 4.0])
    # pred_a without A0 gives the same result.
    errs2 = M.group_errors(pred_a[1:], pred_b, gt_a, gt_b)
    np.testing.assert_allclose(errs2["a_all"].rot_deg, errs["a_all"].rot_deg)
    summ = M.summarize_groups([(pred_a, pred_b, gt_a, gt_b), (None, None, gt_a, gt_b)],
                              overlaps=[0.4, 0.8])
    assert summ["alignment"] == "none"
    assert summ["b0"]["all"]["n"] == 2 and summ["b0"]["all"]["n_failed"] == 1
    assert summ["b_all"]["bins"]["[0.3,0.5)"]["n"] == 2
    assert summ["a_all"]["all"]["n"] == 4
    table = M.format_markdown_table(M.flatten_group_summary(summ))
    assert "b0 [0.5,1]" in table and "nan" not in table.lower()


def test_sim3_alignment_recovers_scale_and_is_labelled():
    rng = np.random.default_rng(0)
    gt_a = np.stack([pose()] + [pose(rng.normal() * 5, rng.normal(size=3)) for _ in range(3)])
    gt_b = np.stack([pose(rng.normal() * 5, rng.normal(size=3)) for _ in range(4)])
    # Up-to-scale prediction: all translations divided by 3.
    pred_a, pred_b = gt_a.copy(), gt_b.copy()
    pred_a[:, :3, 3] /= 3.0
    pred_b[:, :3, 3] /= 3.0
    plain = M.summarize_groups([(pred_a, pred_b, gt_a, gt_b)])
    aligned = M.summarize_groups([(pred_a, pred_b, gt_a, gt_b)], sim3_aligned=True)
    assert plain["b_all"]["all"]["trans_err_mean"] > 0.1
    assert aligned["alignment"] == "sim3_aligned"
    assert aligned["b_all"]["all"]["trans_err_mean"] == pytest.approx(0.0, abs=1e-9)
    assert aligned["b_all"]["all"]["rot_err_mean"] == pytest.approx(0.0, abs=1e-5)
    assert all("sim3_aligned" in k for k in M.flatten_group_summary(aligned))
    _, scale = M.sim3_aligned_poses(np.concatenate([pred_a, pred_b]),
                                    np.concatenate([gt_a, gt_b]))
    assert scale == pytest.approx(3.0)
    with pytest.raises(ValueError, match="collinear"):
        line = np.stack([pose(t=(k, 0, 0)) for k in range(4)])
        M.umeyama_sim3(line[:, :3, 3], line[:, :3, 3])


def _straight_line(n, step):
    return np.stack([pose(t=(0, 0, k * step)) for k in range(n)])


def test_kitti_rte_scale_drift_two_percent():
    gt = _straight_line(1001, 1.0)  # 1000 m along z
    pred = gt.copy()
    pred[:, :3, 3] *= 1.02  # 2 % scale drift
    res = M.kitti_odometry_errors(gt, pred)
    assert not res["empty"]
    assert res["rte_pct"] == pytest.approx(2.0, abs=1e-9)
    assert res["rre_deg_per_100m"] == pytest.approx(0.0, abs=1e-9)
    assert res["per_length"][800.0]["n_segments"] == len(range(0, 201, 10))
    assert res["segment_lengths_m"] == list(M.KITTI_SEGMENT_LENGTHS_M)


def test_kitti_rre_constant_heading_drift():
    # Predicted path turns by 1 deg every 10 m about the travel axis (z): rotation error of a
    # segment of L metres is L/10 deg -> RRE = 10 deg / 100 m, no translation error.
    n = 301
    gt = _straight_line(n, 1.0)
    pred = gt.copy()
    for k in range(n):
        pred[k, :3, :3] = rot_z(0.1 * k)
    res = M.kitti_odometry_errors(gt, pred, segment_lengths_m=(100, 200))
    assert res["rre_deg_per_100m"] == pytest.approx(10.0, abs=1e-6)
    assert res["rte_pct"] == pytest.approx(0.0, abs=1e-9)


def test_kitti_short_trajectory_flagged_and_custom_lengths():
    gt = _straight_line(51, 1.0)  # 50 m
    pred = gt.copy()
    pred[:, :3, 3] *= 1.05
    res = M.kitti_odometry_errors(gt, pred)
    assert res["empty"] and res["n_segments"] == 0
    assert res["rte_pct"] is None and "shorter than the shortest segment" in res["reason"]
    res = M.kitti_odometry_errors(gt, pred, segment_lengths_m=(10, 20), step_frames=5)
    assert not res["empty"] and res["rte_pct"] == pytest.approx(5.0)
    with pytest.raises(ValueError, match="segment_lengths_m"):
        M.kitti_odometry_errors(gt, pred, segment_lengths_m=(0,))
    with pytest.raises(ValueError, match="shape"):
        M.kitti_odometry_errors(gt, pred[:10])


def test_sim3_aligned_kitti_removes_global_scale():
    gt = np.stack([pose(t=(np.sin(k / 20.0) * 10, 0, k * 1.0)) for k in range(201)])
    pred = gt.copy()
    pred[:, :3, 3] *= 0.5
    raw = M.kitti_odometry_errors(gt, pred, segment_lengths_m=(50, 100))
    aligned = M.sim3_aligned_kitti_odometry_errors(gt, pred, segment_lengths_m=(50, 100))
    assert raw["alignment"] == "none" and aligned["alignment"] == "sim3_aligned"
    assert raw["rte_pct"] > 40.0
    assert aligned["rte_pct"] == pytest.approx(0.0, abs=1e-6)
    assert aligned["sim3_scale"] == pytest.approx(2.0)


def test_format_value_never_nan():
    assert M.format_value(float("nan")) == "n/a"
    assert M.format_value(None, 0) == "n/a (n=0)"
    assert M.format_value(1.23456, digits=2) == "1.23"
    assert M.format_value(7) == "7"


def test_paired_differences_count_pairs_and_bound_the_mean():
    from g2g_model.metrics.summaries import paired_differences

    rng = np.random.default_rng(1)
    ref = (rng.uniform(0, 3, 200), rng.uniform(0, 0.1, 200))
    shifted = (ref[0] + 1.0 + rng.normal(0, 0.1, 200), ref[1] - 0.05)  # worse R, better t
    one_pair = (ref[0].copy(), ref[1].copy())
    one_pair[0][7] += 30.0                                          # one pair moves the mean
    errors = {"ref": ref, "shifted": shifted, "one": one_pair, "same": ref}
    out = paired_differences(errors, [(k, "ref") for k in ("shifted", "one", "same")])
    out = {k.split(" vs ")[0]: v for k, v in out.items()}
    assert set(out) == {"shifted", "one", "same"}
    s = out["shifted"]
    assert s["n"] == 200 and s["rot_worse"] == 200 and s["rot_better"] == 0
    assert 0.95 < s["rot_diff_ci_low"] < 1.0 < s["rot_diff_ci_high"] < 1.05
    assert s["trans_better"] == 200 and s["trans_diff_mean"] == pytest.approx(-0.05)
    o = out["one"]
    assert o["rot_worse"] == 1 and o["rot_diff_mean"] == pytest.approx(0.15)
    assert o["rot_diff_ci_low"] < 0.05 and o["rot_diff_ci_high"] > 0.3  # wide: one pair
    assert out["same"]["rot_diff_ci_low"] == out["same"]["rot_diff_ci_high"] == 0.0
    with pytest.raises(ValueError, match="not among"):
        paired_differences({"a": ref}, [("a", "b")])
    with pytest.raises(ValueError, match="errors"):
        paired_differences({"ref": ref, "short": (ref[0][:5], ref[1][:5])}, [("short", "ref")])


def test_paired_ratio_interval_holds_the_ratio_and_narrows_with_pairs():
    from g2g_model.metrics.summaries import paired_ratio

    rng = np.random.default_rng(5)
    base = rng.gamma(2.0, 0.1, 400)
    worse = base * 1.3  # every pair 30 % worse: the ratio is exact, the interval a point
    assert paired_ratio(worse, base) == pytest.approx((1.3, 1.3, 1.3))
    noisy = base * rng.uniform(0.8, 1.8, base.shape)  # 30 % worse in the mean, noisily
    ratio, low, high = paired_ratio(noisy, base, np.mean)
    assert low < ratio < high and low < 1.3 < high and high - low < 0.15
    few = paired_ratio(noisy[:12], base[:12], np.mean)
    assert few[2] - few[1] > high - low  # fewer pairs: a wider interval
    with pytest.raises(ValueError, match="one length"):
        paired_ratio(noisy[:3], base[:4])
