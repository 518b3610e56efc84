"""Tiny simulated trajectories for tests (small scene, ring rig, no depth unless asked)."""

from __future__ import annotations

import pathlib
from typing import List

from g2g_model.data.sim.generate import SimConfig, generate_trajectory


def tiny_trajectories(out, seed: int, frames: int, traversals: int = 1, rig: str = "ring5",
                      depth: bool = False, scene: str = "small") -> List[pathlib.Path]:
    """Render ``traversals`` traversals of test scene ``seed`` under ``out``; their paths."""
    cfg = SimConfig(scene_preset=scene, rig_preset=rig, traversals=traversals, frames=frames,
                    with_depth=depth)
    return [pathlib.Path(generate_trajectory(out, seed=seed, traversal=k, cfg=cfg)["path"])
            for k in range(traversals)]
