"""Covisibility training samples and their file format.

A sample is a pair of frames (a, b) with the encoder tokens of both, dense labels on each
frame's grid and the two directional ratios. Frames are stored once and pairs index them.

File format (``*.safetensors``, one file per split), tensors:

* ``frames``  ``[F, P, D]`` float16/float32: cached encoder tokens, P in raster order;
* ``pairs``   ``[N, 2]`` int64: frame indices (a, b) of each sample;
* ``dense_a`` ``[N, h, w]`` float16: fraction of each cell of a covisible in b (in [0, 1]);
* ``dense_b`` ``[N, h, w]`` float16: the same for b in a;
* ``ratios``  ``[N, 2]`` float32: (r_ab, r_ba);
* ``scene``   ``[F]`` int64 (optional): scene id of every frame;

metadata ``g2g_covis_samples`` (JSON): ``{"version": 1, "encoder": {"name", "config_hash"},
"source": str}``. Retrieval evaluation groups the samples by their frame a: for each such query
frame the candidates are all its b frames.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.backbones.identity import encoder_mismatch
from g2g_model.tagged_safetensors import read_tagged, write_tagged

from g2g_model.covisibility.labels import pair_labels, resize_depth

SAMPLES_FORMAT = "g2g_covis_samples"
SAMPLES_VERSION = 1


class SamplesError(ValueError):
    """A sample file or sample set is malformed; the message says which field."""


@dataclasses.dataclass
class CovisibilitySamples(torch.utils.data.Dataset):
    """An indexable set of covisibility samples (see the module docstring for the fields)."""

    frames: torch.Tensor
    pairs: torch.Tensor
    dense_a: torch.Tensor
    dense_b: torch.Tensor
    ratios: torch.Tensor
    scene: Optional[torch.Tensor] = None
    encoder: Dict = dataclasses.field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        self.pairs = self.pairs.long()
        f = self.frames
        n = self.pairs.shape[0] if self.pairs.dim() == 2 else -1
        if f.dim() != 3:
            raise SamplesError(f"frames must be [F, P, D], got {list(f.shape)}")
        if self.pairs.dim() != 2 or self.pairs.shape[1] != 2:
            raise SamplesError(f"pairs must be [N, 2], got {list(self.pairs.shape)}")
        if n and (int(self.pairs.min()) < 0 or int(self.pairs.max()) >= f.shape[0]):
            raise SamplesError(f"pairs index frames outside 0..{f.shape[0] - 1}")
        for name in ("dense_a", "dense_b"):
            d = getattr(self, name)
            if d.dim() != 3 or d.shape[0] != n:
                raise SamplesError(f"{name} must be [N={n}, h, w], got {list(d.shape)}")
        if self.dense_a.shape != self.dense_b.shape:
            raise SamplesError(
                f"dense_a {list(self.dense_a.shape)} and dense_b {list(self.dense_b.shape)} "
                "differ"
            )
        if list(self.ratios.shape) != [n, 2]:
            raise SamplesError(f"ratios must be [N={n}, 2], got {list(self.ratios.shape)}")
        if self.scene is not None and list(self.scene.shape) != [f.shape[0]]:
            raise SamplesError(f"scene must be [F={f.shape[0]}], got {list(self.scene.shape)}")

    def __len__(self) -> int:
        return self.pairs.shape[0]

    def batch(self, indices: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Stacked samples: ``tokens_a/tokens_b [B, P, D]`` float32, ``dense_a/dense_b
        [B, h, w]``, ``r_ab/r_ba [B]`` float32."""
        idx = torch.as_tensor(indices, dtype=torch.long)
        a, b = self.pairs[idx, 0], self.pairs[idx, 1]
        return {
            "tokens_a": self.frames[a].float(),
            "tokens_b": self.frames[b].float(),
            "dense_a": self.dense_a[idx].float(),
            "dense_b": self.dense_b[idx].float(),
            "r_ab": self.ratios[idx, 0].float(),
            "r_ba": self.ratios[idx, 1].float(),
        }

    def __getitem__(self, i: int) -> Dict[str, torch.Tensor]:
        return {k: v[0] for k, v in self.batch(torch.tensor([int(i)])).items()}


def save_samples(samples: CovisibilitySamples, path) -> pathlib.Path:
    """Write a sample file atomically (temporary file, fsync, rename)."""

    path = pathlib.Path(path)
    tensors = {
        "frames": samples.frames.contiguous(),
        "pairs": samples.pairs.long().contiguous(),
        "dense_a": samples.dense_a.to(torch.float16).contiguous(),
        "dense_b": samples.dense_b.to(torch.float16).contiguous(),
        "ratios": samples.ratios.float().contiguous(),
    }
    if samples.scene is not None:
        tensors["scene"] = samples.scene.long().contiguous()
    meta = {"version": SAMPLES_VERSION, "encoder": samples.encoder, "source": samples.source}
    return write_tagged(path, SAMPLES_FORMAT, meta, tensors)


