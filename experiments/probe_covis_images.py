"""Diagnostic: how much do the backbone tokens add over the pixels for choosing a map window?
(docs/COVISIBILITY.md, "Honest assessment".)

Window selection as ``g2g-covis sim-eval`` scores it (W = 4, map = traversal 0, queries = runs of
traversal 1, same camera): the frame's colour image shrunk to 8 / 16 / 32 px, compared like the
tokens (map-whitened similarity, and a cosine after map standardisation), next to the tokens.
This measurement led to the image covisibility embedding
(:mod:`g2g_model.covisibility.image_embedding`, ``g2g-covis train-image-embedding``; its rates
come from ``g2g-covis sim-eval --image-embedding``).

    python experiments/probe_covis_images.py --scenes data/sim_val

``--cache`` is the scene token cache of ``g2g-covis`` (the frames are encoded once).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Dict, List

import numpy as np
import torch
import torch.nn.functional as F

from g2g_model.covisibility import sim_data, sim_eval
from g2g_model.covisibility.evaluate import window_selection_accuracy
from g2g_model.covisibility.image_embedding import shrink
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint
from g2g_model.covisibility.window_scores import (
    MapWhitening, token_statistics, whitened_similarity,
)

WINDOW = 4


def scene_frames(scenes: str, cache: str) -> List[sim_data.SceneFrames]:
    pipe = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    return [sim_data.load_scene_frames(pipe, s, 2, cache_dir=cache)
            for s in sim_data.scene_dirs(scenes)]


def frame_images(scene, frames: sim_data.SceneFrames, size: int) -> torch.Tensor:
    """``[F, 3, size, size]`` uint8: every frame of ``frames``, area-downsampled."""
    return torch.stack([shrink(rgb, size) for rgb in sim_data.scene_images(scene, frames)])


def map_whitened(frames: sim_data.SceneFrames) -> Callable:
    """Map-whitened similarity of these (token or pixel) frames, fitted on traversal 0."""
    whitening = MapWhitening.fit(frames.tokens[torch.from_numpy(frames.traversal == 0)])
    return lambda a, b: whitened_similarity(a, b, whitening)


def standardised_cosine(frames: sim_data.SceneFrames) -> Callable:
    """Cosine of the flattened descriptors after standardising with the map's statistics."""
    mean, std = token_statistics(frames.tokens[torch.from_numpy(frames.traversal == 0)])

    def score(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        za = F.normalize(((a.float() - mean) / std).flatten(1), dim=-1)
        zb = F.normalize(((b.float() - mean) / std).flatten(1), dim=-1)
        return (za @ zb.T).numpy()
    return score


def report(trues: List[np.ndarray], preds: Dict[str, List[np.ndarray]]) -> None:
    for name, pred in preds.items():
        acc = window_selection_accuracy(trues, pred, WINDOW)
        print(f"{name:24s} within 0.1 of best: {acc['within_tolerance']:.3f}  "
              f"mean gap {acc['mean_gap']:.3f}  ({acc['queries']} queries)")


def thumbnails(args) -> None:
    trues: List[np.ndarray] = []
    preds: Dict[str, List[np.ndarray]] = {}
    for scene, frames in zip(sim_data.scene_dirs(args.scenes),
                             scene_frames(args.scenes, args.cache)):
        variants = {"tokens": frames}
        for size in (8, 16, 32):
            pixels = frame_images(scene, frames, size).float().flatten(2).transpose(1, 2)
            variants[f"rgb{size}"] = dataclasses.replace(frames, tokens=pixels)
        for name, v in variants.items():
            queries, scored = sim_eval.scored_window_queries(
                v, WINDOW, {"whitened": map_whitened(v),
                            "standardised": standardised_cosine(v)})
            if name == "tokens":
                trues += queries.trues
            for kind, p in scored.items():
                preds.setdefault(f"{name} {kind}", []).extend(p)
    report(trues, preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default="outputs/covis_embedding/token_cache",
                        help="g2g-covis scene token cache (tools/train_covis_embedding.sh)")
    parser.add_argument("--scenes", required=True, help="directory of sim scene_* folders")
    args = parser.parse_args()
    torch.set_num_threads(2)
    thumbnails(args)


if __name__ == "__main__":
    main()
