"""Score every (map frame, query frame) pair from cached tokens in batched passes.

The per-frame part of the decoder (pooling, projection, positions) runs once per frame; only the
joint attention runs per pair, ``batch_size`` pairs at a time, under ``torch.inference_mode``
and optionally bf16 autocast (about 2-3x faster on AVX-512 CPUs, see
benchmarks/RESULTS_covisibility.md).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Optional

import numpy as np
import torch

from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.precision import autocast

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class CovisibilityScores:
    """Scores of all pairs, rows = map frames (a), columns = query frames (b).

    Attributes:
        score: ``[T_A, T_B]`` symmetric score ``o = min(r_ab, r_ba)``.
        r_ab: ``[T_A, T_B]`` predicted fraction of map frame a seen in query frame b.
        r_ba: ``[T_A, T_B]`` predicted fraction of query frame b seen in map frame a.
    """

    score: np.ndarray
    r_ab: np.ndarray
    r_ba: np.ndarray


def embed_frames(model: CovisibilityDecoder, tokens: torch.Tensor, batch_size: int = 256,
                 bf16: bool = False) -> torch.Tensor:
    """Run the per-frame part of the decoder over ``tokens [T, P, D]`` -> ``[T, P', dim]``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = next(model.parameters()).device
    out = []
    with torch.inference_mode(), autocast(device, torch.bfloat16 if bf16 else None, inherit=True):
        for start in range(0, tokens.shape[0], batch_size):
            out.append(model.embed(tokens[start:start + batch_size].to(device)))
    return torch.cat(out) if out else tokens.new_zeros((0,))


def score_matrix(
    model: CovisibilityDecoder,
    tokens_a: torch.Tensor,
    tokens_b: torch.Tensor,
    batch_size: int = 256,
    bf16: bool = False,
    device: Optional[torch.device] = None,
) -> CovisibilityScores:
    """Covisibility of every pair of a map segment and a query segment.

    Args:
        model: the decoder (switched to eval mode for the call, then restored).
        tokens_a: ``[T_A, P, D]`` cached encoder tokens of the map frames (float16 is fine).
        tokens_b: ``[T_B, P, D]`` encoder tokens of the query frames.
        batch_size: pairs per decoder pass.
        bf16: run under bf16 autocast.
        device: where to run (default: the model's device).

    Returns:
        :class:`CovisibilityScores` of ``[T_A, T_B]`` float32 arrays.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for name, t in (("tokens_a", tokens_a), ("tokens_b", tokens_b)):
        if t.dim() != 3:
            raise ValueError(f"{name} must be [T, P, D], got {list(t.shape)}")
    if device is not None:
        model = model.to(device)
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        emb_a = embed_frames(model, tokens_a, bf16=bf16)
        emb_b = embed_frames(model, tokens_b, bf16=bf16)
        t_a, t_b = tokens_a.shape[0], tokens_b.shape[0]
        r_ab = torch.empty(t_a * t_b)
        r_ba = torch.empty(t_a * t_b)
        with torch.inference_mode(), autocast(dev, torch.bfloat16 if bf16 else None, inherit=True):
            for start in range(0, t_a * t_b, batch_size):
                flat = torch.arange(start, min(start + batch_size, t_a * t_b), device=dev)
                out = model.decode(emb_a[flat // t_b], emb_b[flat % t_b], dense=False)
                r_ab[start:start + len(flat)] = out["r_ab"].float().cpu()
                r_ba[start:start + len(flat)] = out["r_ba"].float().cpu()
    finally:
        model.train(was_training)
    r_ab_np = r_ab.view(t_a, t_b).numpy()
    r_ba_np = r_ba.view(t_a, t_b).numpy()
    LOG.debug("scored %d x %d pairs", t_a, t_b)
    return CovisibilityScores(score=np.minimum(r_ab_np, r_ba_np), r_ab=r_ab_np, r_ba=r_ba_np)