def load_samples(path, expect_encoder: Optional[Dict] = None) -> CovisibilitySamples:
    """Read a sample file; raises :class:`SamplesError` naming what is wrong.

    Args:
        path: the ``.safetensors`` sample file.
        expect_encoder: ``{"name", "config_hash"}``; tokens from another encoder are rejected.
    """
    info, tensors = read_tagged(path, SAMPLES_FORMAT, SAMPLES_VERSION,
                                "covisibility sample file", SamplesError)
    missing = sorted({"frames", "pairs", "dense_a", "dense_b", "ratios"} - set(tensors))
    if missing:
        raise SamplesError(f"sample file {path} lacks tensors {missing}")
    _check_encoder(info.get("encoder", {}), expect_encoder, str(path))
    return CovisibilitySamples(
        frames=tensors["frames"], pairs=tensors["pairs"], dense_a=tensors["dense_a"],
        dense_b=tensors["dense_b"], ratios=tensors["ratios"], scene=tensors.get("scene"),
        encoder=info.get("encoder", {}), source=info.get("source", ""),
    )


def _check_encoder(theirs: Dict, mine: Optional[Dict], what: str) -> None:
    if not mine or not theirs:
        return
    key = encoder_mismatch(theirs, mine)
    if key:
        raise SamplesError(
            f"{what} holds tokens of encoder {theirs.get('name')!r} (config "
            f"{theirs.get('config_hash')}), expected {mine.get('name')!r} (config "
            f"{mine.get('config_hash')}): {key} differs"
        )


def concat_samples(parts: Sequence[CovisibilitySamples]) -> CovisibilitySamples:
    """Merge sample sets (frame indices of later parts are shifted)."""
    if not parts:
        raise SamplesError("concat_samples needs at least one sample set")
    offsets, total = [], 0
    for p in parts:
        offsets.append(total)
        total += p.frames.shape[0]
    scenes = [p.scene for p in parts]
    return CovisibilitySamples(
        frames=torch.cat([p.frames for p in parts]),
        pairs=torch.cat([p.pairs + o for p, o in zip(parts, offsets)]),
        dense_a=torch.cat([p.dense_a for p in parts]),
        dense_b=torch.cat([p.dense_b for p in parts]),
        ratios=torch.cat([p.ratios for p in parts]),
        scene=None if any(s is None for s in scenes) else torch.cat(scenes),
        encoder=parts[0].encoder, source=parts[0].source,
    )


def samples_from_depth(
    tokens: torch.Tensor,
    depths: Sequence[np.ndarray],
    intrinsics: np.ndarray,
    world_T_cams: np.ndarray,
    pairs: np.ndarray,
    dense_hw: Tuple[int, int],
    label_hw: Optional[Tuple[int, int]] = (56, 56),
    tol: float = 0.25,
    scene: Optional[np.ndarray] = None,
    encoder: Optional[Dict] = None,
    source: str = "",
) -> CovisibilitySamples:
    """Label pairs of frames from depth and bundle them with the frames' cached tokens.

    Args:
        tokens: ``[F, P, D]`` cached encoder tokens of the frames.
        depths: F depth maps ``[H, W]`` (metres, 0 / non-finite = invalid).
        intrinsics: ``[F, 3, 3]`` K of each depth map.
        world_T_cams: ``[F, 4, 4]`` camera-to-world poses (OpenCV axes).
        pairs: ``[N, 2]`` frame indices (a, b) to label.
        dense_hw: grid of the dense labels (the decoder's ``config.dense_hw`` or a multiple).
        label_hw: depth maps are first reduced to this size (nearest) for speed; None = full.
        tol: depth agreement tolerance in metres.
        scene, encoder, source: stored as given.
    """
    n_frames = tokens.shape[0]
    if len(depths) != n_frames or len(intrinsics) != n_frames or len(world_T_cams) != n_frames:
        raise SamplesError(
            f"tokens ({n_frames}), depths ({len(depths)}), intrinsics ({len(intrinsics)}) and "
            f"world_T_cams ({len(world_T_cams)}) must describe the same frames"
        )
    reduced = [resize_depth(d, k, label_hw) if label_hw else (np.asarray(d), np.asarray(k))
               for d, k in zip(depths, intrinsics)]
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    dense_a, dense_b, ratios = [], [], []
    for a, b in pairs:
        lab = pair_labels(reduced[a][0], reduced[a][1], world_T_cams[a],
                          reduced[b][0], reduced[b][1], world_T_cams[b], dense_hw, tol=tol)
        dense_a.append(lab["dense_a"])
        dense_b.append(lab["dense_b"])
        ratios.append((lab["r_ab"], lab["r_ba"]))
    shape = (0, *dense_hw)
    return CovisibilitySamples(
        frames=tokens, pairs=torch.from_numpy(pairs),
        dense_a=torch.from_numpy(np.stack(dense_a)) if dense_a else torch.zeros(shape),
        dense_b=torch.from_numpy(np.stack(dense_b)) if dense_b else torch.zeros(shape),
        ratios=torch.tensor(np.asarray(ratios, np.float32).reshape(-1, 2)),
        scene=None if scene is None else torch.as_tensor(np.asarray(scene), dtype=torch.long),
        encoder=encoder or {}, source=source,
    )
