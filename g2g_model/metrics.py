"""Evaluation metrics for group-to-group pose estimation (ARCHITECTURE §6). Pure numpy.

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

from __future__ import annotations

import dataclasses
import csv
import io
import logging
import math
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import invert_pose, rotation_angle_deg

logger = logging.getLogger(__name__)

# Translations shorter than 1 mm have no usable direction (a parked robot's odometry jitter).
DEFAULT_EPS = 1e-3
DEFAULT_THRESHOLDS_DEG = (5.0, 15.0)
DEFAULT_MAA_MAX_DEG = 30
# Half-open [lo, hi) bins on the window overlap score; the last bin is closed at 1.0.
DEFAULT_OVERLAP_BINS: Tuple[Tuple[float, float], ...] = ((0.1, 0.3), (0.3, 0.5), (0.5, 1.0))
KITTI_SEGMENT_LENGTHS_M = (100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0)
FAILED_ANGLE_DEG = 180.0
SIM3_LABEL = "sim3_aligned"


# --------------------------------------------------------------------------------------------
# Per-pair errors
# --------------------------------------------------------------------------------------------
def rotation_error_deg(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Geodesic angle between rotations, degrees.

    Args:
        pred, gt: poses ``[..., 4, 4]`` or rotations ``[..., 3, 3]`` (broadcastable).
    Returns:
        ``[...]`` angle of ``R_hat^T R`` in [0, 180].
    """
    r_hat = np.asarray(pred, dtype=np.float64)[..., :3, :3]
    r = np.asarray(gt, dtype=np.float64)[..., :3, :3]
    return rotation_angle_deg(np.swapaxes(r_hat, -1, -2) @ r)


def translation_error_m(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Euclidean distance between translations ``[..., 4, 4]`` poses or ``[..., 3]`` vectors."""
    return np.linalg.norm(_translation(pred) - _translation(gt), axis=-1)


def translation_angle_deg(
    pred: np.ndarray, gt: np.ndarray, eps: float = DEFAULT_EPS
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RTA: angle between predicted and true translation directions.

    Args:
        pred, gt: poses ``[..., 4, 4]`` or translations ``[..., 3]``.
        eps: a vector shorter than this has no direction.
    Returns:
        ``(angle_deg, gt_undefined, pred_undefined)``, each ``[...]``. ``angle_deg`` is 0 where
        either flag is set; callers must use the flags (it is a placeholder, not a measurement).
    """
    t_hat = _translation(pred)
    t = _translation(gt)
    n_hat = np.linalg.norm(t_hat, axis=-1)
    n = np.linalg.norm(t, axis=-1)
    gt_undef = n < eps
    pred_undef = (n_hat < eps) & ~gt_undef
    ok = ~(gt_undef | pred_undef)
    denom = np.where(ok, n_hat * n, 1.0)
    cos = np.einsum("...i,...i->...", t_hat, t) / denom
    angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    return np.where(ok, angle, 0.0), gt_undef, pred_undef


@dataclasses.dataclass
class PoseErrors:
    """Per-pair errors of ``N`` pairs, all arrays ``[N]``.

    ``rta_deg`` is meaningful only where ``rta_defined``; ``failed`` marks missing / non-finite
    predictions (already scored with the failure values described in the module docstring).
    """

    rot_deg: np.ndarray
    trans_m: np.ndarray
    rta_deg: np.ndarray
    rta_undefined_gt: np.ndarray
    rta_undefined_pred: np.ndarray
    failed: np.ndarray

    @property
    def rta_defined(self) -> np.ndarray:
        return ~(self.rta_undefined_gt | self.rta_undefined_pred)

    def __len__(self) -> int:
        return int(self.rot_deg.shape[0])

    @staticmethod
    def concatenate(parts: Sequence["PoseErrors"]) -> "PoseErrors":
        if not parts:
            return PoseErrors.empty()
        fields = [f.name for f in dataclasses.fields(PoseErrors)]
        return PoseErrors(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in fields})

    @staticmethod
    def empty() -> "PoseErrors":
        f = np.zeros(0)
        b = np.zeros(0, dtype=bool)
        return PoseErrors(f, f.copy(), f.copy(), b, b.copy(), b.copy())

    def subset(self, mask: np.ndarray) -> "PoseErrors":
        fields = [f.name for f in dataclasses.fields(PoseErrors)]
        return PoseErrors(**{k: getattr(self, k)[mask] for k in fields})


