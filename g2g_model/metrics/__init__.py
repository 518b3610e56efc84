"""Evaluation metrics for group-to-group pose estimation (ARCHITECTURE §6). Pure numpy (scipy
for the bootstrap of paired differences).

Modules: :mod:`.errors` (per-pair errors), :mod:`.summaries` (statistics, overlap bins, group
summaries, paired differences between methods), :mod:`.alignment` (Sim(3), always labelled),
:mod:`.segments` (KITTI-style RTE/RRE), :mod:`.reports` (tables). The names below are the
public API.

Every pose is a 4x4 camera-to-anchor transform ``T_{A0<-X}`` (OpenCV axes, metres).

Per-pair errors (:func:`pose_errors`):

- rotation error: geodesic angle of ``R_hat^T R`` in degrees;
- translation error: ``||t_hat - t||`` in metres;
- RTA (relative translation angle): angle between ``t_hat`` and ``t`` in degrees. It is
  *undefined* when either vector is shorter than ``eps``; undefined pairs are excluded from every
  RTA statistic and counted separately (``rta_undefined_gt`` / ``rta_undefined_pred``), so no
  table ever shows NaN.

Failed predictions (``None`` or any non-finite entry, e.g. a baseline whose translation failed)
are never dropped: they count in ``n_failed`` and stay in every mean ("means keep the failures").
A failed pair is scored as rotation error 180 deg and RTA 180 deg (the largest possible, so it
fails every threshold and mAA) and translation error ``||t||`` (the error of answering "no
offset"; a translation error has no finite worst case).

mAA@30 and undefined RTA (decision): mAA is the mean over tau = 1..30 deg of the fraction of
pairs with ``max(rot err, RTA) < tau``, over *all* pairs. Where RTA is undefined because the
ground-truth translation is shorter than ``eps`` (e.g. a rig that did not move), the direction has
no meaning and the pair is scored on its rotation error alone. Where the ground truth is defined
but the predicted translation is shorter than ``eps`` (a method that returned no direction), the
pair counts as a failure at every threshold.

Long-horizon odometry (:func:`kitti_odometry_errors`): KITTI-style RTE (% of segment length) and
RRE (deg per 100 m) over segments of 100..800 m. Optional Sim(3) (Umeyama) alignment for
up-to-scale methods lives in functions whose names and outputs say ``sim3_aligned``.
"""

from g2g_model.metrics.alignment import SIM3_LABEL, sim3_aligned_poses, umeyama_sim3
from g2g_model.metrics.errors import (
    DEFAULT_EPS, FAILED_ANGLE_DEG, PoseErrors, pose_errors, rotation_error_deg,
    translation_angle_deg, translation_error_m,
)
from g2g_model.metrics.reports import (
    DEFAULT_TABLE_COLUMNS, flatten_group_summary, format_csv_table, format_markdown_table,
    format_value, summary_rows,
)
from g2g_model.metrics.segments import (
    KITTI_SEGMENT_LENGTHS_M, SegmentError, kitti_odometry_errors, kitti_segment_errors,
    sim3_aligned_kitti_odometry_errors, trajectory_distances,
)
from g2g_model.metrics.summaries import (
    DEFAULT_MAA_MAX_DEG, DEFAULT_OVERLAP_BINS, DEFAULT_THRESHOLDS_DEG, PAIRED_COLUMNS,
    accuracy_at, group_errors, mean_average_accuracy, mean_or_none, median_or_none,
    overlap_bin_label, paired_differences, summarize_by_overlap, summarize_errors,
    summarize_groups, summarize_pairs,
)

__all__ = [
    "DEFAULT_EPS", "DEFAULT_MAA_MAX_DEG", "DEFAULT_OVERLAP_BINS", "DEFAULT_TABLE_COLUMNS",
    "DEFAULT_THRESHOLDS_DEG", "FAILED_ANGLE_DEG", "KITTI_SEGMENT_LENGTHS_M", "PAIRED_COLUMNS",
    "PoseErrors",
    "SIM3_LABEL", "SegmentError", "accuracy_at", "flatten_group_summary", "format_csv_table",
    "format_markdown_table", "format_value", "group_errors", "kitti_odometry_errors",
    "kitti_segment_errors", "mean_average_accuracy", "mean_or_none", "median_or_none",
    "overlap_bin_label", "paired_differences", "pose_errors", "rotation_error_deg",
    "sim3_aligned_kitti_odometry_errors",
    "sim3_aligned_poses", "summarize_by_overlap", "summarize_errors", "summarize_groups",
    "summarize_pairs", "summary_rows", "trajectory_distances", "translation_angle_deg",
    "translation_error_m", "umeyama_sim3",
]
