"""Covisibility embedding: a per-frame descriptor whose cosine approximates two frames' overlap.

A companion of the covisibility decoder (:mod:`g2g_model.covisibility.model`) for choosing map
windows. The decoder looks at both frames together (a cross-encoder); the embedding describes
each frame on its own (a bi-encoder), so scoring a ``T_A x T_B`` matrix is one matrix product:

1. a frame's cached encoder tokens ``[P, D]`` are standardised per patch and channel with the
   statistics of the map they are compared in (:func:`token_statistics`; in training, of their
   scene). What all frames of a map share drops out; what tells its places apart remains;
2. flattened and projected linearly to ``dim`` values, then normalised to unit length;
3. the score of two frames is the cosine of their descriptors.

Training (:func:`train_embedding`) uses the decoder's sample files (pairs of simulator frames
with depth-labelled overlap ratios): PCA whitening of the standardised training frames to
``pca_dims``, then a linear ``dim x pca_dims`` head trained with Adam so that the cosine
regresses the pair's symmetric overlap ``min(r_ab, r_ba)`` (MSE). The two linear maps are folded
into the one ``dim x (P * D)`` projection that is stored.

Checkpoint: a tagged safetensors file (``g2g_covis_embedding``, version 1) with the projection,
the token grid, the training settings and the encoder id ``{"name", "config_hash"}``; loading
checks the encoder like the decoder's checkpoints do.
"""

from __future__ import annotations

import logging
import time
from typing import Dict, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from g2g_model.covisibility.checkpoint import CheckpointError, check_encoder
from g2g_model.covisibility.samples import CovisibilitySamples
from g2g_model.tagged_safetensors import read_tagged, write_tagged
from g2g_model.covisibility.window_scores import token_statistics

LOG = logging.getLogger(__name__)

HEADER_KEY = "g2g_covis_embedding"
VERSION = 1
# Chosen on the validation scenes (docs/COVISIBILITY.md).
EMBEDDING_DEFAULTS = {"dim": 64, "pca_dims": 256, "steps": 3000}


