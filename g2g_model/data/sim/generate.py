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
from typing import Callable, Iterator

import numpy as np

from g2g_model.data.format import TrajectoryWriter, is_complete
from g2g_model.data.rig import Rig
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.exposure import exposure_schedule
from g2g_model.data.sim.rigs import make_rig
from g2g_model.data.sim.scene import make_scene
from g2g_model.data.sim.trajectory import MOTION_PRESETS, MotionConfig, make_traversals
from g2g_model.data.splits import SPLIT_SEEDS

LOG = logging.getLogger(__name__)


PHOTO_SHARE = 0.5   # share of materials that are photographs with ``textures="photo"``
CHOICES = {"motion": tuple(MOTION_PRESETS), "textures": ("procedural", "photo"),
           "lighting": ("lamps", "random"), "exposure": ("fixed", "jitter")}


@dataclass
class SimConfig:
    """What to generate per scene. ``motion``: a :data:`MOTION_PRESETS` name; ``textures``:
    ``"photo"`` makes about half the materials photographs; ``lighting``: ``"random"`` adds a
    sun and random lamp / ambient gains; ``exposure``: ``"jitter"`` gives every camera its own
    drifting gain and gamma. The defaults render exactly what they always did."""

    scene_preset: str = "default"
    rig_preset: str = "random"
    traversals: int = 3
    frames: int = 200
    image_size: int = 224
    with_depth: bool = True
    motion: str = "walk"
    textures: str = "procedural"
    lighting: str = "lamps"
    exposure: str = "fixed"

    def __post_init__(self) -> None:
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {list(choices)}, "
                                 f"got {getattr(self, name)!r}")

    def scene(self, seed: int, season: int):
        """The scene of ``seed`` in ``season`` with this configuration's appearance options."""
        return make_scene(seed, season, self.scene_preset,
                          photo_share=PHOTO_SHARE if self.textures == "photo" else 0.0,
                          random_light=self.lighting == "random")


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
    the robot's motion statistics (default: ``cfg.motion``'s preset, the walking robot unless
    set; e.g. a car's 1-3 m steps for a benchmark), recorded in ``meta.json`` unless walking.

    Skips (``"skipped": True``) when the trajectory is already complete and not ``overwrite``.
    """
    path = trajectory_dir(Path(out_root), seed, traversal)
    if is_complete(path) and not overwrite:
        previous = json.loads((path / "meta.json").read_text()).get("sim_config")
        if previous is not None:  # written before a field existed: that field's default
            previous = {**asdict(SimConfig()), **previous}
        if previous != asdict(cfg):
            raise ValueError(f"{path}: complete but generated with {previous}, not {asdict(cfg)}"
                             f"; pass overwrite=True (--overwrite) or use another output root")
        return {"path": str(path), "skipped": True, "frames": 0, "camera_frames": 0}
    t0 = time.perf_counter()
    rig, motion, frames = render_traversal(seed, traversal, cfg, motion)
    meta = {"source": "g2g-sim", "scene_seed": int(seed), "split": _split_name(seed),
            "traversal": int(traversal), "season": int(traversal), "sim_config": asdict(cfg)}
    if motion is not None:
        meta["motion"] = asdict(motion)
    with TrajectoryWriter(path, rig, with_depth=cfg.with_depth, overwrite=True,
                          meta=meta) as writer:
        for i, (stamp, pose, rgb, depth) in enumerate(frames):
            writer.add_frame(stamp, pose, rgb, depth if cfg.with_depth else None)
            if on_frame is not None:
                on_frame(i)
    seconds = time.perf_counter() - t0
    LOG.info("scene %d traversal %d: %d frames x %d cameras in %.1f s", seed, traversal,
             cfg.frames, len(rig), seconds)
    return {"path": str(path), "skipped": False, "frames": cfg.frames,
            "camera_frames": cfg.frames * len(rig), "seconds": seconds}


def render_traversal(seed: int, traversal: int, cfg: SimConfig,
                     motion: MotionConfig | None = None
                     ) -> tuple[Rig, MotionConfig | None, Iterator[tuple]]:
    """``(rig, motion, frames)`` of traversal ``traversal`` of scene ``seed``: ``motion`` is
    the one used (``None``: the walking default), ``frames`` yields ``(stamp_ns, world_T_body,
    rgb, depth)`` per frame (images and depths as dicts by camera name), rendered lazily."""
    if not 0 <= traversal < cfg.traversals:
        raise ValueError(f"traversal {traversal} outside 0..{cfg.traversals - 1}")
    if motion is None and cfg.motion != "walk":
        motion = MOTION_PRESETS[cfg.motion]
    trav = make_traversals(cfg.scene(seed, 0), cfg.traversals, cfg.frames, motion)[traversal]
    renderer = Renderer(cfg.scene(seed, traversal))
    rig = make_rig(seed, cfg.rig_preset, cfg.image_size)
    # Every camera inside the scene at every frame, checked before any rendering: a rig wider
    # than the motion's clearance used to fail frames into a long render.
    centres = (trav.world_T_body[:, None] @ rig.T_body_cams()[None])[..., :3, 3]
    outside = np.flatnonzero((cfg.scene(seed, 0).room_of(centres.reshape(-1, 3)) < 0)
                             .reshape(centres.shape[:2]).any(1))
    if len(outside):
        reach = float(np.linalg.norm(rig.T_body_cams()[:, :2, 3], axis=1).max())
        radius = (motion or MotionConfig()).radius_m
        raise ValueError(
            f"scene {seed} traversal {traversal}: rig '{cfg.rig_preset}' has cameras outside "
            f"the scene at {len(outside)} frames (first {int(outside[0])}); its cameras reach "
            f"{reach:.2f} m from the body and the motion's clearance radius_m is {radius} m")
    exposure = None
    if cfg.exposure == "jitter":
        exposure = exposure_schedule(seed, traversal, cfg.frames, len(rig))

    def frames() -> Iterator[tuple]:
        for i, (stamp, pose) in enumerate(zip(trav.timestamps_ns, trav.world_T_body)):
            rgb, depth = render_rig(renderer, rig, pose,
                                    None if exposure is None else exposure[i])
            yield int(stamp), pose, rgb, depth

    return rig, motion, frames()


def render_rig(renderer: Renderer, rig: Rig, world_T_body: np.ndarray,
               exposure: np.ndarray | None = None) -> tuple[dict, dict]:
    """Images and depths (dicts by camera name) of ``rig`` at ``world_T_body``; cameras of one
    image size are rendered in one call. ``exposure``: ``[N,2]`` (gain, gamma) per camera."""
    T_body_cam, K = rig.T_body_cams(), rig.intrinsics()
    sizes = [(cam.width, cam.height) for cam in rig.cameras]
    rgb, depth = {}, {}
    for size in dict.fromkeys(sizes):
        idx = [i for i, s in enumerate(sizes) if s == size]
        imgs, deps = renderer.render(world_T_body[None] @ T_body_cam[idx], K[idx], *size,
                                     exposure=None if exposure is None else exposure[idx])
        for j, i in enumerate(idx):
            rgb[rig.names[i]], depth[rig.names[i]] = imgs[j], deps[j]
    return {n: rgb[n] for n in rig.names}, {n: depth[n] for n in rig.names}


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
