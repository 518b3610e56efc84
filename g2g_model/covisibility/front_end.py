"""The covisibility front-end in one call: score, then select the map window(s).

With a position hint and radius only the map frames within the radius are scored: windows with
any frame outside are not eligible anyway (:func:`windows_within_radius`), so the result equals
scoring the full matrix, at a fraction of the cost on a CPU.
"""

from __future__ import annotations

import logging
from typing import List, Optional, Tuple, Union

import numpy as np
import torch

from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.covisibility.retrieval import Window, select_windows
from g2g_model.covisibility.scoring import CovisibilityScores, score_matrix

LOG = logging.getLogger(__name__)


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
        batch_size, bf16: see :func:`score_matrix`.
        select_kwargs: ``max_overlap`` / ``suppress`` for :func:`select_windows`.
    Returns:
        (windows best first, the scores; rows not scored because of the radius are 0).
    """
    t_a = map_tokens.shape[0]
    rows = np.arange(t_a)
    if radius is not None and map_positions is not None and hint_position is not None:
        hint = np.asarray(hint_position, dtype=np.float64)
        hint = hint[:3, 3] if hint.shape == (4, 4) else hint
        near = np.linalg.norm(np.asarray(map_positions, np.float64) - hint, axis=1) <= radius
        rows = np.flatnonzero(near)
    full = [np.zeros((t_a, query_tokens.shape[0]), np.float32) for _ in range(3)]
    if len(rows):
        part = score_matrix(model, map_tokens[torch.from_numpy(rows)], query_tokens,
                            batch_size=batch_size, bf16=bf16)
        for dst, src in zip(full, (part.score, part.r_ab, part.r_ba)):
            dst[rows] = src
    scores = CovisibilityScores(*full)
    LOG.debug("scored %d of %d map frames against %d query frames", len(rows), t_a,
              query_tokens.shape[0])
    windows = select_windows(scores.score, window, top_k=top_k, threshold=threshold,
                             map_positions=map_positions, hint_position=hint_position,
                             radius=radius, **select_kwargs)
    return windows, scores
