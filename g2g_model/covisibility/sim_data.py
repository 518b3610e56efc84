"""Covisibility training and test data from simulator scenes (tokens of a G2G pipeline's encoder).

A sim scene directory (``g2g-sim`` output) holds traversals ``traj_*/`` of the same rooms, each a
trajectory with depth for every camera. For one scene:

1. :func:`load_scene_frames` takes every ``stride``-th frame of every traversal and camera,
   encodes it with :meth:`G2GPipeline.encode_frames` (each frame on its own, as a map caches
   it) and keeps its depth reduced to ``label_hw`` (nearest, intrinsics rescaled). The result is
   cached on disk per scene, keyed by the encoder id (name + hash of config and weights), so
   tokens of another backbone are never reused.
2. :func:`scene_overlap` computes the symmetric overlap of all frame pairs of the scene with the
   project's reference labeller :func:`g2g_model.data.overlap.overlap_matrix`.
3. :func:`balanced_pairs` draws ordered pairs: half covisible (overlap >= ``threshold``, equally
   many from each overlap bin so high overlaps are not rare), half not.
4. :func:`scene_samples` labels the pairs (dense grids + directional ratios) from depth with
   :func:`g2g_model.covisibility.labels.pair_labels` via
   :func:`~g2g_model.covisibility.samples.samples_from_depth`.

Held-out evaluation (:func:`evaluate_scenes`) adds two query protocols to the pair metrics:
frame retrieval (each query frame of traversal 1 against every frame of traversal 0) and map
window selection (per camera, a query segment of W frames against the whole map traversal).
Both score with the relocalize node's own window selection
(:class:`~g2g_model.localization.window_selector.WindowSelector`), prepared on traversal 0 of
the scene as a map (:mod:`g2g_model.covisibility.sim_selection`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.covisibility.evaluate import (evaluate, frame_retrieval_hits,
                                             picked_window_accuracy, window_selection_accuracy)
from g2g_model.covisibility.labels import resize_depth
from g2g_model.covisibility.model import CovisibilityDecoder
from g2g_model.covisibility.retrieval import window_scores
from g2g_model.covisibility.samples import (CovisibilitySamples, concat_samples,
                                            samples_from_depth)
from g2g_model.covisibility.scoring import score_matrix
from g2g_model.covisibility.sim_selection import (query_group, scene_map, selector_ranking,
                                                  selector_scorer, sim_selectors)
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.overlap import overlap_matrix
from g2g_model.window_selection import descriptor_similarity

LOG = logging.getLogger(__name__)

CACHE_VERSION = 1
DEFAULT_LABEL_HW = (56, 56)
DEFAULT_THRESHOLD = 0.05
DEFAULT_BINS = (0.05, 0.2, 0.4, 0.6, 1.01)


@dataclasses.dataclass
class SceneFrames:
    """The selected frames of one scene (F frames over all traversals and cameras).

    Attributes:
        tokens: ``[F, P, D]`` float16 encoder tokens.
        depth: ``[F, h, w]`` float32 depth reduced to ``label_hw`` (0 = invalid).
        intrinsics: ``[F, 3, 3]`` K of the reduced depth maps.
        world_T_cam: ``[F, 4, 4]`` camera-to-world poses (OpenCV axes).
        traversal, camera, frame: ``[F]`` int64 traversal number, camera index, frame index.
        scene: the scene's directory name.
        encoder: ``{"name", "config_hash"}`` of the token encoder.
    """

    tokens: torch.Tensor
    depth: np.ndarray
    intrinsics: np.ndarray
    world_T_cam: np.ndarray
    traversal: np.ndarray
    camera: np.ndarray
    frame: np.ndarray
    scene: str
    encoder: Dict

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def select(self, traversal: int, camera: int) -> np.ndarray:
        """Indices ``[T]`` of one traversal's frames of one camera, in time order."""
        idx = np.flatnonzero((self.traversal == traversal) & (self.camera == camera))
        return idx[np.argsort(self.frame[idx], kind="stable")]


def scene_dirs(root, limit: Optional[int] = None) -> List[pathlib.Path]:
    """Sorted ``scene_*`` directories under ``root`` (the first ``limit``)."""
    root = pathlib.Path(root)
    if not root.is_dir():
        raise ValueError(f"scene root {root} is not a directory")
    scenes = sorted(p for p in root.glob("scene_*") if p.is_dir())
    if not scenes:
        raise ValueError(f"no scene_* directories under {root}")
    return scenes[:limit] if limit else scenes


