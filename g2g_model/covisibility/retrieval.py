"""Window selection over a covisibility score matrix (pure numpy, vectorised).

Given scores ``S [T_A, T_B]`` between the consecutive frames of a map trajectory (rows; take
them from one camera with :meth:`g2g_model.maps.format.G2GMap.camera_indices`) and of a query
segment (columns), every ``W_A x W_B`` window (map frames ``i..i+W_A-1``, query frames
``j..j+W_B-1``) gets the *max-mean* score (ARCHITECTURE §3)::

    s(i, j) = 0.5 * ( mean_rows max_cols S_win + mean_cols max_rows S_win )

computed for all windows at once with sliding-window maxima (strided views) and sliding means
(cumulative sums): ``O(T_A * T_B * W)`` and a few ``[T_A, T_B]`` temporaries.
:func:`select_windows` then keeps the best windows greedily, suppressing windows that share
more than ``max_overlap`` of their frames with one already kept, and drops those under a
threshold; optionally only map windows whose frames all lie within ``radius`` of a position hint
are eligible.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Tuple, Union

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

SUPPRESS_MODES = ("box", "map")


@dataclasses.dataclass(frozen=True)
class Window:
    """A selected window: map frames ``map_start..+map_size-1``, query frames likewise."""

    map_start: int
    query_start: int
    map_size: int
    query_size: int
    score: float

    @property
    def map_indices(self) -> np.ndarray:
        return np.arange(self.map_start, self.map_start + self.map_size)

    @property
    def query_indices(self) -> np.ndarray:
        return np.arange(self.query_start, self.query_start + self.query_size)


def _sizes(window: Union[int, Tuple[int, int]], shape: Tuple[int, int]) -> Tuple[int, int]:
    w_a, w_b = (window, window) if np.isscalar(window) else tuple(window)
    w_a, w_b = int(w_a), int(w_b)
    if w_a < 1 or w_b < 1:
        raise ValueError(f"window sizes must be >= 1, got {window}")
    if w_a > shape[0] or w_b > shape[1]:
        raise ValueError(
            f"window {w_a} x {w_b} does not fit the {shape[0]} x {shape[1]} score matrix"
        )
    return w_a, w_b


def _sliding_mean(x: np.ndarray, width: int, axis: int) -> np.ndarray:
    """Mean over every run of ``width`` consecutive entries along ``axis`` (cumulative sums)."""
    x = np.moveaxis(x, axis, 0).astype(np.float64)
    c = np.concatenate([np.zeros((1,) + x.shape[1:]), np.cumsum(x, axis=0)])
    return np.moveaxis((c[width:] - c[:-width]) / width, 0, axis)


def window_scores(scores: np.ndarray, window: Union[int, Tuple[int, int]]) -> np.ndarray:
    """Max-mean score of every window.

    Args:
        scores: ``[T_A, T_B]`` pairwise scores.
        window: W (square) or (W_A, W_B).
    Returns:
        ``[T_A - W_A + 1, T_B - W_B + 1]`` float64; entry (i, j) scores the window starting at
        map frame i and query frame j.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be [T_A, T_B], got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or infinite values")
    w_a, w_b = _sizes(window, s.shape)
    row_max = sliding_window_view(s, w_b, axis=1).max(-1)  # [T_A, T_B-W_B+1]
    col_max = sliding_window_view(s, w_a, axis=0).max(-1)  # [T_A-W_A+1, T_B]
    return 0.5 * (_sliding_mean(row_max, w_a, axis=0) + _sliding_mean(col_max, w_b, axis=1))