def pose_errors(
    preds: Sequence[Optional[np.ndarray]] | np.ndarray,
    gts: Sequence[np.ndarray] | np.ndarray,
    eps: float = DEFAULT_EPS,
) -> PoseErrors:
    """Errors of ``N`` predicted poses against ground truth.

    Args:
        preds: ``[N, 4, 4]`` array, or a length-N sequence whose entries are ``[4, 4]`` or
            ``None`` (failed). Non-finite entries also mark a failure.
        gts: ``[N, 4, 4]`` ground truth ``T_{A0<-X}``.
        eps: RTA undefined threshold (metres).
    Returns:
        :class:`PoseErrors` with ``N`` entries.
    """
    gts = np.asarray(gts, dtype=np.float64)
    if gts.ndim != 3 or gts.shape[1:] != (4, 4):
        raise ValueError(f"gts must have shape [N,4,4], got {gts.shape}")
    n = gts.shape[0]
    if len(preds) != n:
        raise ValueError(f"preds has {len(preds)} entries but gts has {n}")
    pred_arr = np.tile(np.eye(4), (n, 1, 1))
    failed = np.zeros(n, dtype=bool)
    for k in range(n):
        p = preds[k]
        if p is None:
            failed[k] = True
            continue
        p = np.asarray(p, dtype=np.float64)
        if p.shape != (4, 4):
            raise ValueError(f"preds[{k}] must have shape [4,4], got {p.shape}")
        if not np.all(np.isfinite(p)):
            failed[k] = True
            continue
        pred_arr[k] = p
    rot = rotation_error_deg(pred_arr, gts)
    trans = translation_error_m(pred_arr, gts)
    rta, gt_undef, pred_undef = translation_angle_deg(pred_arr, gts, eps)
    # Failure scoring (module docstring): worst angles; identity translation -> error ||t||.
    rot[failed] = FAILED_ANGLE_DEG
    trans[failed] = np.linalg.norm(gts[failed, :3, 3], axis=-1)
    rta[failed] = FAILED_ANGLE_DEG
    pred_undef = pred_undef & ~failed
    gt_undef = gt_undef & ~failed
    return PoseErrors(rot, trans, rta, gt_undef, pred_undef, failed)


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------
def accuracy_at(values: np.ndarray, threshold: float) -> Optional[float]:
    """Percentage of ``values`` strictly below ``threshold``; ``None`` when empty."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return None
    return float(100.0 * np.mean(values < threshold))


def mean_average_accuracy(
    errors: PoseErrors, max_deg: int = DEFAULT_MAA_MAX_DEG
) -> Optional[float]:
    """mAA@max_deg in percent over all pairs (undefined-RTA rule in the module docstring).

    Mean over tau = 1..max_deg of the fraction of pairs with ``max(rot err, RTA) < tau``.
    """
    if len(errors) == 0:
        return None
    combined = np.where(errors.rta_undefined_gt, errors.rot_deg,
                        np.maximum(errors.rot_deg, errors.rta_deg))
    combined = np.where(errors.rta_undefined_pred, np.inf, combined)
    taus = np.arange(1, int(max_deg) + 1, dtype=np.float64)
    return float(100.0 * np.mean(combined[None, :] < taus[:, None]))


def _mean(x: np.ndarray) -> Optional[float]:
    return float(np.mean(x)) if x.size else None


def _median(x: np.ndarray) -> Optional[float]:
    return float(np.median(x)) if x.size else None


def summarize_errors(
    errors: PoseErrors,
    thresholds_deg: Sequence[float] = DEFAULT_THRESHOLDS_DEG,
    maa_max_deg: int = DEFAULT_MAA_MAX_DEG,
) -> Dict[str, object]:
    """Summary statistics of a set of pairs. Statistics of an empty set are ``None``, never NaN.

    Keys: ``n``, ``n_failed``, ``rot_err_mean/median`` (deg), ``trans_err_mean/median`` (m),
    ``rta_mean/median`` (deg, defined pairs only), ``rta_n`` (defined pairs),
    ``rta_undefined_gt``, ``rta_undefined_pred``, ``rra@T`` and ``rta@T`` (percent; RTA over
    defined pairs), ``maa@M`` (percent, all pairs).
    """
    rta = errors.rta_deg[errors.rta_defined]
    out: Dict[str, object] = {
        "n": len(errors),
        "n_failed": int(np.sum(errors.failed)),
        "rot_err_mean": _mean(errors.rot_deg),
        "rot_err_median": _median(errors.rot_deg),
        "trans_err_mean": _mean(errors.trans_m),
        "trans_err_median": _median(errors.trans_m),
        "rta_mean": _mean(rta),
        "rta_median": _median(rta),
        "rta_n": int(rta.size),
        "rta_undefined_gt": int(np.sum(errors.rta_undefined_gt)),
        "rta_undefined_pred": int(np.sum(errors.rta_undefined_pred)),
    }
    for tau in thresholds_deg:
        out[f"rra@{_fmt_tau(tau)}"] = accuracy_at(errors.rot_deg, tau)
    for tau in thresholds_deg:
        out[f"rta@{_fmt_tau(tau)}"] = accuracy_at(rta, tau)
    out[f"maa@{int(maa_max_deg)}"] = mean_average_accuracy(errors, maa_max_deg)
    return out


def _fmt_tau(tau: float) -> str:
    return str(int(tau)) if float(tau).is_integer() else str(tau)


def overlap_bin_label(lo: float, hi: float, closed: bool) -> str:
    return f"[{lo:g},{hi:g}{']' if closed else ')'}"


def summarize_by_overlap(
    errors: PoseErrors,
    overlaps: Optional[np.ndarray] = None,
    bins: Sequence[Tuple[float, float]] = DEFAULT_OVERLAP_BINS,
    **summary_kwargs,
) -> Dict[str, object]:
    """Summary over all pairs plus one per overlap bin.

    Args:
        errors: per-pair errors (N pairs).
        overlaps: ``[N]`` overlap score per pair, or ``None`` (no breakdown).
        bins: ``(lo, hi)`` half-open bins; the last is closed at ``hi``.
    Returns:
        ``{"all": summary, "bins": {label: summary}, "n_unbinned": int}``.
    """
    out: Dict[str, object] = {"all": summarize_errors(errors, **summary_kwargs)}
    if overlaps is None:
        return out
    overlaps = np.asarray(overlaps, dtype=np.float64)
    if overlaps.shape != (len(errors),):
        raise ValueError(f"overlaps must have shape [{len(errors)}], got {overlaps.shape}")
    binned = np.zeros(len(errors), dtype=bool)
    per_bin: Dict[str, object] = {}
    for k, (lo, hi) in enumerate(bins):
        if not lo < hi:
            raise ValueError(f"overlap bin {k} must have lo < hi, got ({lo}, {hi})")
        last = k == len(bins) - 1
        mask = (overlaps >= lo) & ((overlaps <= hi) if last else (overlaps < hi))
        binned |= mask
        per_bin[overlap_bin_label(lo, hi, last)] = summarize_errors(errors.subset(mask),
                                                                    **summary_kwargs)
    out["bins"] = per_bin
    out["n_unbinned"] = int(np.sum(~binned))
    return out


def summarize_pairs(
    preds: Sequence[Optional[np.ndarray]] | np.ndarray,
    gts: Sequence[np.ndarray] | np.ndarray,
    overlaps: Optional[Sequence[float]] = None,
    bins: Sequence[Tuple[float, float]] = DEFAULT_OVERLAP_BINS,
    eps: float = DEFAULT_EPS,
    **summary_kwargs,
) -> Dict[str, object]:
    """Summary of a list of (pred, gt) pose pairs, with per-overlap-bin breakdown.

    Args:
        preds: ``N`` predicted ``[4,4]`` poses (``None`` = failed).
        gts: ``[N, 4, 4]`` ground truth.
        overlaps: optional ``[N]`` overlap score per pair.
    """
    errors = pose_errors(preds, gts, eps=eps)
    ov = None if overlaps is None else np.asarray(overlaps, dtype=np.float64)
    return summarize_by_overlap(errors, ov, bins, **summary_kwargs)


# --------------------------------------------------------------------------------------------
# Group predictions: primary B0 pose, all B_j, all A_i
# --------------------------------------------------------------------------------------------
def group_errors(
    pred_a: Optional[np.ndarray],
    pred_b: Optional[np.ndarray],
    gt_a: np.ndarray,
    gt_b: np.ndarray,
    eps: float = DEFAULT_EPS,
) -> Dict[str, PoseErrors]:
    """Errors of one group-to-group prediction.

    Args:
        pred_a: ``[N_A, 4, 4]`` predicted ``T_{A0<-Ai}`` including A0 (ignored), or
            ``[N_A - 1, 4, 4]`` for A1.., or ``None`` (not predicted: treated as failed).
        pred_b: ``[N_B, 4, 4]`` predicted ``T_{A0<-Bj}``; ``None`` = failed.
        gt_a: ``[N_A, 4, 4]`` ground truth including A0.
        gt_b: ``[N_B, 4, 4]`` ground truth.
    Returns:
        ``{"b0": 1 pair, "b_all": N_B pairs, "a_all": N_A - 1 pairs}``.
    """
    gt_a = np.asarray(gt_a, dtype=np.float64)
    gt_b = np.asarray(gt_b, dtype=np.float64)
    targets_a = gt_a[1:]
    if pred_a is None:
        pa: Sequence[Optional[np.ndarray]] = [None] * len(targets_a)
    else:
        pa = np.asarray(pred_a, dtype=np.float64)
        if pa.shape[0] == gt_a.shape[0]:
            pa = pa[1:]
        elif pa.shape[0] != targets_a.shape[0]:
            raise ValueError(
                f"pred_a has {pa.shape[0]} frames; expected {gt_a.shape[0]} (with A0) or "
                f"{targets_a.shape[0]} (without)"
            )
    pb = [None] * len(gt_b) if pred_b is None else np.asarray(pred_b, dtype=np.float64)
    errors_b = pose_errors(pb, gt_b, eps)
    return {
        "b0": errors_b.subset(np.arange(len(errors_b)) == 0),
        "b_all": errors_b,
        "a_all": pose_errors(pa, targets_a, eps) if len(targets_a) else PoseErrors.empty(),
    }


def summarize_groups(
    samples: Iterable[Tuple[Optional[np.ndarray], Optional[np.ndarray], np.ndarray, np.ndarray]],
    overlaps: Optional[Sequence[float]] = None,
    bins: Sequence[Tuple[float, float]] = DEFAULT_OVERLAP_BINS,
    eps: float = DEFAULT_EPS,
    sim3_aligned: bool = False,
    **summary_kwargs,
) -> Dict[str, object]:
    """Summaries over many group predictions: primary B0 pose, all B_j and all A_i (i >= 1).

    Args:
        samples: iterable of ``(pred_a, pred_b, gt_a, gt_b)`` as in :func:`group_errors`.
        overlaps: optional overlap score per sample (shared by all its targets).
        sim3_aligned: align each sample's predicted camera centres (A and B) to the ground truth
            with Umeyama Sim(3) first (only for up-to-scale methods); the result then carries
            ``"alignment": "sim3_aligned"``.
    Returns:
        ``{"alignment": "none" | "sim3_aligned", "b0": ..., "b_all": ..., "a_all": ...}``, each
        value as returned by :func:`summarize_by_overlap`.
    """
    parts: Dict[str, List[PoseErrors]] = {"b0": [], "b_all": [], "a_all": []}
    ov_parts: Dict[str, List[np.ndarray]] = {"b0": [], "b_all": [], "a_all": []}
    ov_list = None if overlaps is None else list(overlaps)
    n_samples = 0
    for k, (pred_a, pred_b, gt_a, gt_b) in enumerate(samples):
        if sim3_aligned:
            pred_a, pred_b = _sim3_align_group(pred_a, pred_b, gt_a, gt_b)
        errs = group_errors(pred_a, pred_b, gt_a, gt_b, eps)
        for key, e in errs.items():
            parts[key].append(e)
            if ov_list is not None:
                if k >= len(ov_list):
                    raise ValueError(f"overlaps has {len(ov_list)} entries, fewer than samples")
                ov_parts[key].append(np.full(len(e), float(ov_list[k])))
        n_samples += 1
    if ov_list is not None and len(ov_list) != n_samples:
        raise ValueError(f"overlaps has {len(ov_list)} entries but there are {n_samples} samples")
    out: Dict[str, object] = {"alignment": SIM3_LABEL if sim3_aligned else "none",
                              "n_samples": n_samples}
    for key in parts:
        ov = np.concatenate(ov_parts[key]) if ov_list is not None and ov_parts[key] else None
        if ov_list is not None and ov is None:
            ov = np.zeros(0)
        out[key] = summarize_by_overlap(PoseErrors.concatenate(parts[key]), ov, bins,
                                        **summary_kwargs)
    return out


def _sim3_align_group(pred_a, pred_b, gt_a, gt_b):
    if pred_a is None or pred_b is None:
        return pred_a, pred_b
    pa = np.asarray(pred_a, dtype=np.float64)
    ga = np.asarray(gt_a, dtype=np.float64)
    if pa.shape[0] == ga.shape[0] - 1:  # without A0: A0 is identity by definition
        pa = np.concatenate([np.eye(4)[None], pa])
    pb = np.asarray(pred_b, dtype=np.float64)
    pred = np.concatenate([pa, pb])
    if not np.all(np.isfinite(pred)):
        return pred_a, pred_b
    aligned, _ = sim3_aligned_poses(pred, np.concatenate([ga, np.asarray(gt_b)]))
    return aligned[: len(pa)], aligned[len(pa):]


# --------------------------------------------------------------------------------------------
# Sim(3) alignment (Umeyama), always labelled
# --------------------------------------------------------------------------------------------
def umeyama_sim3(src: np.ndarray, dst: np.ndarray) -> Tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ~ s * R @ src + t`` (Umeyama 1991).

    Args:
        src, dst: ``[N, 3]`` corresponding points, N >= 3, not all collinear.
    Returns:
        ``(s, R [3,3], t [3])``.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 3:
        raise ValueError(f"src and dst must both be [N,3], got {src.shape} and {dst.shape}")
    if src.shape[0] < 3:
        raise ValueError(f"Sim(3) alignment needs at least 3 points, got {src.shape[0]}")
    mu_s, mu_d = src.mean(0), dst.mean(0)
    xs, xd = src - mu_s, dst - mu_d
    var_s = np.mean(np.sum(xs ** 2, axis=1))
    if var_s < 1e-12:
        raise ValueError("Sim(3) alignment is degenerate: source points coincide")
    cov = xd.T @ xs / src.shape[0]
    u, d, vt = np.linalg.svd(cov)
    if d[1] < 1e-9 * max(d[0], 1e-12):
        raise ValueError("Sim(3) alignment is degenerate: points are collinear")
    sign = np.ones(3)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        sign[2] = -1.0
    rot = u @ np.diag(sign) @ vt
    scale = float(np.sum(d * sign) / var_s)
    trans = mu_d - scale * rot @ mu_s
    return scale, rot, trans


def sim3_aligned_poses(pred: np.ndarray, gt: np.ndarray) -> Tuple[np.ndarray, float]:
    """Apply the Umeyama Sim(3) that maps predicted camera centres onto the true ones.

    Args:
        pred, gt: ``[N, 4, 4]`` poses, N >= 3 with non-collinear centres.
    Returns:
        ``(sim3_aligned pred [N,4,4], scale)``. Rotations are rotated by the alignment rotation,
        centres mapped by ``s R c + t``.
    """
    pred = np.asarray(pred, dtype=np.float64)
    gt = np.asarray(gt, dtype=np.float64)
    scale, rot, trans = umeyama_sim3(pred[:, :3, 3], gt[:, :3, 3])
    out = pred.copy()
    out[:, :3, :3] = rot[None] @ pred[:, :3, :3]
    out[:, :3, 3] = scale * pred[:, :3, 3] @ rot.T + trans
    return out, scale


# --------------------------------------------------------------------------------------------
# KITTI-style odometry errors
# --------------------------------------------------------------------------------------------
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
    per_length: Dict[float, Dict[str, object]] = {}
    for length in lengths:
        sel = [s for s in segs if s.length_m == length]
        per_length[length] = {
            "rte_pct": _mean(np.array([s.trans_pct for s in sel])),
            "rre_deg_per_100m": _mean(np.array([s.rot_deg_per_100m for s in sel])),
            "n_segments": len(sel),
        }
    result: Dict[str, object] = {
        "rte_pct": _mean(np.array([s.trans_pct for s in segs])),
        "rre_deg_per_100m": _mean(np.array([s.rot_deg_per_100m for s in segs])),
        "n_segments": len(segs),
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


# --------------------------------------------------------------------------------------------
# Tables (never NaN)
# --------------------------------------------------------------------------------------------
# Which count qualifies a statistic that can be empty; used to print "n/a (n=0)".
_COUNT_KEY = {"rta_mean": "rta_n", "rta_median": "rta_n"}
DEFAULT_TABLE_COLUMNS = (
    "n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean", "trans_err_median",
    "rta_mean", "rta_median", "rta_undefined_gt", "rta_undefined_pred", "rra@5", "rra@15",
    "rta@5", "rta@15", "maa@30",
)


def format_value(value: object, count: Optional[int] = None, digits: int = 3) -> str:
    """Cell text: numbers with ``digits`` decimals, ``None``/NaN as ``n/a`` (with ``(n=count)``
    when a count is known). Never returns ``nan``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a" if count is None else f"n/a (n={count})"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.{digits}f}"
    return str(value)


