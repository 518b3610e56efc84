"""Pair verifier: a small CNN that looks at two frames together and estimates their overlap.

The window scorers (token and image embeddings) describe every frame on its own, so a map frame
is compared with a query frame through two 64-128 value descriptors. That finds the right part
of the map (one of the 8 best-scored windows is within 0.1 of the best in 97-99 % of held-out
queries), but it orders the close candidates poorly (docs/COVISIBILITY.md, "Honest
assessment"). The verifier re-orders those few candidates by looking at both images at once:

1. both RGB frames are shrunk (area interpolation) to ``size x size`` (64) pixels and stacked
   into one 6-channel image;
2. four stride-2 convolution blocks (``width``, 2, 4, 4 x ``width`` channels, batch norm, ReLU)
   give a 4 x 4 grid, flattened, then a hidden layer (128, ReLU) and one output, squashed to
   [0, 1];
3. the score of two frames is the mean of both orders (it is symmetric by construction).

It is trained from scratch (:func:`train_pair_verifier`) on simulator scenes to regress the
symmetric overlap of frame pairs of *different traversals* of a scene (what a query and its map
are), with the pairs drawn equally from five overlap bins (0-0.05-0.2-0.4-0.6-1, so fine
differences between covisible pairs weigh as much as covisible-or-not) and a random brightness
and colour gain per image.

The shipped verifier is then fine-tuned (:func:`finetune_pair_verifier`) on *look-alike*
frames: for each frame, its most similar frames of other traversals by the image embedding,
taken in triplets of unlike overlap, with a margin ranking term added to the MSE.

At run time (:func:`verify_windows`) the window scorer proposes its ``top_k`` best map windows
and each is re-scored as ``window score + weight * max-mean of the verifier over its pairs``.

Checkpoint: a tagged safetensors file (``g2g_covis_pair_verifier``, version 1) with the network
(float16), its architecture, the re-ranking settings it was measured with, and the training
record; loading is strict (architecture, tensor names and shapes, finite values).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from g2g_model.covisibility.checkpoint import CheckpointError, load_float_state
from g2g_model.covisibility.image_embedding import (ImageEmbedding, conv_features,
                                                    fit_pair_model, random_gain, shrink)
from g2g_model.tagged_safetensors import read_tagged, write_tagged
from g2g_model.covisibility.window_scores import max_mean


HEADER_KEY = "g2g_covis_pair_verifier"
VERSION = 1
# Step 1 of the shipped file's recipe (tools/train_covis_pair_verifier_gpu.sh); top_k and weight
# were chosen on the validation scenes for that verifier. Step 2, the fine-tune
# (FINETUNE_DEFAULTS, tools/finetune_covis_pair_verifier.sh), stores weight 5, chosen the same
# way for the fine-tuned one (docs/COVISIBILITY.md).
PAIR_VERIFIER_DEFAULTS = {"size": 64, "width": 32, "hidden": 128, "steps": 8500,
                          "batch_size": 256, "lr": 2e-3, "top_k": 8, "weight": 2.0}
OVERLAP_BINS = (0.0, 0.05, 0.2, 0.4, 0.6, 1.01)
# Hard-example fine-tune (finetune_pair_verifier): per step ``pairs`` binned pairs as in
# training plus ``triplets`` (frame, two of its confusable frames of unlike overlap).
FINETUNE_DEFAULTS = {"steps": 1500, "lr": 3e-4, "pairs": 128, "triplets": 64,
                     "rank_weight": 1.0, "neighbours": 16}
MIN_OVERLAP_GAP = 0.1


class PairVerifier(nn.Module):
    """Overlap ``[N]`` in [0, 1] of pairs of ``[N, 3, size, size]`` uint8 images (see the module
    docstring); :meth:`forward` is one order, :meth:`symmetric` the mean of both."""

    def __init__(self, size: int = 64, width: int = 32, hidden: int = 128):
        super().__init__()
        if size < 16 or size % 16 or width < 1 or hidden < 1:
            raise ValueError(f"size must be a multiple of 16 (>= 16), width and hidden >= 1; "
                             f"got size {size}, width {width}, hidden {hidden}")
        self.size, self.width, self.hidden = size, width, hidden
        self.features = conv_features(6, width)
        self.head = nn.Sequential(nn.Linear(4 * width * (size // 16) ** 2, hidden), nn.ReLU(),
                                  nn.Linear(hidden, 1))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = torch.cat([a.float(), b.float()], 1) / 127.5 - 1.0
        return torch.sigmoid(self.head(self.features(x).flatten(1)))[:, 0]

    def symmetric(self, a: torch.Tensor, b: torch.Tensor, batch: int = 256) -> torch.Tensor:
        """Mean of both orders, in batches, without gradients."""
        out = []
        with torch.no_grad():
            for i in range(0, len(a), batch):
                x, y = a[i:i + batch], b[i:i + batch]
                out.append(0.5 * (self(x, y) + self(y, x)))
        return torch.cat(out) if out else torch.zeros(0)

    def shrink_all(self, rgbs: Sequence[np.ndarray]) -> torch.Tensor:
        """``[N, 3, size, size]`` uint8 of RGB uint8 images ``[H, W, 3]`` (what
        :func:`verify_windows` compares; shrink a map's frames once)."""
        if not len(rgbs):
            return torch.zeros(0, 3, self.size, self.size, dtype=torch.uint8)
        return torch.stack([shrink(rgb, self.size) for rgb in rgbs])


def candidate_windows(scores: np.ndarray, windows: Sequence[np.ndarray], top_k: int,
                      allowed: Optional[Sequence[bool]] = None) -> List[Tuple[int, float]]:
    """The ``top_k`` best windows by max-mean score, distinct places: a window that shares more
    than half its frames with a better one is skipped.

    Args:
        scores: ``[T_A, T_B]`` frame-pair scores (map frames x query frames).
        windows: map-frame index arrays.
        allowed: optional mask over ``windows``.
    Returns:
        ``(window index, max-mean score)`` best first.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    ws = np.array([max_mean(scores[np.asarray(w)]) for w in windows], dtype=np.float64)
    if allowed is not None:
        ws[~np.asarray(allowed, dtype=bool)] = -np.inf
    kept: List[Tuple[int, float]] = []
    for i in np.argsort(-ws, kind="stable"):
        if len(kept) == top_k or not np.isfinite(ws[i]):
            break
        frames = set(np.asarray(windows[i]).tolist())
        if all(2 * len(frames & set(np.asarray(windows[k]).tolist())) <= len(frames)
               for k, _ in kept):
            kept.append((int(i), float(ws[i])))
    return kept


def verify_windows(verifier: PairVerifier, scores: np.ndarray, windows: Sequence[np.ndarray],
                   map_images: torch.Tensor, query_images: torch.Tensor, top_k: int,
                   weight: float, allowed: Optional[Sequence[bool]] = None
                   ) -> List[Tuple[int, float, float]]:
    """The window scorer's ``top_k`` candidates (:func:`candidate_windows`) re-ordered by
    ``window score + weight * verification``.

    Args:
        verifier: the pair verifier.
        scores: ``[T_A, T_B]`` window scorer's frame-pair scores (rows = ``map_images``,
            columns = ``query_images``).
        windows, allowed: see :func:`candidate_windows`.
        map_images, query_images: shrunk frames (:meth:`PairVerifier.shrink_all`).
        top_k: candidates verified.
        weight: weight of the verification (0 keeps the scorer's order).
    Returns:
        ``(window index, window score, verification)`` best first; the verification is the
        max-mean of the verifier's overlaps over the window's (map, query) frame pairs.
    """
    if weight < 0 or not np.isfinite(weight):
        raise ValueError(f"weight must be finite and >= 0, got {weight}")
    if len(map_images) != scores.shape[0] or len(query_images) != scores.shape[1]:
        raise ValueError(f"scores {scores.shape} do not fit {len(map_images)} map and "
                         f"{len(query_images)} query images")
    candidates = candidate_windows(scores, windows, top_k, allowed)
    if not candidates:
        return []
    rows = sorted({int(r) for i, _ in candidates for r in windows[i]})
    cols = np.arange(len(query_images))
    ij = torch.from_numpy(np.stack(np.meshgrid(rows, cols, indexing="ij"), -1).reshape(-1, 2))
    values = verifier.symmetric(map_images[ij[:, 0]], query_images[ij[:, 1]]).numpy()
    block = dict(zip(rows, values.reshape(len(rows), len(cols))))
    out = [(i, score, max_mean(np.stack([block[int(r)] for r in windows[i]])))
           for i, score in candidates]
    return sorted(out, key=lambda c: -(c[1] + weight * c[2]))


def _pair_pools(scene: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
    """Per overlap bin, the ordered cross-traversal pairs ``[N, 2]`` of a scene."""
    overlap, traversal = scene["overlap"].float(), scene["traversal"]
    cross = traversal[:, None] != traversal[None]
    return [torch.nonzero(cross & (overlap >= lo) & (overlap < hi))
            for lo, hi in zip(OVERLAP_BINS[:-1], OVERLAP_BINS[1:])]


def _binned_pairs(scenes: List[Dict[str, torch.Tensor]], pools: List[List[torch.Tensor]],
                  filled: List[List[int]], n: int, gen: torch.Generator
                  ) -> Tuple[List[torch.Tensor], List[torch.Tensor], List[float]]:
    """``n`` cross-traversal pairs (first images, second images, overlaps) of random scenes,
    equally many from each overlap bin, every second one in the other order."""
    bins = len(OVERLAP_BINS) - 1
    a, b, y = [], [], []
    for k, s in enumerate(torch.randint(len(scenes), (n,), generator=gen).tolist()):
        pool = pools[s][k % bins]
        if not len(pool):  # a scene without pairs in this bin: one of another bin
            others = filled[s]
            pool = pools[s][others[int(torch.randint(len(others), (1,), generator=gen))]]
        i, j = pool[int(torch.randint(len(pool), (1,), generator=gen))].tolist()
        if k % 2:
            i, j = j, i
        a.append(scenes[s]["images"][i])
        b.append(scenes[s]["images"][j])
        y.append(float(scenes[s]["overlap"][i, j]))
    return a, b, y


def _check_scenes(scenes: List[Dict[str, torch.Tensor]]):
    """The bin pools and the non-empty bins of each scene; ValueError for unusable scenes."""
    if not scenes:
        raise ValueError("no training scenes")
    missing = [i for i, s in enumerate(scenes) if "traversal" not in s]
    if missing:
        raise ValueError(f"scenes {missing[:5]} have no traversal numbers (rebuild the image "
                         "data with this version)")
    pools = [_pair_pools(s) for s in scenes]
    if any(not any(len(p) for p in pool[1:]) for pool in pools):
        raise ValueError("every training scene needs covisible pairs across traversals")
    return pools, [[b for b, p in enumerate(pool) if len(p)] for pool in pools]


def train_pair_verifier(scenes: List[Dict[str, torch.Tensor]],
                        steps: int = PAIR_VERIFIER_DEFAULTS["steps"],
                        batch_size: int = PAIR_VERIFIER_DEFAULTS["batch_size"],
                        width: int = PAIR_VERIFIER_DEFAULTS["width"],
                        hidden: int = PAIR_VERIFIER_DEFAULTS["hidden"],
                        lr: float = PAIR_VERIFIER_DEFAULTS["lr"], seed: int = 0,
                        progress: bool = True,
                        save: Optional[Callable[[PairVerifier, Dict], object]] = None,
                        state_path=None, device: str = "cpu") -> Tuple[PairVerifier, Dict]:
    """Train on per-scene ``{"images": [F, 3, S, S] uint8, "overlap": [F, F], "traversal":
    [F]}`` (:func:`g2g_model.covisibility.sim_data.scene_image_data`). ``save(model, record)``
    is called every 500 steps and at the end; ``state_path``: resumable training state
    (:func:`~g2g_model.covisibility.image_embedding.fit_pair_model`). ``device``: where the
    network trains (the batches are drawn on the CPU, as on a CPU-only run). Returns the model
    (eval mode, on ``device``) and the record."""
    if steps < 1 or batch_size < 2:
        raise ValueError(f"steps must be >= 1 and batch_size >= 2, got {steps}, {batch_size}")
    pools, filled = _check_scenes(scenes)
    size = int(scenes[0]["images"].shape[-1])
    torch.manual_seed(seed)
    model = PairVerifier(size, width, hidden).to(device)
    gen = torch.Generator().manual_seed(seed)
    record = {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
              "scenes": len(scenes), "frames": int(sum(len(s["images"]) for s in scenes))}

    def batch_loss() -> torch.Tensor:
        a, b, y = _binned_pairs(scenes, pools, filled, batch_size, gen)
        x = random_gain(torch.stack(a + b).to(device), gen)
        return F.mse_loss(model(x[:batch_size], x[batch_size:]), torch.tensor(y, device=device))

    record = fit_pair_model(model, steps, lr, batch_loss, record, "pair verifier", progress,
                            save, state_path, gen)
    return model, record


def confusable_frames(scenes: List[Dict[str, torch.Tensor]], embedding: ImageEmbedding,
                      neighbours: int, batch: int = 256) -> List[torch.Tensor]:
    """Per scene ``[F, neighbours]``: each frame's most similar frames of the *other*
    traversals by the image embedding's cosine, i.e. the places the window scorer proposes
    together at run time. ``embedding`` must take the scenes' image size."""
    out = []
    for scene in scenes:
        images = scene["images"]
        if images.shape[-1] != embedding.size:
            raise ValueError(f"the image embedding takes {embedding.size} px images, the "
                             f"scenes hold {images.shape[-1]} px")
        traversal = scene["traversal"]
        others = int((traversal[:, None] != traversal[None]).sum(1).min())
        if others < neighbours:
            raise ValueError(f"a frame has only {others} frames of other traversals, fewer "
                             f"than {neighbours} neighbours")
        with torch.no_grad():
            d = torch.cat([embedding(images[i:i + batch]) for i in range(0, len(images), batch)])
        sim = d @ d.T
        sim[traversal[:, None] == traversal[None]] = -np.inf
        out.append(torch.topk(sim, neighbours, dim=1).indices)
    return out


def _triplet_queries(scenes: List[Dict[str, torch.Tensor]], near: List[torch.Tensor]
                     ) -> List[torch.Tensor]:
    """Per scene, the frames with at least one usable triplet among their neighbours: two
    neighbours whose overlaps with the frame differ by >= ``MIN_OVERLAP_GAP``, one covisible."""
    out = []
    for scene, nb in zip(scenes, near):
        ov = torch.gather(scene["overlap"].float(), 1, nb)
        gap = (ov[:, :, None] - ov[:, None, :]).abs() >= MIN_OVERLAP_GAP
        covisible = torch.maximum(ov[:, :, None], ov[:, None, :]) >= OVERLAP_BINS[1]
        out.append(torch.nonzero((gap & covisible).flatten(1).any(1))[:, 0])
    return out


def _triplets(scenes, near, queries, n: int, gen: torch.Generator):
    """``n`` triplets (images of the frame, of its better and of its worse neighbour, and
    their overlaps with it) of random scenes (by rejection within the frame's neighbours)."""
    usable = [k for k, q in enumerate(queries) if len(q)]
    q_img, hi_img, lo_img, y_hi, y_lo = [], [], [], [], []
    while len(q_img) < n:
        s = usable[int(torch.randint(len(usable), (1,), generator=gen))]
        q = int(queries[s][int(torch.randint(len(queries[s]), (1,), generator=gen))])
        i, j = near[s][q, torch.randint(near[s].shape[1], (2,), generator=gen)].tolist()
        oi, oj = float(scenes[s]["overlap"][q, i]), float(scenes[s]["overlap"][q, j])
        if abs(oi - oj) < MIN_OVERLAP_GAP or max(oi, oj) < OVERLAP_BINS[1]:
            continue
        if oi < oj:
            i, j, oi, oj = j, i, oj, oi
        images = scenes[s]["images"]
        q_img.append(images[q])
        hi_img.append(images[i])
        lo_img.append(images[j])
        y_hi.append(oi)
        y_lo.append(oj)
    return q_img, hi_img, lo_img, y_hi, y_lo


def finetune_pair_verifier(model: PairVerifier, scenes: List[Dict[str, torch.Tensor]],
                           embedding: ImageEmbedding,
                           steps: int = FINETUNE_DEFAULTS["steps"],
                           lr: float = FINETUNE_DEFAULTS["lr"],
                           pairs: int = FINETUNE_DEFAULTS["pairs"],
                           triplets: int = FINETUNE_DEFAULTS["triplets"],
                           rank_weight: float = FINETUNE_DEFAULTS["rank_weight"],
                           neighbours: int = FINETUNE_DEFAULTS["neighbours"], seed: int = 0,
                           progress: bool = True,
                           save: Optional[Callable[[PairVerifier, Dict], object]] = None,
                           state_path=None, device: str = "cpu",
                           init_sha256: Optional[str] = None) -> Tuple[PairVerifier, Dict]:
    """Fine-tune a trained verifier on the pairs the re-ranking has to order.

    At run time the verifier compares a query with the window scorer's best candidates: places
    that *look alike* to the image embedding. Each step draws ``pairs`` binned pairs (as
    :func:`train_pair_verifier`) and ``triplets`` (a frame and two of its ``neighbours`` most
    confusable frames of other traversals, :func:`confusable_frames`, whose overlaps with it
    differ by at least 0.1). Loss: the MSE on all these pairs plus ``rank_weight`` x the mean
    of ``max(0, gap / 2 - (score of the better - score of the worse))``, a margin of half the
    true overlap gap. The batch-norm statistics stay frozen; the pairs' orders are random.

    ``model`` is trained in place (copy it first to keep the original). ``scenes``: as
    :func:`train_pair_verifier`; ``save``, ``state_path``, ``device`` too. ``init_sha256``
    (recorded) names the file ``model`` came from: a training state of another one is refused,
    as a resumed run continues from the state's weights, not from ``model``. Returns the
    model (eval mode, on ``device``) and the record (without the base model's; the caller
    adds it)."""
    if steps < 1 or pairs < 0 or triplets < 1 or rank_weight < 0:
        raise ValueError(f"steps and triplets must be >= 1, pairs and rank_weight >= 0; got "
                         f"{steps}, {triplets}, {pairs}, {rank_weight}")
    pools, filled = _check_scenes(scenes)
    size = int(scenes[0]["images"].shape[-1])
    if size != model.size:
        raise ValueError(f"the verifier takes {model.size} px images, the scenes hold {size} px")
    near = confusable_frames(scenes, embedding, neighbours)
    queries = _triplet_queries(scenes, near)
    if not any(len(q) for q in queries):
        raise ValueError(f"no frame has two of its {neighbours} confusable frames with "
                         f"overlaps {MIN_OVERLAP_GAP} apart: nothing to fine-tune on")
    model = model.to(device)
    gen = torch.Generator().manual_seed(seed)
    record = {"steps": steps, "batch_size": pairs + 2 * triplets, "lr": lr, "seed": seed,
              "scenes": len(scenes), "frames": int(sum(len(s["images"]) for s in scenes)),
              "pairs": pairs, "triplets": triplets, "rank_weight": rank_weight,
              "neighbours": neighbours, "init_sha256": init_sha256,
              "triplet_frames": int(sum(len(q) for q in queries))}

    def batch_loss() -> torch.Tensor:
        a, b, y = _binned_pairs(scenes, pools, filled, pairs, gen)
        q, hi, lo, y_hi, y_lo = _triplets(scenes, near, queries, triplets, gen)
        a, b, y = a + q + q, b + hi + lo, y + y_hi + y_lo
        swap = (torch.rand(len(a), generator=gen) < 0.5)[:, None, None, None]
        first, second = torch.stack(a), torch.stack(b)
        x = random_gain(torch.cat([torch.where(swap, second, first),
                                   torch.where(swap, first, second)]).to(device), gen)
        pred = model(x[:len(a)], x[len(a):])
        mse = F.mse_loss(pred, torch.tensor(y, device=device))
        gap = torch.tensor(y_hi, device=device) - torch.tensor(y_lo, device=device)
        order = pred[pairs:pairs + triplets] - pred[pairs + triplets:]
        return mse + rank_weight * F.relu(0.5 * gap - order).mean()

    record = fit_pair_model(model, steps, lr, batch_loss, record, "pair verifier fine-tune",
                            progress, save, state_path, gen, frozen_norm=True)
    return model, record


def save_pair_verifier(path, model: PairVerifier, training: Dict,
                       top_k: int = PAIR_VERIFIER_DEFAULTS["top_k"],
                       weight: float = PAIR_VERIFIER_DEFAULTS["weight"]):
    header = {"version": VERSION, "size": model.size, "width": model.width,
              "hidden": model.hidden, "top_k": int(top_k), "weight": float(weight),
              "training": training}
    tensors = {k: v.detach().to("cpu", torch.float16).contiguous()
               for k, v in model.state_dict().items() if v.is_floating_point()}
    return write_tagged(path, HEADER_KEY, header, tensors)


def load_pair_verifier(path) -> Tuple[PairVerifier, Dict]:
    """Load strictly; ``CheckpointError`` names what is wrong (missing, corrupt, other version,
    bad architecture, tensors that do not fit it)."""
    header, tensors = read_tagged(path, HEADER_KEY, VERSION, "pair verifier", CheckpointError)
    try:
        model = PairVerifier(int(header["size"]), int(header["width"]), int(header["hidden"]))
        top_k, weight = int(header["top_k"]), float(header["weight"])
        if top_k < 1 or weight < 0 or not np.isfinite(weight):
            raise ValueError(f"top_k {top_k} / weight {weight} out of range")
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"pair verifier {path} has a bad header ({exc})") from None
    load_float_state(model, tensors, "pair verifier", path)
    return model.eval(), header
