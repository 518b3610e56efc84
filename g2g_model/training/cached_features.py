"""Precomputed frozen-backbone features of every training group (what makes CPU training
feasible: the backbone runs once per group instead of once per step).

Layout: ``<cache_dir>/<identity hash>/shard_<hash of its group keys>.safetensors``, one
tensor ``features`` ``[G, V, N, P, D]`` per shard (G groups, V noise variants) and metadata with
the group keys, the backbone identity (:func:`g2g_model.backbones.identity.backbone_identity`:
name, configuration, weights digest) and the noise settings. The directory name hashes all of
it, so features of another backbone or other weights are never mixed in; a shard whose metadata
does not match is an error.

Noise variants: variant 0 is encoded from the clean input poses; variant v >= 1 from one fixed
draw of the extrinsic noise (:mod:`g2g_model.training.augment`) seeded by the group key and v.
Training picks a variant per group and step: the input-noise augmentation, with V - 1 draws per
group instead of a fresh one every step (documented limitation of the cached mode).

Building is resumable: finished shards are skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from g2g_model.training.augment import ExtrinsicNoiseConfig, perturb_poses
from g2g_model.backbones.identity import backbone_identity
from g2g_model.training.trajectory_groups import GroupSpec, TrajectoryStore, group_key

logger = logging.getLogger(__name__)

SHARD_FORMAT = "g2g_training_features"
DTYPES = {"float16": torch.float16, "float32": torch.float32}


def variant_generator(key: str, variant: int, seed: int) -> torch.Generator:
    """The generator of one group's noise variant (independent of the build order)."""
    return torch.Generator().manual_seed((zlib.crc32(key.encode()) * 1000003 + variant * 7919
                                          + seed) % (2 ** 63))


def cache_identity(backbone: torch.nn.Module, noise: ExtrinsicNoiseConfig, variants: int,
                   seed: int, dtype: str) -> Dict[str, str]:
    ident = backbone_identity(backbone)
    ident.update({"noise": json.dumps([noise.rot_std_deg, noise.trans_std_m]),
                  "variants": str(variants), "seed": str(seed), "dtype": dtype})
    return ident


def identity_hash(identity: Dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


class FeatureTable:
    """In-memory features of many groups: ``get(key, variant) -> [N, P, D]`` float32."""

    def __init__(self, shards: List[Tuple[List[str], torch.Tensor]]) -> None:
        self._tensors = [t for _, t in shards]
        self._where: Dict[str, Tuple[int, int]] = {}
        for s, (keys, _) in enumerate(shards):
            for row, key in enumerate(keys):
                self._where[key] = (s, row)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    @property
    def variants(self) -> int:
        return int(self._tensors[0].shape[1]) if self._tensors else 0

    def get(self, key: str, variant: int = 0) -> torch.Tensor:
        if key not in self._where:
            raise KeyError(f"group {key!r} is not in the feature cache")
        s, row = self._where[key]
        return self._tensors[s][row, variant].float()


def _read_shard(path: Path, identity: Dict[str, str]) -> Tuple[List[str], torch.Tensor]:
    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata() or {}
        if meta.get("format") != SHARD_FORMAT:
            raise ValueError(f"{path}: not a training feature shard")
        for field, value in identity.items():
            if meta.get(field) != value:
                raise ValueError(f"{path}: {field} differs from the current backbone / settings")
        return json.loads(meta["keys"]), handle.get_tensor("features")


@torch.no_grad()
def build_feature_cache(specs: Sequence[GroupSpec], store: TrajectoryStore,
                        backbone: torch.nn.Module, cache_dir: str | Path,
                        noise: ExtrinsicNoiseConfig, variants: int = 2, seed: int = 0,
                        dtype: str = "float16", batch_size: int = 8, shard_size: int = 256,
                        progress: bool = True) -> FeatureTable:
    """Encode every group once per noise variant (skipping finished shards) and load them.

    Args:
        specs: the groups (of any sizes: each shard holds one size).
        store: trajectories at the backbone's image size.
        backbone: the frozen encoder (eval mode is set here).
        cache_dir: parent directory of the cache.
        noise: extrinsic-noise magnitudes of the variants v >= 1.
        variants: V.
    """
    if not specs:
        raise ValueError("no group to cache")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    backbone.eval()
    device = next(backbone.parameters()).device
    identity = cache_identity(backbone, noise, variants, seed, dtype)
    folder = Path(cache_dir) / identity_hash(identity)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "identity.json").write_text(json.dumps(identity, indent=1, sort_keys=True))
    shards = []
    # A shard holds groups of one size; the sizes are cut separately, each in the given order
    # (with one size, the shards are those of earlier versions, so existing caches stay valid).
    by_size: Dict[int, List[GroupSpec]] = {}
    for spec in specs:
        by_size.setdefault(len(store.frames(spec)), []).append(spec)
    chunks = [part[k:k + shard_size] for _, part in sorted(by_size.items())
              for k in range(0, len(part), shard_size)]
    bar = tqdm(total=len(specs), desc="cache features", unit="group", disable=not progress)
    for chunk in chunks:
        keys = [group_key(s) for s in chunk]
        digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
        path = folder / f"shard_{digest}.safetensors"  # named by content: runs never collide
        if path.is_file():
            stored_keys, tensor = _read_shard(path, identity)
            if stored_keys == keys:
                shards.append((keys, tensor))
                bar.update(len(chunk))
                continue
            logger.warning("%s holds other groups; rebuilding it", path)
        rows = []
        for start in range(0, len(chunk), batch_size):
            part = chunk[start:start + batch_size]
            groups = store.load_many(part)
            sizes = {g.images.shape[0] for g in groups}
            if len(sizes) != 1:
                raise ValueError(f"groups of different sizes {sorted(sizes)} in one shard")
            images = torch.stack([g.images for g in groups])
            ks = torch.stack([g.intrinsics for g in groups])
            clean = torch.stack([g.cam_to_anchor for g in groups])
            per_variant = []
            for v in range(variants):
                if v == 0:
                    poses = clean
                else:
                    poses = torch.stack([
                        perturb_poses(clean[b], noise,
                                      variant_generator(keys[start + b], v, seed))
                        for b in range(len(part))])
                per_variant.append(backbone(images.to(device), ks.to(device), poses.to(device))
                                   .to(DTYPES[dtype]).cpu())
            rows.append(torch.stack(per_variant, dim=1))  # [b, V, N, P, D]
            bar.update(len(part))
        tensor = torch.cat(rows).contiguous()
        meta = {"format": SHARD_FORMAT, "keys": json.dumps(keys), **identity}
        tmp = path.with_name(path.name + ".tmp")
        save_file({"features": tensor}, str(tmp), metadata=meta)
        tmp.replace(path)
        shards.append((keys, tensor))
    bar.close()
    return FeatureTable(shards)