def summary_rows(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 3,
) -> List[List[str]]:
    """Rows of formatted cells: one per named summary, first cell = its name."""
    rows = []
    for name, summ in summaries.items():
        row = [str(name)]
        for col in columns:
            count_key = _COUNT_KEY.get(col, "n")
            row.append(format_value(summ.get(col), summ.get(count_key), digits))
        rows.append(row)
    return rows


def format_markdown_table(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 3,
    title: str = "",
) -> str:
    """GitHub-flavoured Markdown table of named summaries (e.g. ``{"B0": ..., "[0.1,0.3)": ...}``).

    ``title`` becomes the header of the first column; put ``sim3_aligned`` in it for aligned
    results.
    """
    header = [title or "set"] + list(columns)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    for row in summary_rows(summaries, columns, digits):
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def format_csv_table(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 6,
    title: str = "",
) -> str:
    """CSV text of named summaries, same cells as :func:`format_markdown_table`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([title or "set"] + list(columns))
    writer.writerows(summary_rows(summaries, columns, digits))
    return buf.getvalue()


def flatten_group_summary(summary: Mapping[str, object]) -> Dict[str, Mapping[str, object]]:
    """Named rows of a :func:`summarize_groups` / :func:`summarize_by_overlap` result for the
    table helpers: ``"b0"``, ``"b0 [0.1,0.3)"``, ..., ``"b_all"``, ``"a_all"``. Aligned results
    get a ``" (sim3_aligned)"`` suffix on every name."""
    suffix = f" ({SIM3_LABEL})" if summary.get("alignment") == SIM3_LABEL else ""
    rows: Dict[str, Mapping[str, object]] = {}
    keyed = {k: v for k, v in summary.items() if isinstance(v, Mapping) and "all" in v}
    if not keyed and "all" in summary:
        keyed = {"all": summary}
    for key, block in keyed.items():
        rows[f"{key}{suffix}"] = block["all"]
        for label, summ in block.get("bins", {}).items():
            rows[f"{key} {label}{suffix}"] = summ
    return rows


def _translation(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-2:] == (4, 4):
        return x[..., :3, 3]
    if x.shape[-1] == 3:
        return x
    raise ValueError(f"expected poses [...,4,4] or translations [...,3], got shape {x.shape}")
