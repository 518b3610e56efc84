"""Generate simulated trajectories in the dataset format (library side of ``g2g-sim``).

Layout: ``<out>/scene_<seed:05d>/traj_<k:02d>/`` (one trajectory directory per traversal, see
docs/DATASET_FORMAT.md). Traversal k is rendered in appearance variant (season) k, so every pair
of traversals of a scene is a cross-season pair. Generation is resumable: a complete trajectory
is skipped, a partial one is rewritten from scratch.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from g2g_model.data.format import TrajectoryWriter, is_complete
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.rigs import make_rig
from g2g_model.data.sim.scene import make_scene
from g2g_model.data.sim.trajectory import MotionConfig, make_traversals
from g2g_model.data.splits import SPLIT_SEEDS

LOG = logging.getLogger(__name__)


@dataclass
class SimConfig:
    """What to generate per scene."""

    scene_preset: str = "default"
    rig_preset: str = "random"
    traversals: int = 3
    frames: int = 200
    image_size: int = 224
    with_depth: bool = True


def scene_dir(out_root: Path, seed: int) -> Path:
    return Path(out_root) / f"scene_{seed:05d}"


def trajectory_dir(out_root: Path, seed: int, traversal: int) -> Path:
    return scene_dir(out_root, seed) / f"traj_{traversal:02d}"


def _split_name(seed: int) -> str | None:
    for name, seeds in SPLIT_SEEDS.items():
        if seed in seeds:
            return name
    return None


def generate_trajectory(out_root: str | Path, seed: int, traversal: int, cfg: SimConfig,
                        overwrite: bool = False,
                        on_frame: Callable[[int], None] | None = None,
                        motion: MotionConfig | None = None) -> dict:
    """Render traversal ``traversal`` of scene ``seed``; returns a summary dict. ``motion``:
    the robot's motion statistics (default: a walking robot, :class:`MotionConfig`; e.g. a car's
    1-3 m steps for a benchmark), recorded in ``meta.json`` when given.

    Skips (``"skipped": True``) when the trajectory is already complete and not ``overwrite``.
    """
    path = trajectory_dir(Path(out_root), seed, traversal)
    if is_complete(path) and not overwrite:
        previous = json.loads((path / "meta.json").read_text()).get("sim_config")
        if previous != asdict(cfg):
            raise ValueError(f"{path}: complete but generated with {previous}, not {asdict(cfg)}"
                             f"; pass overwrite=True (--overwrite) or use another output root")
        return {"path": str(path), "skipped": True, "frames": 0, "camera_frames": 0}
    if not 0 <= traversal < cfg.traversals:
        raise ValueError(f"traversal {traversal} outside 0..{cfg.traversals - 1}")
    t0 = time.perf_counter()
    base = make_scene(seed, 0, cfg.scene_preset)
    traversals = make_traversals(base, cfg.traversals, cfg.frames, motion)
    scene = make_scene(seed, traversal, cfg.scene_preset)
    rig = make_rig(seed, cfg.rig_preset, cfg.image_size)
    renderer = Renderer(scene)
    trav = traversals[traversal]
    T_body_cam = rig.T_body_cams()
    K = rig.intrinsics()
    meta = {"source": "g2g-sim", "scene_seed": int(seed), "split": _split_name(seed),
            "traversal": int(traversal), "season": int(traversal), "sim_config": asdict(cfg)}
    if motion is not None:
        meta["motion"] = asdict(motion)
    with TrajectoryWriter(path, rig, with_depth=cfg.with_depth, overwrite=True,
                          meta=meta) as writer:
        for i, (stamp, pose) in enumerate(zip(trav.timestamps_ns, trav.world_T_body)):
            rgb, depth = renderer.render(pose[None] @ T_body_cam, K, cfg.image_size,
                                         cfg.image_size)
            writer.add_frame(int(stamp), pose, dict(zip(rig.names, rgb)),
                             dict(zip(rig.names, depth)) if cfg.with_depth else None)
            if on_frame is not None:
                on_frame(i)
    seconds = time.perf_counter() - t0
    LOG.info("scene %d traversal %d: %d frames x %d cameras in %.1f s", seed, traversal,
             cfg.frames, len(rig), seconds)
    return {"path": str(path), "skipped": False, "frames": cfg.frames,
            "camera_frames": cfg.frames * len(rig), "seconds": seconds}


def scene_layout_summary(seed: int, preset: str = "default") -> dict:
    """Small JSON-able description of a scene (rooms, doors) for inspection."""
    scene = make_scene(seed, 0, preset)
    return {
        "seed": seed,
        "rooms": np.concatenate([scene.room_lo, scene.room_hi], 1).round(3).tolist(),
        "doors": [{"rooms": [d.room_lo, d.room_hi], "axis": d.axis, "coord": round(d.coord, 3),
                   "span": [round(d.span[0], 3), round(d.span[1], 3)]} for d in scene.doors],
        "furniture_boxes": int(len(scene.box_lo)),
        "posters": int(len(scene.poster_room)),
    }
