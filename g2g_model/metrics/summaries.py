"""Statistics over pose errors: accuracies, mAA, means and medians, overlap bins and the
group summaries (B0, all B_j, all A_i). Statistics of an empty set are ``None``, never NaN."""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.metrics.alignment import SIM3_LABEL, sim3_aligned_poses
from g2g_model.metrics.errors import DEFAULT_EPS, PoseErrors, pose_errors

DEFAULT_THRESHOLDS_DEG = (5.0, 15.0)
DEFAULT_MAA_MAX_DEG = 30
# Half-open [lo, hi) bins on the window overlap score; the last bin is closed at 1.0.
DEFAULT_OVERLAP_BINS: Tuple[Tuple[float, float], ...] = ((0.1, 0.3), (0.3, 0.5), (0.5, 1.0))


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


def mean_or_none(x: np.ndarray) -> Optional[float]:
    """Mean, or ``None`` for an empty array (never NaN)."""
    return float(np.mean(x)) if x.size else None


def median_or_none(x: np.ndarray) -> Optional[float]:
    """Median, or ``None`` for an empty array (never NaN)."""
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
        "rot_err_mean": mean_or_none(errors.rot_deg),
        "rot_err_median": median_or_none(errors.rot_deg),
        "trans_err_mean": mean_or_none(errors.trans_m),
        "trans_err_median": median_or_none(errors.trans_m),
        "rta_mean": mean_or_none(rta),
        "rta_median": median_or_none(rta),
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


PAIRED_COLUMNS = ("n", "rot_diff_mean", "rot_diff_ci_low", "rot_diff_ci_high", "rot_worse",
                  "rot_better", "trans_diff_mean", "trans_diff_ci_low", "trans_diff_ci_high",
                  "trans_worse", "trans_better")


def paired_differences(errors: Dict[str, Tuple[np.ndarray, np.ndarray]],
                       comparisons: Sequence[Tuple[str, str]], rot_tol_deg: float = 0.5,
                       trans_tol_m: float = 0.02, confidence: float = 0.95,
                       resamples: int = 9999) -> Dict[str, Dict[str, object]]:
    """Per-pair errors of one method minus another's on the same pairs.

    ``errors``: label -> (rotation errors ``[N]`` deg, translation errors ``[N]`` m), one entry
    per pair in the same order for every label; ``comparisons``: (label, reference) pairs. Per
    comparison (key ``"label vs reference"``): the mean difference (positive: worse than the
    reference), its ``confidence`` interval (scipy's bootstrap of the mean over pairs,
    percentile method, fixed seed) and how many pairs are worse / better by more than
    ``rot_tol_deg`` / ``trans_tol_m``. An interval that excludes 0 is a difference the pairs
    support; a mean difference made by one pair shows as a wide interval and counts of 1."""
    from scipy.stats import bootstrap

    out: Dict[str, Dict[str, object]] = {}
    for label, reference in comparisons:
        for name in (label, reference):
            if name not in errors:
                raise ValueError(f"{name!r} is not among {sorted(errors)}")
        rot, trans = errors[label]
        row: Dict[str, object] = {"n": len(rot)}
        for axis, (name, tol) in enumerate((("rot", rot_tol_deg), ("trans", trans_tol_m))):
            values = np.asarray((rot, trans)[axis], float)
            base = np.asarray(errors[reference][axis], float)
            if values.shape != base.shape:
                raise ValueError(f"{label}: {values.shape} {name} errors, the reference "
                                 f"{reference!r} has {base.shape}")
            diff = values - base
            low = high = float(diff.mean())
            if len(diff) > 1 and np.ptp(diff) > 0:
                ci = bootstrap((diff,), np.mean, confidence_level=confidence,
                               n_resamples=resamples, method="percentile",
                               rng=np.random.default_rng(0)).confidence_interval
                low, high = float(ci.low), float(ci.high)
            row.update({f"{name}_diff_mean": float(diff.mean()), f"{name}_diff_ci_low": low,
                        f"{name}_diff_ci_high": high, f"{name}_worse": int((diff > tol).sum()),
                        f"{name}_better": int((diff < -tol).sum())})
        out[f"{label} vs {reference}"] = row
    return out


def paired_ratio(values: np.ndarray, base: np.ndarray, statistic=np.median,
                 confidence: float = 0.95, resamples: int = 9999) -> Tuple[float, float, float]:
    """``(ratio, low, high)``: ``statistic(values) / statistic(base)`` over pairs measured both
    ways (one entry per pair, the same order), and its ``confidence`` interval (scipy's paired
    bootstrap, percentile method, fixed seed). Where the interval holds a threshold (e.g. 1.1,
    "within 10 %"), these pairs cannot tell on which side of it the ratio lies."""
    from scipy.stats import bootstrap

    values, base = np.asarray(values, float), np.asarray(base, float)
    if values.shape != base.shape or values.ndim != 1 or not len(values):
        raise ValueError(f"paired_ratio needs two [N] arrays of one length, got {values.shape} "
                         f"and {base.shape}")

    def ratio(v, b, axis=-1):
        return statistic(v, axis=axis) / np.maximum(statistic(b, axis=axis), 1e-12)

    point = float(ratio(values, base))
    if len(values) < 2:
        return point, point, point
    ci = bootstrap((values, base), ratio, paired=True, vectorized=True,
                   confidence_level=confidence, n_resamples=resamples, method="percentile",
                   rng=np.random.default_rng(0)).confidence_interval
    return point, float(ci.low), float(ci.high)
