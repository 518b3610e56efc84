"""Choosing the map window to align a query window against, from per-frame scores.

Two sources of frame-pair scores feed the same window scoring:

* the covisibility front-end (:mod:`g2g_model.covisibility`), whose scores are overlap ratios;
* as a fallback when no covisibility model is available, the cosine similarity of mean-pooled
  per-frame encoder tokens (a global descriptor; its scores are NOT overlaps).

A window's score is the max-mean aggregation of DESIGN section 3: the mean over the window's
frames of their best match in the query, and the mean over the query frames of their best match
in the window, averaged.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np
import torch


def descriptor_similarity(map_tokens: torch.Tensor, query_tokens: torch.Tensor) -> np.ndarray:
    """Cosine similarity ``[T_A, T_B]`` of map and query frames (fallback scorer).

    The map's mean descriptor is removed from both sides so that what all frames share (the
    encoder's bias) does not dominate.
    """
    a = map_tokens.float().mean(dim=1)
    b = query_tokens.float().mean(dim=1)
    centre = a.mean(dim=0, keepdim=True)
    a = torch.nn.functional.normalize(a - centre, dim=-1)
    b = torch.nn.functional.normalize(b - centre, dim=-1)
    return (a @ b.T).numpy()


def max_mean(block: np.ndarray) -> float:
    """Max-mean score of a ``[W_A, W_B]`` block of frame-pair scores."""
    block = np.asarray(block, dtype=np.float64)
    return 0.5 * (block.max(axis=1).mean() + block.max(axis=0).mean())


def best_window(scores: np.ndarray, windows: Sequence[np.ndarray],
                allowed: Optional[Sequence[bool]] = None) -> Tuple[Optional[int], float]:
    """Index of the highest max-mean window (rows = map frames, all query columns) and its score.

    Args:
        scores: ``[T_A, T_B]`` frame-pair scores.
        windows: map-frame index arrays.
        allowed: optional mask over ``windows`` (e.g. within a radius of a pose hint).
    """
    best, best_score = None, -np.inf
    for i, w in enumerate(windows):
        if allowed is not None and not allowed[i]:
            continue
        s = max_mean(scores[np.asarray(w)])
        if s > best_score:
            best, best_score = i, s
    return best, float(best_score)
