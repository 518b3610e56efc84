"""Held-out metrics of a covisibility decoder.

* dense IoU and accuracy of the covisible mask (prediction and label binarised at 0.5, counted
  over all cells of both frames of all pairs);
* scalar MAE of the directional ratios (both directions) and of the symmetric score;
* window selection (:func:`window_selection_accuracy`): the true max-mean overlap of the window
  chosen from predicted scores against that of the best window (the goal: within 0.1 in >= 90 %
  of held-out queries);
* frame retrieval: for each query frame (the a of a group of samples), rank its candidate frames
  (the b's) by predicted score; top-k is a hit when a frame with the highest true score is among
  the k best ranked (queries with fewer than 2 candidates or no covisible candidate are skipped).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.covisibility.loss import match_dense_labels
from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.covisibility.retrieval import select_windows, window_scores
from g2g_model.covisibility.samples import CovisibilitySamples
from g2g_model.precision import autocast


def frame_retrieval_hits(query_ids: np.ndarray, true_scores: np.ndarray,
                         pred_scores: np.ndarray, ks: Sequence[int] = (1, 5)) -> Dict[str, float]:
    """Top-k frame retrieval rates.

    Args:
        query_ids: ``[N]`` the query frame of every candidate pair.
        true_scores, pred_scores: ``[N]`` true and predicted covisibility of each pair.
        ks: the k's to report.
    Returns:
        ``{"top1": ..., "top5": ..., "queries": n}`` (rates are NaN when n == 0).
    """
    query_ids = np.asarray(query_ids)
    true_scores = np.asarray(true_scores, np.float64)
    pred_scores = np.asarray(pred_scores, np.float64)
    if not (query_ids.shape == true_scores.shape == pred_scores.shape) or query_ids.ndim != 1:
        raise ValueError(
            f"query_ids {query_ids.shape}, true_scores {true_scores.shape} and pred_scores "
            f"{pred_scores.shape} must be equal 1-D shapes"
        )
    hits = {k: 0 for k in ks}
    n = 0
    order = np.argsort(query_ids, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(query_ids[order])) + 1)
    for g in groups:
        t = true_scores[g]
        if len(g) < 2 or t.max() <= 0:
            continue
        n += 1
        ranked = np.argsort(-pred_scores[g], kind="stable")
        best = t >= t.max() - 1e-9
        for k in ks:
            hits[k] += bool(best[ranked[:k]].any())
    out = {f"top{k}": (hits[k] / n if n else float("nan")) for k in ks}
    out["queries"] = n
    return out


def window_selection_accuracy(true_overlaps: Sequence[np.ndarray],
                              predicted_scores: Sequence[np.ndarray], window: int,
                              tolerance: float = 0.1,
                              hints: Optional[Sequence[Tuple[np.ndarray, np.ndarray]]] = None,
                              radius: Optional[float] = None) -> Dict[str, float]:
    """How often the window picked from predicted scores is (nearly) the truly best one.

    Args:
        true_overlaps: per query, the ``[T_A, T_B]`` true symmetric overlap matrix.
        predicted_scores: per query, the predicted ``[T_A, T_B]`` scores.
        window: W.
        tolerance: a pick is good when its true window score is within this of the best.
        hints, radius: optional position hint per query, ``(map_positions [T_A, 3],
            hint_position [3])``: only map windows within ``radius`` of the hint may be picked
            (as the relocalize node does with a hint). The best window is still the best of
            all windows, so a hint that excludes it costs; a query with no eligible window
            counts as a miss with the full gap.
    Returns:
        ``{"within_tolerance": fraction, "mean_gap": mean true-score gap, "queries": n}``
        (plus ``"no_eligible_window"``: the number of such queries, with hints).
    """
    if len(true_overlaps) != len(predicted_scores) or not len(true_overlaps):
        raise ValueError(
            f"need equal, non-zero numbers of true ({len(true_overlaps)}) and predicted "
            f"({len(predicted_scores)}) matrices"
        )
    if (hints is None) != (radius is None):
        raise ValueError("hints and radius go together")
    if hints is not None and len(hints) != len(true_overlaps):
        raise ValueError(f"{len(hints)} hints for {len(true_overlaps)} queries")
    gaps, empty = [], 0
    for i, (true, pred) in enumerate(zip(true_overlaps, predicted_scores)):
        if np.shape(true) != np.shape(pred):
            raise ValueError(f"true {np.shape(true)} and predicted {np.shape(pred)} differ")
        true_ws = window_scores(true, window)
        restrict = {}
        if hints is not None:
            restrict = dict(map_positions=hints[i][0], hint_position=hints[i][1], radius=radius)
        picks = select_windows(pred, window, top_k=1, threshold=-np.inf, **restrict)
        if not picks:
            empty += 1
            gaps.append(true_ws.max())
            continue
        gaps.append(true_ws.max() - true_ws[picks[0].map_start, picks[0].query_start])
    out = _gap_report(gaps, tolerance)
    if hints is not None:
        out["no_eligible_window"] = empty
    return out


def _gap_report(gaps: Sequence[float], tolerance: float) -> Dict[str, float]:
    gaps = np.asarray(gaps, dtype=np.float64)
    return {"within_tolerance": float(np.mean(gaps <= tolerance + 1e-12)),
            "mean_gap": float(gaps.mean()), "queries": len(gaps)}


def picked_window_accuracy(true_overlaps: Sequence[np.ndarray], map_starts: Sequence[int],
                           window: int, tolerance: float = 0.1) -> Dict[str, float]:
    """:func:`window_selection_accuracy` of picks made elsewhere (e.g. re-ranked by the pair
    verifier): per query the true ``[T_A, W]`` overlaps and the picked window's first map row.
    """
    if len(true_overlaps) != len(map_starts) or not len(true_overlaps):
        raise ValueError(f"need equal, non-zero numbers of true matrices "
                         f"({len(true_overlaps)}) and picks ({len(map_starts)})")
    gaps = []
    for true, start in zip(true_overlaps, map_starts):
        true_ws = window_scores(true, window)[:, 0]
        if not 0 <= start < len(true_ws):
            raise ValueError(f"pick {start} is not a window start of a {np.shape(true)} matrix")
        gaps.append(true_ws.max() - true_ws[start])
    return _gap_report(gaps, tolerance)


def evaluate(model: CovisibilityDecoder, samples: CovisibilitySamples, batch_size: int = 256,
             bf16: bool = False, ks: Sequence[int] = (1, 5)) -> Dict[str, float]:
    """All metrics of the module docstring over a sample set."""
    if len(samples) == 0:
        raise ValueError("evaluate needs a non-empty sample set")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    inter = union = correct = cells = 0
    pred_r, true_r = [], []
    cast = autocast(device, torch.bfloat16 if bf16 else None, inherit=True)
    try:
        with torch.inference_mode(), cast:
            for start in range(0, len(samples), batch_size):
                idx = torch.arange(start, min(start + batch_size, len(samples)))
                batch = {k: v.to(device) for k, v in samples.batch(idx).items()}
                out = model(batch["tokens_a"], batch["tokens_b"], dense=True)
                for key in ("dense_a", "dense_b"):
                    pred = out[key].float() >= 0.0  # sigmoid >= 0.5
                    label = match_dense_labels(batch[key], tuple(pred.shape[-2:])) >= 0.5
                    inter += int((pred & label).sum())
                    union += int((pred | label).sum())
                    correct += int((pred == label).sum())
                    cells += pred.numel()
                pred_r.append(torch.stack([out["r_ab"], out["r_ba"]], 1).float().cpu())
                true_r.append(torch.stack([batch["r_ab"], batch["r_ba"]], 1).float().cpu())
    finally:
        model.train(was_training)
    pred_r = torch.cat(pred_r).numpy()
    true_r = torch.cat(true_r).numpy()
    metrics = {
        "dense_iou": inter / union if union else float("nan"),
        "dense_acc": correct / cells,
        "ratio_mae": float(np.abs(pred_r - true_r).mean()),
        "score_mae": float(np.abs(pred_r.min(1) - true_r.min(1)).mean()),
        "pairs": len(samples),
    }
    retrieval = frame_retrieval_hits(samples.pairs[:, 0].numpy(), true_r.min(1), pred_r.min(1),
                                     ks)
    metrics.update({f"retrieval_{k}": v for k, v in retrieval.items()})
    return metrics
