"""2D-3D matches of one query image against the points of a map window (relocalization's
verifier, :mod:`.verification`).

A map point seen in several map frames has several descriptors, so the ratio test compares the
nearest descriptor with the nearest one of ANOTHER point (more than ``SAME_POINT_M`` away);
matches must also be mutual nearest neighbours. At most ``max_matches_per_frame`` of the most
distinctive are kept: the solver's RANSAC cost grows with the number of matches and steeply with
the outlier share. While tracking, the candidates may be restricted to the points an accurate
prior projects near each keypoint (:mod:`.projection_guidance`).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch

from g2g_model.localization.local_features import Features
from g2g_model.localization.projection_guidance import NO_RIVAL_DISTANCE
from g2g_model.localization.verifier_config import VerifierConfig

# Map-point descriptors closer than this in space belong to the same point (ratio test).
SAME_POINT_M = 0.05
# A masked candidate's similarity: unit descriptors are never this far apart.
MASKED = -4.0


def point_matches(feats: Features, points: np.ndarray, descs: np.ndarray, cfg: VerifierConfig,
                  allowed: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(keypoints [M, 2], points [M, 3])``: the query keypoints ``feats`` matched to the map
    window's ``points`` ``[P, 3]`` with descriptors ``descs`` ``[P, D]`` (module docstring).
    ``allowed``: optional ``[N, P]`` bool, the only candidate pairs; a keypoint whose nearest
    allowed point has no allowed rival must then be nearer than ``ratio * NO_RIVAL_DISTANCE``."""
    empty = (np.zeros((0, 2)), np.zeros((0, 3)))
    if len(feats.descriptors) < 2 or len(descs) < 2:
        return empty
    # Unit descriptors: squared distance = 2 - 2 cosine. One matrix product (torch:
    # multi-threaded) instead of a brute-force matcher per map frame.
    sim = torch.from_numpy(feats.descriptors) @ torch.from_numpy(descs).T
    if allowed is not None:
        sim.masked_fill_(~torch.from_numpy(allowed), MASKED)
    k = min(6, len(descs))
    best_sim, top = (t.numpy() for t in torch.topk(sim, k, dim=1))
    # Mutual check only where it matters: the best query keypoint of each map descriptor that
    # some query keypoint chose (a column argmax over those columns, not all P).
    cols = np.unique(top[:, 0])
    best_query = np.full(len(descs), -1)
    best_query[cols] = sim[:, torch.from_numpy(cols)].argmax(0).numpy()
    dist = np.sqrt(np.maximum(2.0 - 2.0 * best_sim, 0.0))
    other = np.linalg.norm(points[top[:, 1:]] - points[top[:, :1]], axis=2) > SAME_POINT_M
    second = np.where(other.any(1), other.argmax(1) + 1, k - 1)
    rival = dist[np.arange(len(dist)), second]
    if allowed is not None:
        rival = np.minimum(rival, NO_RIVAL_DISTANCE)
    ratio = dist[:, 0] / np.maximum(rival, 1e-9)
    mutual = best_query[top[:, 0]] == np.arange(len(top))
    keep = np.flatnonzero((ratio < cfg.ratio) & mutual & (best_sim[:, 0] > MASKED / 2))
    keep = keep[np.argsort(ratio[keep])][:cfg.max_matches_per_frame]
    return (feats.keypoints[keep].astype(float).reshape(-1, 2),
            points[top[keep, 0]].astype(float).reshape(-1, 3))