def _cache_path(cache_dir, scene: pathlib.Path, encoder: Dict, stride: int,
                label_hw: Tuple[int, int]) -> pathlib.Path:
    key = json.dumps({"v": CACHE_VERSION, "scene": str(scene.resolve()), "encoder": encoder,
                      "stride": stride, "label_hw": list(label_hw)}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return pathlib.Path(cache_dir) / f"{scene.name}_{digest}.safetensors"


def load_scene_frames(pipeline, scene, stride: int = 2,
                      label_hw: Tuple[int, int] = DEFAULT_LABEL_HW,
                      cache_dir=None) -> SceneFrames:
    """Encode (or load from the cache) every ``stride``-th frame of a sim scene.

    Args:
        pipeline: a :class:`~g2g_model.inference.G2GPipeline` (its backbone encodes); None =
            no tokens (``tokens`` is ``[F, 0, 0]``, nothing is cached): the depth, poses and
            frame numbers alone, which is all the image models' training data needs.
        scene: the scene directory (with ``traj_*`` trajectories that have depth).
        stride: frame subsampling in every traversal.
        label_hw: size of the stored depth maps (labels are computed on them).
        cache_dir: where to keep ``<scene>_<key>.safetensors``; None = no cache.
    """
    from safetensors.torch import load_file, save_file

    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    scene = pathlib.Path(scene)
    encoder = dict(pipeline.backbone_id()) if pipeline is not None else {}
    cache = (_cache_path(cache_dir, scene, encoder, stride, label_hw)
             if cache_dir and pipeline is not None else None)
    if cache is not None and cache.is_file():
        t = load_file(str(cache))
        LOG.info("loaded cached tokens of %s from %s", scene.name, cache)
        return SceneFrames(tokens=t["tokens"], depth=t["depth"].numpy(),
                           intrinsics=t["intrinsics"].numpy(),
                           world_T_cam=t["world_T_cam"].numpy(),
                           traversal=t["traversal"].numpy(), camera=t["camera"].numpy(),
                           frame=t["frame"].numpy(), scene=scene.name, encoder=encoder)
    trajs = sorted(p for p in scene.glob("traj_*") if p.is_dir())
    if not trajs:
        raise ValueError(f"scene {scene} has no traj_* trajectories")
    parts = {k: [] for k in ("tokens", "depth", "intrinsics", "world_T_cam", "traversal",
                             "camera", "frame")}
    for trav, path in enumerate(trajs):
        reader = TrajectoryReader(path)
        if not reader.has_depth:
            raise ValueError(f"{path}: covisibility labels need depth")
        frames = np.arange(0, reader.num_frames, stride)
        for ci, cam in enumerate(reader.rig.names):
            k_full = reader.rig[cam].K
            if pipeline is not None:
                images = [reader.image(cam, int(i)) for i in frames]
                parts["tokens"].append(pipeline.encode_frames(images, k_full).half())
            else:
                parts["tokens"].append(torch.zeros(len(frames), 0, 0, dtype=torch.float16))
            reduced = [resize_depth(reader.depth(cam, int(i)), k_full, label_hw) for i in frames]
            parts["depth"].append(np.stack([d for d, _ in reduced]).astype(np.float32))
            parts["intrinsics"].append(np.stack([k for _, k in reduced]))
            parts["world_T_cam"].append(reader.world_T_cam(cam)[frames])
            parts["traversal"].append(np.full(len(frames), trav))
            parts["camera"].append(np.full(len(frames), ci))
            parts["frame"].append(frames)
    out = SceneFrames(
        tokens=torch.cat(parts["tokens"]).contiguous(),
        depth=np.concatenate(parts["depth"]),
        intrinsics=np.concatenate(parts["intrinsics"]).astype(np.float64),
        world_T_cam=np.concatenate(parts["world_T_cam"]).astype(np.float64),
        traversal=np.concatenate(parts["traversal"]).astype(np.int64),
        camera=np.concatenate(parts["camera"]).astype(np.int64),
        frame=np.concatenate(parts["frame"]).astype(np.int64),
        scene=scene.name, encoder=encoder,
    )
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        save_file({"tokens": out.tokens, "depth": torch.from_numpy(out.depth),
                   "intrinsics": torch.from_numpy(out.intrinsics),
                   "world_T_cam": torch.from_numpy(out.world_T_cam),
                   "traversal": torch.from_numpy(out.traversal),
                   "camera": torch.from_numpy(out.camera),
                   "frame": torch.from_numpy(out.frame)}, str(tmp))
        tmp.replace(cache)
    LOG.info("%s %d frames of %s", "encoded" if pipeline is not None else "read", len(out),
             scene.name)
    return out


def scene_overlap(frames: SceneFrames, tol: float = 0.25, size: Optional[int] = 16
                  ) -> np.ndarray:
    """Symmetric overlap ``[F, F]`` of all frame pairs (reference labeller).

    Only used to choose pairs, so by default on ``size x size`` points of the reduced depth
    (fast); the labels of the chosen pairs are then computed on the whole reduced depth."""
    return overlap_matrix(frames.depth, frames.intrinsics, frames.world_T_cam,
                          frames.depth, frames.intrinsics, frames.world_T_cam, tol=tol,
                          size=size)


def scene_images(scene, frames: SceneFrames) -> List[np.ndarray]:
    """The RGB images ``[H, W, 3]`` uint8 of ``frames`` (read from the scene directory)."""
    readers = [TrajectoryReader(p) for p in sorted(pathlib.Path(scene).glob("traj_*"))]
    if len(readers) <= int(frames.traversal.max()):
        raise ValueError(f"scene {scene} has {len(readers)} traversals, its frames need "
                         f"{int(frames.traversal.max()) + 1}")
    return [readers[t].image(readers[t].rig.names[c], int(f))
            for t, c, f in zip(frames.traversal, frames.camera, frames.frame)]


def scene_image_data(scene, frames: SceneFrames, size: int) -> Dict[str, torch.Tensor]:
    """Training data of the image embedding and the pair verifier for one scene: ``{"images":
    [F, 3, size, size] uint8, "overlap": [F, F] float16, "traversal": [F] int64}`` (all pairs,
    the reference labeller)."""
    from g2g_model.covisibility.image_embedding import shrink

    images = torch.stack([shrink(rgb, size) for rgb in scene_images(scene, frames)])
    return {"images": images, "overlap": torch.from_numpy(scene_overlap(frames)).half(),
            "traversal": torch.from_numpy(frames.traversal)}


def balanced_pairs(overlap: np.ndarray, num_pairs: int, rng: np.random.Generator,
                   threshold: float = DEFAULT_THRESHOLD,
                   bins: Sequence[float] = DEFAULT_BINS) -> np.ndarray:
    """Ordered pairs ``[N, 2]`` (no self-pairs), half covisible and half not.

    Covisible pairs (overlap >= ``threshold``) are drawn equally from each ``bins`` interval
    (fewer when a bin runs short, topped up from the others); non-covisible pairs uniformly.
    """
    if num_pairs < 2:
        raise ValueError(f"num_pairs must be >= 2, got {num_pairs}")
    n = overlap.shape[0]
    off_diag = ~np.eye(n, dtype=bool)
    pos_pool, neg = [], np.flatnonzero((overlap < threshold).ravel() & off_diag.ravel())
    for lo, hi in zip(bins[:-1], bins[1:]):
        pos_pool.append(np.flatnonzero(((overlap >= max(lo, threshold)) & (overlap < hi)
                                        & off_diag).ravel()))
    want_pos = num_pairs // 2
    chosen: List[np.ndarray] = []
    left = want_pos
    for i, pool in enumerate(sorted(pos_pool, key=len)):
        take = min(len(pool), left // (len(pos_pool) - i))
        chosen.append(rng.choice(pool, take, replace=False))
        left -= take
    pos = np.concatenate(chosen) if chosen else np.zeros(0, np.int64)
    take_neg = min(len(neg), num_pairs - len(pos))
    flat = np.concatenate([pos, rng.choice(neg, take_neg, replace=False)]).astype(np.int64)
    return np.stack([flat // n, flat % n], 1)


def scene_samples(frames: SceneFrames, pairs: np.ndarray, dense_hw: Tuple[int, int],
                  scene_id: int = 0, tol: float = 0.25) -> CovisibilitySamples:
    """Dense + directional labels of ``pairs`` with the frames' tokens (one scene)."""
    return samples_from_depth(
        frames.tokens, list(frames.depth), frames.intrinsics, frames.world_T_cam, pairs,
        dense_hw=dense_hw, label_hw=None, tol=tol,
        scene=np.full(len(frames), scene_id), encoder=frames.encoder,
        source=f"sim:{frames.scene}",
    )


def build_sim_samples(pipeline, scenes: Sequence, pairs_per_scene: int, dense_hw,
                      stride: int = 2, seed: int = 0, cache_dir=None,
                      label_hw: Tuple[int, int] = DEFAULT_LABEL_HW,
                      threshold: float = DEFAULT_THRESHOLD) -> CovisibilitySamples:
    """Balanced labelled pairs of several scenes, merged into one sample set."""
    parts = []
    for sid, scene in enumerate(scenes):
        frames = load_scene_frames(pipeline, scene, stride, label_hw, cache_dir)
        overlap = scene_overlap(frames)
        rng = np.random.default_rng([seed, sid])
        pairs = balanced_pairs(overlap, pairs_per_scene, rng, threshold)
        parts.append(scene_samples(frames, pairs, dense_hw, scene_id=sid))
        LOG.info("%s: %d frames, %d pairs (%.0f %% covisible)", frames.scene, len(frames),
                 len(pairs), 100 * np.mean(overlap[pairs[:, 0], pairs[:, 1]] >= threshold))
    return concat_samples(parts)


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
