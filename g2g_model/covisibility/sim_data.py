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

Held-out evaluation on the same scenes is :mod:`g2g_model.covisibility.sim_eval`;
:func:`image_training_data` gathers the shrunk images the image models train on.
"""


from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pathlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.covisibility.labels import resize_depth
from g2g_model.covisibility.samples import (CovisibilitySamples, concat_samples,
                                            samples_from_depth)
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.overlap import overlap_matrix

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
        pipeline: a :class:`~g2g_model.estimation.pipeline.G2GPipeline` (its backbone encodes);
            None = no tokens (``tokens`` is ``[F, 0, 0]``, nothing is cached): the depth, poses and
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


def _one_scene_image_data(scene, stride: int, size: int) -> Dict[str, torch.Tensor]:
    """The image models' training data of one scene (no tokens: depth, poses and pixels)."""
    return scene_image_data(scene, load_scene_frames(None, scene, stride), size)


def _single_thread() -> None:
    torch.set_num_threads(1)


def image_training_data(roots: Sequence, scenes: Optional[int] = None, stride: int = 2,
                        size: int = 64, workers: int = 1, data_file=None,
                        progress: bool = True) -> List[Dict[str, torch.Tensor]]:
    """The shrunk training images, overlaps and traversals (:func:`scene_image_data`) of the
    first ``scenes`` scenes under ``roots``, built by ``workers`` processes (one scene each).

    ``data_file``, when given, keeps the result: it is read when it exists, written otherwise.
    """
    from concurrent.futures import ProcessPoolExecutor
    import functools
    import multiprocessing

    from tqdm import tqdm

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    data_file = pathlib.Path(data_file) if data_file else None
    if data_file is not None and data_file.is_file():
        data = torch.load(str(data_file))
        LOG.info("read the training images of %d scenes from %s", len(data), data_file)
        return data
    dirs = [scene for root in roots for scene in scene_dirs(root)][:scenes]
    build = functools.partial(_one_scene_image_data, stride=stride, size=size)
    bar = functools.partial(tqdm, total=len(dirs), desc="scenes", disable=not progress)
    if workers == 1:
        data = list(bar(map(build, dirs)))
    else:
        with ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"),
                                 initializer=_single_thread) as pool:
            data = list(bar(pool.map(build, dirs)))
    if data_file is not None:
        data_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = data_file.with_name(data_file.name + ".tmp")
        torch.save(data, str(tmp))
        tmp.replace(data_file)
    return data
