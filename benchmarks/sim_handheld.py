"""The simulated twin of the real-sequence relocalization replay (bench_real_reloc.py).

One camera (rig preset ``mono``, images of 640 x 480 like the real set's), 30 Hz, hand-held
walking (about 3.5 cm and at most 3 deg per frame at 1.2-1.6 m), rendered in a test-split scene:
the mapping pass walks a route, the query pass walks the same route again in another season
(lighting, paint, posters, small objects), half a frame later in time and with a slowly varying
hand offset (up to 10 cm sideways and 5 deg of yaw), so that it revisits the mapped views as a
person carrying a camera would.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np

from g2g_model.data.format import TrajectoryReader, TrajectoryWriter, is_complete
from g2g_model.data.rig import CameraSpec, Rig, pinhole_K
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.rigs import make_rig
from g2g_model.data.sim.scene import make_scene
from g2g_model.data.sim.trajectory import MotionConfig, make_traversals
from g2g_model.geometry import make_pose

SEED = 20001            # a test-split scene, never used for training
SCENES = (SEED, 20002)  # the twin's scenes in bench_real_reloc (20002: a floor repeating
#                         every 0.75 m)
HANDHELD = MotionConfig(rate_hz=30.0, step_m=(0.005, 0.085), height_m=(1.2, 1.6),
                        max_turn_deg=3.0)
HAND_OFFSET_M = 0.10
HAND_YAW_DEG = 5.0
TWIN_SIZE = (640, 480)  # the real set's camera (TUM RGB-D)


def _yaw(deg: np.ndarray) -> np.ndarray:
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    rot = np.zeros((len(deg), 3, 3))
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1.0
    return rot


def second_pass(world_T_body: np.ndarray, seed: int) -> np.ndarray:
    """The route walked again: poses halfway between consecutive frames, moved sideways
    (body y) and turned (about z) by smooth offsets (sums of two slow sines)."""
    mid = world_T_body.copy()
    mid[:-1, :3, 3] = 0.5 * (world_T_body[:-1, :3, 3] + world_T_body[1:, :3, 3])
    rng = np.random.default_rng([seed, 7])
    t = np.linspace(0.0, 1.0, len(mid))
    phase = rng.uniform(0, 2 * np.pi, 4)
    side = HAND_OFFSET_M * 0.5 * (np.sin(2 * np.pi * 1.3 * t + phase[0])
                                  + np.sin(2 * np.pi * 3.1 * t + phase[1]))
    yaw = HAND_YAW_DEG * 0.5 * (np.sin(2 * np.pi * 0.9 * t + phase[2])
                                + np.sin(2 * np.pi * 2.3 * t + phase[3]))
    offset = make_pose(_yaw(yaw), np.stack([np.zeros_like(side), side, np.zeros_like(side)], 1))
    return mid @ offset


def twin_rig(seed: int, size: Tuple[int, int]) -> Rig:
    """The ``mono`` rig of scene ``seed`` (its mounting and field of view) with images of
    ``size`` (width, height): a hand-held camera's 640 x 480 by default, as the real set's."""
    cam = make_rig(seed, "mono").cameras[0]
    hfov = float(np.degrees(2 * np.arctan(0.5 * cam.width / cam.K[0, 0])))
    return Rig([CameraSpec(cam.name, pinhole_K(*size, hfov), *size, cam.T_body_cam)])


def render_twin(out_root: Path, frames: int, size: Tuple[int, int] = TWIN_SIZE,
                seed: int = SEED) -> List[Path]:
    """Render ``<out_root>/scene_<seed>/traj_00`` (map) and ``traj_01`` (query) at ``size``
    (width, height); a complete pass of ``frames`` frames at that size is reused."""
    base = make_scene(seed, 0, "small")
    route = make_traversals(base, 1, frames, HANDHELD)[0]
    passes = [(route.timestamps_ns, route.world_T_body),
              (route.timestamps_ns + int(round(1e9 / HANDHELD.rate_hz)) * (frames + 30),
               second_pass(route.world_T_body, seed))]
    rig = twin_rig(seed, size)
    T_body_cam, K = rig.T_body_cams(), rig.intrinsics()
    paths = []
    for season, (stamps, poses) in enumerate(passes):
        path = Path(out_root) / f"scene_{seed:05d}" / f"traj_{season:02d}"
        paths.append(path)
        if is_complete(path):
            done = TrajectoryReader(path)
            if done.num_frames == frames and done.rig.cameras[0].size == tuple(size):
                continue
        renderer = Renderer(make_scene(seed, season, "small"))
        meta = {"source": "g2g-sim", "scene_seed": seed, "season": season, "split": "test",
                "motion": "hand-held, 30 Hz", "rig_preset": "mono"}
        with TrajectoryWriter(path, rig, with_depth=False, overwrite=True, meta=meta) as writer:
            for stamp, pose in zip(stamps, poses):
                rgb, _ = renderer.render(pose[None] @ T_body_cam, K, *size)
                writer.add_frame(int(stamp), pose, dict(zip(rig.names, rgb)), None)
    return paths
