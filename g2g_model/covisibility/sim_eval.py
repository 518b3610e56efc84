"""Held-out covisibility evaluation on simulator scenes (``g2g-covis sim-eval``).

:func:`evaluate_scenes` adds two query protocols to the pair metrics: frame retrieval (each query
frame of traversal 1 against every frame of traversal 0) and map window selection (per camera, a
query segment of W frames against the whole map traversal). Both score with the relocalize
node's own window selection (:class:`~g2g_model.localization.window_selector.WindowSelector`),
prepared on traversal 0 of the scene as a map (:mod:`g2g_model.covisibility.sim_selection`).
The scenes' frames, overlaps and labelled pairs come from :mod:`g2g_model.covisibility.sim_data`.
"""


from __future__ import annotations

import logging
import pathlib
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from g2g_model.covisibility.evaluate import (evaluate, frame_retrieval_hits,
                                             picked_window_accuracy, window_selection_accuracy)
from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.covisibility.retrieval import window_scores
from g2g_model.covisibility.samples import concat_samples
from g2g_model.covisibility.scoring import score_matrix
from g2g_model.covisibility.sim_data import (DEFAULT_THRESHOLD, SceneFrames, balanced_pairs,
                                             load_scene_frames, scene_images, scene_overlap,
                                             scene_samples)
from g2g_model.covisibility.sim_selection import (query_group, scene_map, selector_ranking,
                                                  selector_scorer, sim_selectors)
from g2g_model.data.overlap import overlap_matrix
from g2g_model.covisibility.window_scores import descriptor_similarity

LOG = logging.getLogger(__name__)


def retrieval_pairs(frames: SceneFrames, query_every: int = 5) -> np.ndarray:
    """Pairs ``[N, 2]`` (query, candidate): every ``query_every``-th frame of traversal 1 (all
    cameras) against every frame of traversal 0 (all cameras)."""
    queries = np.flatnonzero(frames.traversal == 1)[::query_every]
    cands = np.flatnonzero(frames.traversal == 0)
    if not len(queries) or not len(cands):
        raise ValueError(f"scene {frames.scene} needs traversals 0 and 1 for retrieval")
    return np.stack(np.meshgrid(queries, cands, indexing="ij"), -1).reshape(-1, 2)


class WindowQueries(NamedTuple):
    """The window-selection queries of a scene, in the same order in every field.

    Attributes:
        trues: per query, the true ``[T_map, W]`` symmetric overlap matrix.
        preds: per query, the predicted ``[T_map, W]`` scores.
        positions: per query, ``(map_positions [T_map, 3], query_position [3])``: the map
            frames' camera centres and the mean camera centre of the query frames (world
            frame), from which position hints are made.
        frames: per query, ``(map frame indices [T_map], query frame indices [W])`` into the
            scene's frames (the rows and columns of ``trues``).
    """

    trues: List[np.ndarray]
    preds: List[np.ndarray]
    positions: List[Tuple[np.ndarray, np.ndarray]]
    frames: List[Tuple[np.ndarray, np.ndarray]]


def scored_window_queries(frames: SceneFrames, window: int, scorers: Dict[str, Callable],
                          min_best: float = DEFAULT_THRESHOLD,
                          frame_scorers: Optional[Dict[str, Callable]] = None
                          ) -> Tuple[WindowQueries, Dict[str, List[np.ndarray]]]:
    """Every window-selection query of a scene, scored by several scorers at once.

    Per camera, the map is traversal 0 and each query is a run of ``window`` consecutive
    (subsampled) frames of traversal 1 (every start). Queries whose best true window overlap is
    below ``min_best`` (nothing of the map is seen) are left out. The true overlaps are computed
    once; each scorer ``(map_tokens, query_tokens) -> [T_map, T_query]`` scores the same queries
    (e.g. :func:`decoder_scorer`); each of ``frame_scorers`` ``(map_indices, query_indices) ->
    [T_map, T_query]`` scores them from frame indices (the relocalize node's window selectors:
    :func:`~g2g_model.covisibility.sim_selection.selector_scorer`).

    Returns:
        the queries (``preds`` empty) and ``{scorer name: per-query [T_map, W] scores}``.
    """
    out = WindowQueries([], [], [], [])
    frame_scorers = frame_scorers or {}
    preds: Dict[str, List[np.ndarray]] = {name: [] for name in [*scorers, *frame_scorers]}
    for cam in np.unique(frames.camera):
        m, q = frames.select(0, cam), frames.select(1, cam)
        if len(m) < window or len(q) < window:
            continue
        true = overlap_matrix(frames.depth[m], frames.intrinsics[m], frames.world_T_cam[m],
                              frames.depth[q], frames.intrinsics[q], frames.world_T_cam[q],
                              size=None)
        scored = {name: fn(frames.tokens[m], frames.tokens[q]) for name, fn in scorers.items()}
        scored.update({name: fn(m, q) for name, fn in frame_scorers.items()})
        map_positions = frames.world_T_cam[m][:, :3, 3]
        for start in range(0, len(q) - window + 1):
            t = true[:, start:start + window]
            if window_scores(t, window).max() >= min_best:
                out.trues.append(t)
                for name, pred in scored.items():
                    preds[name].append(pred[:, start:start + window])
                query_position = frames.world_T_cam[q[start:start + window], :3, 3].mean(0)
                out.positions.append((map_positions, query_position))
                out.frames.append((m, q[start:start + window]))
    return out, preds


