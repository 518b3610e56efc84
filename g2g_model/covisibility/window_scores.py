"""Choosing the map window to align a query window against, from per-frame scores.

Four sources of frame-pair scores feed the same window scoring:

* the covisibility decoder (:mod:`g2g_model.covisibility.model`), whose scores are overlap ratios;
* the covisibility embedding (:mod:`g2g_model.covisibility.embedding`, the relocalize node's
  default): cosines of per-frame descriptors of map-standardised tokens (:func:`token_statistics`),
  trained to approximate the overlap;
* map-whitened token similarity (:func:`whitened_similarity`, no model): each
  frame's flattened tokens are standardised and PCA-whitened with statistics of the map itself,
  then compared by cosine. What all frames of the map share (the encoder's bias, the scene's
  look) drops out, and what tells one place of this map from another is kept. No training; the
  map's statistics are fitted once when the map is loaded;
* the cosine similarity of mean-pooled per-frame encoder tokens (a global descriptor).

The last two give similarities, NOT overlaps.

A window's score is the max-mean aggregation of ARCHITECTURE §3: the mean over the window's
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


def token_statistics(tokens: torch.Tensor, min_std: float = 1e-3
                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per patch and channel ``(mean, std)`` ``[P, D]`` of frames ``[F >= 2, P, D]`` (std clamped
    to ``min_std``): the map statistics that map-relative scorers standardise tokens with."""
    x = torch.as_tensor(tokens)
    if x.dim() != 3 or x.shape[0] < 2:
        raise ValueError(f"map tokens must be [F >= 2, P, D], got {list(x.shape)}")
    x = x.float()
    if not torch.isfinite(x).all():
        raise ValueError("map tokens contain NaN or Inf")
    return x.mean(0), x.std(0).clamp(min=min_std)


WHITENING_DIMS = 48
WHITENING_SHRINKAGE = 0.3


class MapWhitening:
    """Per-map statistics of flattened frame tokens: standardisation, then PCA whitening.

    ``transform(tokens)`` = unit-norm ``((x - mean) / std) @ basis.T / sqrt(var + s * mean var)``
    with ``x`` a frame's ``P x D`` tokens flattened, ``basis`` the first ``dims`` principal
    directions of the map's standardised frames and ``var`` their variances; the shrinkage ``s``
    keeps weak directions from being blown up. Dims 48 and shrinkage 0.3 were chosen on
    simulator scenes 0-5 (training split) and 10000-10001 (validation); docs/COVISIBILITY.md.
    """

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, basis: torch.Tensor,
                 scale: torch.Tensor):
        self.mean, self.std, self.basis, self.scale = mean, std, basis, scale

    @property
    def dims(self) -> int:
        return int(self.basis.shape[0])

    @classmethod
    def fit(cls, map_tokens: torch.Tensor, dims: int = WHITENING_DIMS,
            shrinkage: float = WHITENING_SHRINKAGE, max_frames: int = 1000,
            min_std: float = 1e-3, seed: int = 0) -> "MapWhitening":
        """Fit on the map's tokens ``[F, P, D]``.

        The standardisation uses every frame; the principal directions a seeded subset of
        ``max_frames`` (from the ``n x n`` Gram matrix, ~1 s for 1,000 frames of ``[49, 192]``
        tokens on 2 cores). Directions the frames do not span (``n - 1`` at most) are left out.
        Raises ``ValueError`` on fewer than 2 frames, a wrong shape or non-finite tokens.
        """
        if dims < 1 or shrinkage < 0 or max_frames < 2:
            raise ValueError(f"need dims >= 1, shrinkage >= 0, max_frames >= 2 (got {dims}, "
                             f"{shrinkage}, {max_frames})")
        x = torch.as_tensor(map_tokens).float()
        mean, std = token_statistics(x, min_std)
        if x.shape[0] > max_frames:
            gen = torch.Generator().manual_seed(seed)
            x = x[torch.randperm(x.shape[0], generator=gen)[:max_frames]]
        z = ((x - mean) / std).flatten(1).double()
        z = z - z.mean(0)
        evals, evecs = torch.linalg.eigh(z @ z.T)  # ascending
        evals, evecs = evals.flip(0), evecs.flip(1)
        k = min(dims, int((evals > 1e-9 * evals[0].clamp(min=1e-30)).sum()))
        if k < 1:
            raise ValueError("map tokens do not vary from frame to frame")
        basis = (z.T @ evecs[:, :k]) / evals[:k].sqrt()  # [P*D, k], orthonormal columns
        var = evals[:k] / x.shape[0]
        scale = 1.0 / torch.sqrt(var + shrinkage * var.mean())
        return cls(mean, std, basis.T.float().contiguous(), scale.float())

    def transform(self, tokens: torch.Tensor) -> torch.Tensor:
        """Unit-norm whitened descriptors ``[T, dims]`` of frames ``[T, P, D]``."""
        x = torch.as_tensor(tokens).float()
        if x.dim() != 3 or x.shape[1:] != self.mean.shape:
            raise ValueError(f"tokens must be [T, {self.mean.shape[0]}, {self.mean.shape[1]}] "
                             f"like the map's, got {list(x.shape)}")
        z = ((x - self.mean) / self.std).flatten(1)
        return torch.nn.functional.normalize((z @ self.basis.T) * self.scale, dim=-1)


def whitened_similarity(map_tokens: torch.Tensor, query_tokens: torch.Tensor,
                        whitening: Optional[MapWhitening] = None) -> np.ndarray:
    """Cosine similarity ``[T_A, T_B]`` of map-whitened frame descriptors (:class:`MapWhitening`,
    fitted on ``map_tokens`` when not given; fit it once per map and pass it)."""
    whitening = whitening if whitening is not None else MapWhitening.fit(map_tokens)
    return (whitening.transform(map_tokens) @ whitening.transform(query_tokens).T).numpy()


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
