"""Training / evaluation pairs of groups: relocalization windows and rig-odometry groups.

* Relocalization (``reloc``): the mined window index of ``g2g-data mine`` (``WindowPair``: a
  W-frame window of one camera in each of two traversals, with its max-mean overlap score), or
  an index of explicit frame lists (``FramesPair``, e.g. the windows a relocalization node used
  in a bag replay, written by ``g2g-eval-bag --pairs-index``).
* Rig odometry (``rig``): the index of ``g2g-data rig-pairs`` (``RigPair``: two frames of the
  same or of two traversals); each group holds every camera of the rig at its frame, or the
  cameras named by ``read_pairs(..., cameras=...)`` (a subset of a larger rig). Rig pairs
  have no overlap score; they get score 1 (the curriculum is normally off for this task).

A sample holds both groups' images, their clean anchor-relative input poses and the targets
``gt_a = T_{A0<-Ai}``, ``gt_b = T_{A0<-Bj}``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from g2g_model.data.mining import FramesPair, RigPair, WindowPair, read_index
from g2g_model.training.trajectory_groups import (GroupSpec, TrajectoryStore, group_key,
                                                  pair_targets)


@dataclass(frozen=True)
class PairItem:
    """One pair: group specs of A and B and the overlap score (1.0 when unknown)."""

    spec_a: GroupSpec
    spec_b: GroupSpec
    score: float


def _subset(items: List[PairItem], max_pairs: int, seed: int) -> List[PairItem]:
    if max_pairs and len(items) > max_pairs:
        rng = random.Random(seed)
        keep = sorted(rng.sample(range(len(items)), max_pairs))
        items = [items[k] for k in keep]
    return items


def _reloc_item(row) -> PairItem:
    if isinstance(row, FramesPair):
        return PairItem(("frames", row.traj_a, row.cam_a, FramesPair.parse_frames(row.frames_a)),
                        ("frames", row.traj_b, row.cam_b, FramesPair.parse_frames(row.frames_b)),
                        float(row.score))
    return PairItem(("win", row.traj_a, row.cam_a, int(row.start_a), int(row.window), 1),
                    ("win", row.traj_b, row.cam_b, int(row.start_b), int(row.window), 1),
                    float(row.score))


def _reverse(items: List[PairItem], fraction: float, seed: int) -> List[PairItem]:
    """A seeded ``fraction`` of the pairs with A and B exchanged (B becomes the anchor group)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"reverse_fraction must be in [0, 1], got {fraction}")
    if fraction == 0.0:
        return items
    rng = random.Random(seed + 1)
    return [PairItem(it.spec_b, it.spec_a, it.score) if rng.random() < fraction else it
            for it in items]


def read_pairs(task: str, root: str | Path, index: str, min_score: float = 0.0,
               max_pairs: int = 0, seed: int = 0, reverse_fraction: float = 0.0,
               cameras: Optional[Sequence[str]] = None) -> List[PairItem]:
    """Pairs of the index ``root/index`` for ``task`` (``reloc`` or ``rig``); with
    ``reverse_fraction`` > 0 that share of them (seeded) has A and B exchanged, so that a motion
    prior of the index (a rig that always walks forwards) cannot stand in for the images.
    ``cameras``: rig pairs only, the groups hold these cameras of the rig in this order (the
    first is the anchor) instead of all of them.

    Raises:
        ValueError: unknown task, missing index, ``cameras`` for relocalization pairs, or no
            pair left (an empty index).
    """
    if cameras is not None and task != "rig":
        raise ValueError("cameras selects the cameras of rig pairs; relocalization windows "
                         "name their camera in the index")
    # Checked against each rig when a group is loaded (TrajectoryStore.frames).
    subset = () if cameras is None else (tuple(str(c) for c in cameras),)
    path = Path(root) / index
    if not path.is_file():
        raise ValueError(f"pair index {path} does not exist")
    if task == "reloc":
        rows = read_index(path, (WindowPair, FramesPair))
        items = [_reloc_item(r) for r in rows if float(r.score) >= min_score]
    elif task == "rig":
        rows = read_index(path, RigPair)
        items = [PairItem(("rig", r.traj_a, int(r.frame_a)) + subset,
                          ("rig", r.traj_b, int(r.frame_b)) + subset, 1.0) for r in rows]
    else:
        raise ValueError(f"task must be 'reloc' or 'rig', got {task!r}")
    items = _reverse(_subset(items, max_pairs, seed), reverse_fraction, seed)
    if not items:
        raise ValueError(f"pair index {path} is empty (no pair with score >= {min_score})")
    return items


class PairDataset:
    """Pairs over a :class:`TrajectoryStore`.

    Args:
        items: the pairs.
        store: trajectories of the collection, at the backbone's image size.
    """

    def __init__(self, items: List[PairItem], store: TrajectoryStore) -> None:
        if not items:
            raise ValueError("a pair dataset needs at least one pair")
        self.items = list(items)
        self.store = store

    def __len__(self) -> int:
        return len(self.items)

    @property
    def scores(self) -> np.ndarray:
        return np.array([it.score for it in self.items], dtype=np.float64)

    def group_specs(self) -> List[GroupSpec]:
        """Every distinct group of the dataset, sorted by key (so that datasets with the same
        groups, in any order or direction, share their feature-cache shards)."""
        seen = {spec for it in self.items for spec in (it.spec_a, it.spec_b)}
        return sorted(seen, key=group_key)

    def targets(self, index: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(gt_a [N_A,4,4], gt_b [N_B,4,4])`` float64 (poses only, no image read)."""
        it = self.items[index]
        return pair_targets(self.store.world_poses(it.spec_a), self.store.world_poses(it.spec_b))

    def load(self, index: int) -> Dict[str, torch.Tensor]:
        """One sample: ``images_a [N_A,3,H,W]``, ``intrinsics_a``, ``poses_a`` (clean input
        poses, = ``gt_a``), the same for b, ``gt_a``, ``gt_b`` and ``score``."""
        it = self.items[index]
        ga, gb = self.store.load(it.spec_a), self.store.load(it.spec_b)
        gt_a, gt_b = pair_targets(ga.world_T_cam, gb.world_T_cam)
        return {"images_a": ga.images, "intrinsics_a": ga.intrinsics, "poses_a": ga.cam_to_anchor,
                "images_b": gb.images, "intrinsics_b": gb.intrinsics, "poses_b": gb.cam_to_anchor,
                "gt_a": torch.from_numpy(gt_a).float(), "gt_b": torch.from_numpy(gt_b).float(),
                "score": torch.tensor(it.score)}


def collate(samples: List[Dict[str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
    """Stack samples of equal shapes into a batch (``[B, ...]``)."""
    keys = samples[0].keys()
    out = {}
    for key in keys:
        shapes = {tuple(s[key].shape) for s in samples}
        if len(shapes) != 1:
            raise ValueError(f"batch field {key!r} has mixed shapes {sorted(shapes)}: groups of "
                             "one batch must have the same number of frames")
        out[key] = torch.stack([s[key] for s in samples])
    return out