def windows_within_radius(map_positions: np.ndarray, hint_position: np.ndarray, radius: float,
                          window: int) -> np.ndarray:
    """``[T_A - W + 1]`` bool: every frame of the map window lies within ``radius`` of the hint.

    Args:
        map_positions: ``[T_A, 3]`` camera centres of the map frames (rows of the scores).
        hint_position: ``[3]`` position, or a ``[4, 4]`` pose whose translation is used.
        radius: metres (> 0).
        window: W_A.
    """
    pos = np.asarray(map_positions, dtype=np.float64)
    hint = np.asarray(hint_position, dtype=np.float64)
    if hint.shape == (4, 4):
        hint = hint[:3, 3]
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise ValueError(f"map_positions must be [T_A, 3], got shape {pos.shape}")
    if hint.shape != (3,):
        raise ValueError(f"hint_position must be [3] or a [4, 4] pose, got shape {hint.shape}")
    if not radius > 0:
        raise ValueError(f"radius must be > 0, got {radius}")
    inside = (np.linalg.norm(pos - hint, axis=1) <= radius).astype(np.float64)
    return _sliding_mean(inside, window, axis=0) > 1.0 - 1e-9


def _span(size: int, max_overlap: float) -> int:
    """Largest start offset |d| at which two windows still share more than max_overlap."""
    return int(math.ceil(round(size * (1.0 - max_overlap), 9))) - 1


def select_windows(
    scores: np.ndarray,
    window: Union[int, Tuple[int, int]],
    top_k: int = 1,
    threshold: float = 0.0,
    max_overlap: float = 0.0,
    suppress: str = "box",
    map_positions: Optional[np.ndarray] = None,
    hint_position: Optional[np.ndarray] = None,
    radius: Optional[float] = None,
    eligible: Optional[np.ndarray] = None,
) -> List[Window]:
    """The top-K non-overlapping windows of a score matrix, best first.

    Args:
        scores: ``[T_A, T_B]`` pairwise scores (map frames x query frames).
        window: W (square) or (W_A, W_B).
        top_k: at most this many windows (1 at run time).
        threshold: windows scoring below it are dropped (the result may be empty).
        max_overlap: two windows conflict when they share more than this fraction of their
            frames along an axis (0: no shared frame at all).
        suppress: ``"box"``: conflict only when they overlap along both axes (mining several
            (map, query) pairs); ``"map"``: conflict when their map frames overlap, whatever
            their query frames (distinct places for one query).
        map_positions, hint_position, radius: when all three are given, only map windows whose
            frames all lie within ``radius`` of the hint are eligible
            (:func:`windows_within_radius`).
        eligible: optional ``[T_A - W_A + 1]`` bool, the map windows allowed at all (e.g. those
            whose rows were scored); combined with the radius restriction.

    Returns:
        list of :class:`Window`, scores non-increasing.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if not 0.0 <= max_overlap < 1.0:
        raise ValueError(f"max_overlap must be in [0, 1), got {max_overlap}")
    if suppress not in SUPPRESS_MODES:
        raise ValueError(f"suppress must be one of {SUPPRESS_MODES}, got {suppress!r}")
    ws = window_scores(scores, window)
    w_a, w_b = _sizes(window, np.shape(scores))
    hint_args = (map_positions, hint_position, radius)
    if any(a is not None for a in hint_args):
        if any(a is None for a in hint_args):
            raise ValueError("radius restriction needs map_positions, hint_position and radius")
        if len(map_positions) != np.shape(scores)[0]:
            raise ValueError(
                f"map_positions has {len(map_positions)} rows for {np.shape(scores)[0]} map "
                "frames"
            )
        allowed = windows_within_radius(map_positions, hint_position, radius, w_a)
        ws[~allowed] = -np.inf
    if eligible is not None:
        eligible = np.asarray(eligible, dtype=bool)
        if eligible.shape != (ws.shape[0],):
            raise ValueError(f"eligible must be [{ws.shape[0]}] (one per map window start), got "
                             f"shape {eligible.shape}")
        ws[~eligible] = -np.inf
    span_a, span_b = _span(w_a, max_overlap), _span(w_b, max_overlap)
    kept: List[Window] = []
    while len(kept) < top_k:
        flat = int(np.argmax(ws))
        i, j = divmod(flat, ws.shape[1])
        best = ws[i, j]
        if not np.isfinite(best) or best < threshold:
            break
        kept.append(Window(i, j, w_a, w_b, float(best)))
        rows = slice(max(0, i - span_a), i + span_a + 1)
        cols = slice(None) if suppress == "map" else slice(max(0, j - span_b), j + span_b + 1)
        ws[rows, cols] = -np.inf
    return kept
