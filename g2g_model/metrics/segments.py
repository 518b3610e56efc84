"""KITTI-style long-horizon odometry errors: RTE (% of segment length) and RRE (deg per 100 m)
over segments of 100..800 m."""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, List, Sequence

import numpy as np

from g2g_model.geometry import invert_pose, rotation_angle_deg
from g2g_model.metrics.alignment import SIM3_LABEL, sim3_aligned_poses
from g2g_model.metrics.summaries import mean_or_none

logger = logging.getLogger(__name__)

KITTI_SEGMENT_LENGTHS_M = (100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0)


def trajectory_distances(poses: np.ndarray) -> np.ndarray:
    """Cumulative path length ``[T]`` (metres) of a trajectory of poses ``[T, 4, 4]``."""
    poses = np.asarray(poses, dtype=np.float64)
    steps = np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=-1)
    return np.concatenate([[0.0], np.cumsum(steps)])


@dataclasses.dataclass
class SegmentError:
    """One evaluated segment: start frame, nominal length, errors."""

    first: int
    last: int
    length_m: float
    trans_pct: float
    rot_deg_per_100m: float


def kitti_segment_errors(
    gt_poses: np.ndarray,
    pred_poses: np.ndarray,
    segment_lengths_m: Sequence[float] = KITTI_SEGMENT_LENGTHS_M,
    step_frames: int = 10,
) -> List[SegmentError]:
    """All KITTI-style segment errors.

    For every start frame (every ``step_frames``) and every length L, the segment ends at the
    first frame whose ground-truth path length from the start is at least L. The error is
    ``inv(inv(P_s) P_e) @ inv(G_s) G_e``; RTE = ``|t_err| / L * 100`` and RRE =
    ``angle(R_err) / L * 100`` (deg per 100 m). Lengths never reached give no segment.

    Args:
        gt_poses, pred_poses: ``[T, 4, 4]`` world-from-body (or camera) poses.
    """
    gt = np.asarray(gt_poses, dtype=np.float64)
    pred = np.asarray(pred_poses, dtype=np.float64)
    if gt.ndim != 3 or gt.shape[1:] != (4, 4):
        raise ValueError(f"gt_poses must have shape [T,4,4], got {gt.shape}")
    if pred.shape != gt.shape:
        raise ValueError(f"pred_poses shape {pred.shape} differs from gt_poses {gt.shape}")
    if step_frames < 1:
        raise ValueError(f"step_frames must be >= 1, got {step_frames}")
    lengths = [float(x) for x in segment_lengths_m]
    if not lengths or min(lengths) <= 0:
        raise ValueError(f"segment_lengths_m must be positive, got {segment_lengths_m}")
    dist = trajectory_distances(gt)
    out: List[SegmentError] = []
    for first in range(0, gt.shape[0], step_frames):
        for length in lengths:
            # Tolerance so that a path of exactly L (summed in floating point) counts.
            reached = np.nonzero(dist >= dist[first] + length - 1e-9 * max(length, 1.0))[0]
            if reached.size == 0:
                continue
            last = int(reached[0])
            delta_gt = invert_pose(gt[first]) @ gt[last]
            delta_pred = invert_pose(pred[first]) @ pred[last]
            err = invert_pose(delta_pred) @ delta_gt
            out.append(SegmentError(
                first=first, last=last, length_m=length,
                trans_pct=float(100.0 * np.linalg.norm(err[:3, 3]) / length),
                rot_deg_per_100m=float(100.0 * rotation_angle_deg(err[:3, :3]) / length),
            ))
    return out


def _segment_means(segs: Sequence[SegmentError]) -> Dict[str, object]:
    """Mean RTE and RRE of ``segs`` (``None`` when there are none) and their count."""
    return {
        "rte_pct": mean_or_none(np.array([s.trans_pct for s in segs])),
        "rre_deg_per_100m": mean_or_none(np.array([s.rot_deg_per_100m for s in segs])),
        "n_segments": len(segs),
    }


def kitti_odometry_errors(
    gt_poses: np.ndarray,
    pred_poses: np.ndarray,
    segment_lengths_m: Sequence[float] = KITTI_SEGMENT_LENGTHS_M,
    step_frames: int = 10,
) -> Dict[str, object]:
    """KITTI-style RTE (%) and RRE (deg / 100 m), averaged over all segments.

    A trajectory shorter than the shortest segment gives no segment: the result is flagged
    ``"empty": True`` with a ``"reason"`` and ``None`` statistics (never NaN). For short
    simulator trajectories pass shorter ``segment_lengths_m``.

    Returns:
        ``{"rte_pct", "rre_deg_per_100m", "n_segments", "empty", "reason",
        "path_length_m", "segment_lengths_m", "per_length": {L: {"rte_pct", "rre_deg_per_100m",
        "n_segments"}}}``.
    """
    segs = kitti_segment_errors(gt_poses, pred_poses, segment_lengths_m, step_frames)
    path = float(trajectory_distances(gt_poses)[-1])
    lengths = [float(x) for x in segment_lengths_m]
    per_length: Dict[float, Dict[str, object]] = {
        length: _segment_means([s for s in segs if s.length_m == length]) for length in lengths}
    result: Dict[str, object] = {
        **_segment_means(segs),
        "empty": not segs,
        "reason": "",
        "path_length_m": path,
        "segment_lengths_m": lengths,
        "per_length": per_length,
        "alignment": "none",
    }
    if not segs:
        result["reason"] = (
            f"trajectory path length {path:.1f} m is shorter than the shortest segment "
            f"{min(lengths):g} m; pass shorter segment_lengths_m"
        )
        logger.warning("KITTI odometry errors: %s", result["reason"])
    return result


def sim3_aligned_kitti_odometry_errors(
    gt_poses: np.ndarray,
    pred_poses: np.ndarray,
    segment_lengths_m: Sequence[float] = KITTI_SEGMENT_LENGTHS_M,
    step_frames: int = 10,
) -> Dict[str, object]:
    """:func:`kitti_odometry_errors` after a global Umeyama Sim(3) alignment of the predicted
    trajectory (for up-to-scale methods only); the result says ``"alignment": "sim3_aligned"``
    and gives the ``"sim3_scale"``."""
    aligned, scale = sim3_aligned_poses(pred_poses, gt_poses)
    result = kitti_odometry_errors(gt_poses, aligned, segment_lengths_m, step_frames)
    result["alignment"] = SIM3_LABEL
    result["sim3_scale"] = scale
    return result
