"""The covisibility front-end in one call: score, then select the map window(s).

Two ways to score fewer than all ``T_A x T_B`` pairs, both off unless asked for:

* **radius**: with a position hint only the map frames within the radius are scored. Windows
  with a frame outside are not eligible anyway (:func:`windows_within_radius`), so the result
  equals scoring the full matrix.
* **coarse-to-fine** (``coarse_stride = s > 1``): score every s-th candidate map frame, keep the
  ``coarse_candidates`` best coarse windows (map-disjoint), score all map frames around them,
  and select among the windows whose frames were all scored. About ``1/s`` of the pairs plus
  ``candidates * (3 W + 2 s)`` rows; an approximation that can miss a window whose every s-th
  frame looks poor, so measure it against full scoring on held-out data before relying on it.
"""

from __future__ import annotations

import logging
import math
from typing import Callable, List, Optional, Tuple, Union

import numpy as np
import torch

from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.covisibility.retrieval import Window, select_windows
from g2g_model.covisibility.scoring import CovisibilityScores, score_matrix

LOG = logging.getLogger(__name__)

RowScorer = Callable[[np.ndarray], CovisibilityScores]


def score_map_rows(
    score_rows: RowScorer,
    num_map: int,
    num_query: int,
    rows: np.ndarray,
    window: Tuple[int, int],
    coarse_stride: int = 1,
    coarse_candidates: int = 4,
) -> Tuple[CovisibilityScores, np.ndarray]:
    """Score the candidate map rows, all of them or coarse-to-fine.

    Args:
        score_rows: ``rows [R] -> CovisibilityScores`` of ``[R, T_B]`` (map rows x all query
            frames).
        num_map, num_query: T_A, T_B.
        rows: sorted candidate map rows (e.g. those within the hint radius).
        window: (W_A, W_B).
        coarse_stride: 1 scores every candidate row; s > 1 see the module docstring.
        coarse_candidates: coarse windows refined at full resolution.
    Returns:
        ``[T_A, T_B]`` scores (unscored rows 0) and ``scored [T_A]`` bool.
    """
    if coarse_stride < 1 or coarse_candidates < 1:
        raise ValueError(f"coarse_stride ({coarse_stride}) and coarse_candidates "
                         f"({coarse_candidates}) must be >= 1")
    full = CovisibilityScores(*(np.zeros((num_map, num_query), np.float32) for _ in range(3)))
    scored = np.zeros(num_map, dtype=bool)

    def fill(which: np.ndarray) -> None:
        which = which[~scored[which]]
        if len(which):
            part = score_rows(which)
            for name in ("score", "r_ab", "r_ba"):
                getattr(full, name)[which] = getattr(part, name)
            scored[which] = True

    rows = np.asarray(rows, dtype=np.int64)
    w_a, w_b = window
    if coarse_stride == 1 or len(rows) <= w_a:
        fill(rows)
        return full, scored
    coarse = rows[::coarse_stride]
    fill(coarse)
    w_coarse = min(len(coarse), max(1, math.ceil(w_a / coarse_stride)))
    picks = select_windows(full.score[coarse], (w_coarse, w_b), top_k=coarse_candidates,
                           threshold=-np.inf, suppress="map")
    candidate = np.zeros(num_map, dtype=bool)
    candidate[rows] = True
    refine = np.zeros(num_map, dtype=bool)
    margin = w_a - 1 + coarse_stride
    for pick in picks:
        lo = max(0, coarse[pick.map_start] - margin)
        hi = min(num_map, coarse[pick.map_start + w_coarse - 1] + margin + 1)
        refine[lo:hi] = True
    fill(np.flatnonzero(refine & candidate))
    return full, scored


def select_map_windows(
    model: CovisibilityDecoder,
    map_tokens: torch.Tensor,
    query_tokens: torch.Tensor,
    window: Union[int, Tuple[int, int]],
    top_k: int = 1,
    threshold: float = 0.0,
    map_positions: Optional[np.ndarray] = None,
    hint_position: Optional[np.ndarray] = None,
    radius: Optional[float] = None,
    coarse_stride: int = 1,
    coarse_candidates: int = 4,
    batch_size: int = 256,
    bf16: bool = False,
    **select_kwargs,
) -> Tuple[List[Window], CovisibilityScores]:
    """Best map windows for a query segment.

    Args:
        model: covisibility decoder.
        map_tokens: ``[T_A, P, D]`` cached tokens of consecutive map frames (one camera).
        query_tokens: ``[T_B, P, D]`` tokens of the query segment.
        window, top_k, threshold: see :func:`select_windows`.
        map_positions, hint_position, radius: optional radius restriction (all or none).
        coarse_stride, coarse_candidates: see :func:`score_map_rows`.
        batch_size, bf16: see :func:`score_matrix`.
        select_kwargs: ``max_overlap`` / ``suppress`` for :func:`select_windows`.
    Returns:
        (windows best first, the scores; rows that were not scored are 0).
    """
    t_a, t_b = map_tokens.shape[0], query_tokens.shape[0]
    w_a, w_b = (window, window) if np.isscalar(window) else tuple(window)
    rows = np.arange(t_a)
    if radius is not None and map_positions is not None and hint_position is not None:
        hint = np.asarray(hint_position, dtype=np.float64)
        hint = hint[:3, 3] if hint.shape == (4, 4) else hint
        near = np.linalg.norm(np.asarray(map_positions, np.float64) - hint, axis=1) <= radius
        rows = np.flatnonzero(near)

    def score_rows(which: np.ndarray) -> CovisibilityScores:
        return score_matrix(model, map_tokens[torch.from_numpy(which)], query_tokens,
                            batch_size=batch_size, bf16=bf16)

    scores, scored = score_map_rows(score_rows, t_a, t_b, rows, (int(w_a), int(w_b)),
                                    coarse_stride, coarse_candidates)
    LOG.debug("scored %d of %d map frames against %d query frames", int(scored.sum()), t_a, t_b)
    eligible = None
    if not scored.all() and t_a >= w_a:
        run = np.convolve(scored.astype(np.int64), np.ones(int(w_a), np.int64), mode="valid")
        eligible = run == w_a
    windows = select_windows(scores.score, window, top_k=top_k, threshold=threshold,
                             map_positions=map_positions, hint_position=hint_position,
                             radius=radius, eligible=eligible, **select_kwargs)
    return windows, scores