class CovisibilityEmbedding(torch.nn.Module):
    """Unit descriptors ``[T, dim]`` of map-standardised frame tokens ``[T, P, D]``."""

    def __init__(self, num_patches: int, in_dim: int, dim: int = 64):
        super().__init__()
        if min(num_patches, in_dim, dim) < 1:
            raise ValueError(f"num_patches, in_dim and dim must be >= 1, got {num_patches}, "
                             f"{in_dim}, {dim}")
        self.num_patches, self.in_dim, self.dim = num_patches, in_dim, dim
        self.register_buffer("projection", torch.zeros(dim, num_patches * in_dim))

    def forward(self, standardised: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(standardised).float()
        if x.dim() != 3 or x.shape[1:] != (self.num_patches, self.in_dim):
            raise ValueError(f"tokens must be [T, {self.num_patches}, {self.in_dim}], got "
                             f"{list(x.shape)}")
        return F.normalize(x.flatten(1) @ self.projection.T, dim=-1)

    def describe(self, tokens: torch.Tensor, stats: Tuple[torch.Tensor, torch.Tensor]
                 ) -> torch.Tensor:
        """Descriptors of raw tokens, standardised with the map's ``stats = (mean, std)``."""
        mean, std = stats
        return self((torch.as_tensor(tokens).float() - mean) / std)


def embedding_similarity(model: CovisibilityEmbedding, map_tokens: torch.Tensor,
                         query_tokens: torch.Tensor,
                         stats: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
                         ) -> np.ndarray:
    """Scores ``[T_A, T_B]`` (cosines, trained to approximate the symmetric overlap).

    ``stats``: the map's :func:`token_statistics` (computed from ``map_tokens`` when None;
    compute them once from the whole map and pass them when scoring parts of it)."""
    stats = stats if stats is not None else token_statistics(map_tokens)
    with torch.no_grad():
        return (model.describe(map_tokens, stats) @ model.describe(query_tokens, stats).T).numpy()


def _standardise_per_scene(samples: CovisibilitySamples) -> torch.Tensor:
    """``[F, P * D]`` frames standardised with the statistics of their scene."""
    frames = samples.frames.float()
    scene = samples.scene
    if scene is None:
        scene = torch.zeros(len(frames), dtype=torch.long)
    out = torch.empty_like(frames)
    for sid in scene.unique():
        sel = scene == sid
        if int(sel.sum()) < 2:
            raise ValueError(f"scene {int(sid)} has fewer than 2 frames")
        mean, std = token_statistics(frames[sel])
        out[sel] = (frames[sel] - mean) / std
    return out.flatten(1)


def train_embedding(samples: CovisibilitySamples, dim: int = EMBEDDING_DEFAULTS["dim"],
                    pca_dims: int = EMBEDDING_DEFAULTS["pca_dims"],
                    steps: int = EMBEDDING_DEFAULTS["steps"], batch_size: int = 512,
                    lr: float = 1e-3, pca_frames: int = 4000, seed: int = 0, progress: bool = True
                    ) -> Tuple[CovisibilityEmbedding, Dict]:
    """Fit an embedding on labelled pairs (see the module docstring). Returns the model and a
    record of the settings and the final training loss."""
    if len(samples) == 0:
        raise ValueError("no training pairs")
    if min(dim, pca_dims, steps, batch_size) < 1 or not lr > 0:
        raise ValueError("dim, pca_dims, steps, batch_size must be >= 1 and lr > 0")
    t0 = time.monotonic()
    gen = torch.Generator().manual_seed(seed)
    z = _standardise_per_scene(samples)
    pick = torch.randperm(len(z), generator=gen)[:pca_frames]
    sub = z[pick].double()
    centre = sub.mean(0)
    _, sing, vh = torch.linalg.svd(sub - centre, full_matrices=False)
    k = min(pca_dims, len(sing))
    dim = min(dim, k)
    # Whitened principal directions: unit variance on the training frames.
    pca = (vh[:k] / (sing[:k, None] / np.sqrt(len(sub)))).float()  # [k, P*D]
    reduced = z @ pca.T
    head = torch.nn.Parameter(torch.eye(k)[:dim] + 0.01 * torch.randn(dim, k, generator=gen))
    opt = torch.optim.Adam([head], lr=lr)
    pairs = samples.pairs
    target = samples.ratios.float().min(1).values
    loss_value = float("nan")
    for step in tqdm(range(steps), disable=not progress, desc="embedding", dynamic_ncols=True):
        idx = torch.randint(len(pairs), (batch_size,), generator=gen)
        a = F.normalize(reduced[pairs[idx, 0]] @ head.T, dim=-1)
        b = F.normalize(reduced[pairs[idx, 1]] @ head.T, dim=-1)
        loss = F.mse_loss((a * b).sum(-1), target[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_value = float(loss.detach())
    _, p, d = samples.frames.shape
    model = CovisibilityEmbedding(p, d, dim)
    # Per-scene standardised frames have zero mean, so the projection applies to them without
    # centring, as it does at run time to map-standardised tokens.
    model.projection.copy_(head.detach() @ pca)
    record = {"dim": dim, "pca_dims": k, "steps": steps, "batch_size": batch_size, "lr": lr,
              "pca_frames": len(sub), "seed": seed, "pairs": len(pairs),
              "frames": len(samples.frames), "final_mse": round(loss_value, 5),
              "seconds": round(time.monotonic() - t0, 1)}
    LOG.info("covisibility embedding trained: %s", record)
    return model, record


def save_embedding(path, model: CovisibilityEmbedding, encoder: Dict, training: Dict):
    header = {"version": VERSION, "num_patches": model.num_patches, "in_dim": model.in_dim,
              "dim": model.dim, "encoder": dict(encoder), "training": training}
    return write_tagged(path, HEADER_KEY, header,
                        {"projection": model.projection.to(torch.float16).contiguous()})


def load_embedding(path, expect_encoder: Optional[Dict] = None
                   ) -> Tuple[CovisibilityEmbedding, Dict]:
    """Load strictly; ``CheckpointError`` names what is wrong (missing, corrupt, other
    version, other encoder, wrong shape)."""
    header, tensors = read_tagged(path, HEADER_KEY, VERSION, "covisibility embedding",
                                  CheckpointError)
    check_encoder(header.get("encoder"), expect_encoder, f"covisibility embedding {path}")
    try:
        model = CovisibilityEmbedding(int(header["num_patches"]), int(header["in_dim"]),
                                      int(header["dim"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"covisibility embedding {path} has a bad header ({exc})") from None
    proj = tensors.get("projection")
    if set(tensors) != {"projection"} or proj is None or \
            proj.shape != model.projection.shape or not torch.isfinite(proj).all():
        raise CheckpointError(
            f"covisibility embedding {path} does not fit its header: tensors "
            f"{ {k: list(v.shape) for k, v in tensors.items()} }, expected projection "
            f"{list(model.projection.shape)} (finite)")
    model.projection.copy_(proj.float())
    return model.eval(), header
