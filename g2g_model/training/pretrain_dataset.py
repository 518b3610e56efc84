"""Stage-1 data of the compact backbone: single groups with depth (ARCHITECTURE §2).

Two kinds of groups from every trajectory with depth: temporal windows of one camera
(``group_size`` frames, ``frame_stride`` apart, every start) and rig groups (all cameras at one
frame). The backbone sees each group with some input poses hidden (see
:mod:`g2g_model.training.compact_pretrain`) and learns per-pixel depth and the hidden relative
poses. A batch holds one kind only (groups of one batch must have equal sizes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import torch

from g2g_model.data.format import find_trajectories
from g2g_model.training.trajectory_groups import GroupSpec, TrajectoryStore, stack_groups


def pretrain_specs(store: TrajectoryStore, group_size: int, frame_stride: int
                   ) -> Dict[str, List[GroupSpec]]:
    """``{"win": [...], "rig": [...]}`` group specs of every trajectory with depth."""
    if group_size < 1 or frame_stride < 1:
        raise ValueError(f"group_size and frame_stride must be >= 1, got {group_size}, "
                         f"{frame_stride}")
    wins: List[GroupSpec] = []
    rigs: List[GroupSpec] = []
    trajs = find_trajectories(store.root)
    if not trajs:
        raise ValueError(f"no complete trajectory under {store.root}")
    for path in trajs:
        rel = str(Path(path).relative_to(store.root)) if path != store.root else "."
        reader = store.reader(rel)
        if not reader.has_depth:
            continue
        span = (group_size - 1) * frame_stride
        for cam in reader.cameras:
            for start in range(0, reader.num_frames - span):
                wins.append(("win", rel, cam, start, group_size, frame_stride))
        rigs.extend(("rig", rel, i) for i in range(reader.num_frames))
    if not wins and not rigs:
        raise ValueError(f"no trajectory with depth under {store.root}: stage 1 needs depth")
    return {"win": wins, "rig": rigs}


class PretrainDataset:
    """Groups with depth for stage 1; ``load_batch(kind, indices)`` gives one batch."""

    def __init__(self, store: TrajectoryStore, group_size: int = 5, frame_stride: int = 2):
        self.store = store
        self.specs = pretrain_specs(store, group_size, frame_stride)

    def sizes(self) -> Dict[str, int]:
        return {k: len(v) for k, v in self.specs.items()}

    def load_batch(self, kind: str, indices: List[int]) -> Dict[str, torch.Tensor]:
        """``images [B,N,3,H,W]``, ``intrinsics``, ``cam_to_anchor`` (clean), ``depth``."""
        groups = self.store.load_many([self.specs[kind][i] for i in indices], with_depth=True)
        return stack_groups(groups)