def decoder_scorer(model: CovisibilityDecoder) -> Callable:
    """The covisibility decoder as a ``(map_tokens, query_tokens) -> [T_A, T_B]`` scorer."""
    return lambda map_tokens, query_tokens: score_matrix(model, map_tokens, query_tokens).score


def window_queries(model: Optional[CovisibilityDecoder], frames: SceneFrames, window: int,
                   min_best: float = DEFAULT_THRESHOLD,
                   similarity: Callable = descriptor_similarity) -> WindowQueries:
    """:func:`scored_window_queries` with one scorer: ``model`` (the decoder), or when it is
    None ``similarity`` (default: the mean-pooled descriptor cosine)."""
    scorer = decoder_scorer(model) if model is not None else similarity
    out, preds = scored_window_queries(frames, window, {"only": scorer}, min_best)
    return out._replace(preds=preds["only"])


def noisy_hints(positions: Sequence[Tuple[np.ndarray, np.ndarray]], sigma: float,
                rng: np.random.Generator) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Position hints: each query's true position plus isotropic Gaussian noise (``sigma`` m
    per axis), as a pose prior from odometry or ``/initialpose`` would give."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    return [(m, q + rng.normal(0.0, sigma, 3) if sigma > 0 else q) for m, q in positions]


def evaluate_scenes(model: CovisibilityDecoder, pipeline, scenes: Sequence, dense_hw,
                    stride: int = 2, pairs_per_scene: int = 2000, window: int = 4,
                    seed: int = 12345, cache_dir=None, query_every: int = 5,
                    hint_radius: Optional[float] = None, hint_sigma: float = 0.0,
                    embedding=None, image_embedding=None, pair_verifier=None,
                    verify_top_k: int = 8, verify_weight: float = 1.0) -> Dict:
    """Held-out metrics on sim scenes (tokens of ``pipeline``'s encoder).

    Returns ``{"balanced": evaluate() on balanced pairs, "retrieval": evaluate() on the
    retrieval pairs (natural distribution; its retrieval_top1/5 are the frame-retrieval
    numbers), "window": window_selection_accuracy(), "baseline_descriptor": retrieval and window
    numbers of the descriptor-similarity fallback, "whitened": the same for the map-whitened
    similarity, "scenes": names}``. With ``hint_radius``,
    also ``"window_hint"`` (and the baseline's): the same queries when only map windows within
    ``hint_radius`` of a position hint (true position + ``hint_sigma`` noise, seeded) may be
    picked. With ``embedding`` (a :class:`~g2g_model.covisibility.embedding.
    CovisibilityEmbedding`, the relocalize node's default scorer), also ``"embedding"``: the
    same for it (map statistics of traversal 0). With ``image_embedding`` (an
    :class:`~g2g_model.covisibility.image_embedding.ImageEmbedding`), also ``"image"`` and,
    with both, ``"combined"`` (their mean: the node's default ``window_scorer``). With all three
    and ``pair_verifier`` (a :class:`~g2g_model.covisibility.pair_verifier.PairVerifier`), also
    ``"verified"``: the combined scorer's ``verify_top_k`` best windows re-ranked by the
    verifier with ``verify_weight`` (as the relocalize node does), and ``candidates_best``, the
    rate at which the best candidate is within tolerance (what any re-ranking can reach).
    With an embedding, also ``"per_scene"``: ``{scorer: {scene: window report}}`` of the
    embedding scorers and ``verified`` (the window-pick rate varies between scenes).
    """
    verify = pair_verifier is not None and embedding is not None and image_embedding is not None
    verified_starts, best_candidates = [], []
    balanced, natural, trues, positions, scene_ends = [], [], [], [], []
    names = ["decoder", "descriptor", "whitened"]
    if embedding is not None:
        names.append("embedding")
    if image_embedding is not None:
        names += ["image"] + (["combined"] if embedding is not None else [])
    preds: Dict[str, List[np.ndarray]] = {name: [] for name in names}
    hits: Dict[str, list] = {name: [] for name in names if name != "decoder"}
    for sid, scene in enumerate(scenes):
        frames = load_scene_frames(pipeline, scene, stride, cache_dir=cache_dir)
        overlap = scene_overlap(frames)
        rng = np.random.default_rng([seed, sid])
        balanced.append(scene_samples(frames, balanced_pairs(overlap, pairs_per_scene, rng),
                                      dense_hw, sid))
        pairs = retrieval_pairs(frames, query_every)
        natural.append(scene_samples(frames, pairs, dense_hw, sid))
        # Every similarity scorer is the relocalize node's WindowSelector, prepared on the map
        # (traversal 0, all cameras); the decoder is scored as a pair model.
        images = scene_images(scene, frames)
        gmap, rows = scene_map(frames, images)
        selectors = sim_selectors(window, embedding, image_embedding,
                                  pair_verifier if verify else None, verify_top_k,
                                  verify_weight)
        for selector in selectors.values():
            selector.prepare(gmap, f"scene {frames.scene}")
        frame_scorers = {name: selector_scorer(sel, frames, images, rows)
                         for name, sel in selectors.items() if name != "verified"}
        queries, scored = scored_window_queries(frames, window, {"decoder": decoder_scorer(model)},
                                                frame_scorers=frame_scorers)
        if verify:
            for true, (m, q) in zip(queries.trues, queries.frames):
                ranked = selector_ranking(selectors["verified"], frames, images, rows, m, q)
                verified_starts.append(ranked[0][0])
                true_ws = window_scores(true, window)[:, 0]
                best_candidates.append(max(true_ws[i] for i, _, _ in ranked) - true_ws.max())
        trues += queries.trues
        positions += queries.positions
        scene_ends.append(len(trues))
        true = natural[-1].ratios.min(1).values.numpy()
        for name, values in scored.items():
            preds[name] += values
            if name in hits:  # frame retrieval of the similarity scorers: query x map frame
                every = np.arange(len(frames))
                full = selectors[name].frame_scores(query_group(frames, images, every),
                                                    frames.tokens)
                hits[name].append((pairs[:, 0] + 100_000 * sid, true,
                                   full[rows[pairs[:, 1]], pairs[:, 0]]))
    nat = concat_samples(natural)

    def similarity_report(name: str) -> Dict:
        # Query ids are unique over scenes: offset by 100,000 per scene above.
        return {"retrieval": frame_retrieval_hits(*(np.concatenate(x)
                                                    for x in zip(*hits[name]))),
                "window": window_selection_accuracy(trues, preds[name], window)}

    out = {
        "balanced": evaluate(model, concat_samples(balanced)),
        "retrieval": evaluate(model, nat),
        "window": dict(window_selection_accuracy(trues, preds["decoder"], window),
                       window=window),
        "baseline_descriptor": similarity_report("descriptor"),
        "whitened": similarity_report("whitened"),
        "scenes": [pathlib.Path(s).name for s in scenes],
    }
    for name in ("embedding", "image", "combined"):
        if name in preds:
            out[name] = similarity_report(name)
    if verify:
        out["verified"] = {
            "window": picked_window_accuracy(trues, verified_starts, window),
            "candidates_best": float(np.mean(np.asarray(best_candidates) >= -0.1 - 1e-12)),
            "top_k": verify_top_k, "weight": verify_weight}
    # Each scene's window report: queries a:b of the scorer's picks.
    per_scene = {name: lambda a, b, name=name: window_selection_accuracy(
        trues[a:b], preds[name][a:b], window)
        for name in ("embedding", "image", "combined") if name in preds}
    if per_scene:
        if verify:
            per_scene["verified"] = lambda a, b: picked_window_accuracy(
                trues[a:b], verified_starts[a:b], window)
        spans = list(zip([0] + scene_ends[:-1], scene_ends))
        out["per_scene"] = {name: {pathlib.Path(scene).name: report(a, b)
                                   for scene, (a, b) in zip(scenes, spans)}
                            for name, report in per_scene.items()}
    if hint_radius is not None:
        hints = noisy_hints(positions, hint_sigma, np.random.default_rng([seed, 7]))
        restrict = dict(hints=hints, radius=hint_radius)
        out["window_hint"] = dict(
            window_selection_accuracy(trues, preds["decoder"], window, **restrict),
            window=window, radius=hint_radius, sigma=hint_sigma)
        for key, name in (("baseline_descriptor", "descriptor"), ("whitened", "whitened"),
                          ("embedding", "embedding"), ("image", "image"),
                          ("combined", "combined")):
            if name in preds:
                out[key]["window_hint"] = window_selection_accuracy(trues, preds[name], window,
                                                                    **restrict)
    return out
