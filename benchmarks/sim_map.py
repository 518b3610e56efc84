"""A simulated map and query for the covisibility benchmarks, generated once and cached.

Scene ``seed`` (a held-out test scene by default) is rendered twice with ``g2g-sim``: traversal
0 becomes the map (every frame of every camera, so ``frames x cameras`` map frames), traversal 1
(another season, the places visited in reverse order) supplies the query. Images are rendered at
the shipped model's input size (112 px), with depth for the true overlap.

Everything lives under ``cache_dir/<spec key>/`` and is reused: trajectory generation is
resumable (complete trajectories are skipped), and the map file (images + cached encoder tokens)
is rebuilt only when missing or built with another encoder.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from g2g_model.covisibility.labels import resize_depth
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.overlap import overlap_matrix
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.estimation.groups import Group
from g2g_model.maps.format import MapError, read_map_header, save_map

LOG = logging.getLogger(__name__)

DEFAULT_CACHE = pathlib.Path("outputs/bench_covisibility")
LABEL_HW = (56, 56)  # depth size of the true overlap (the covisibility evaluation protocol)


@dataclasses.dataclass(frozen=True)
class SimMapSpec:
    """What to simulate: ``frames`` rig frames per traversal of scene ``seed``."""

    seed: int = 20000
    scene_preset: str = "default"
    rig_preset: str = "ring4"
    frames: int = 750
    image_size: int = 112

    def key(self) -> str:
        return (f"scene{self.seed}_{self.scene_preset}_{self.rig_preset}_f{self.frames}"
                f"_{self.image_size}px")

    def sim_config(self) -> SimConfig:
        return SimConfig(scene_preset=self.scene_preset, rig_preset=self.rig_preset,
                         traversals=2, frames=self.frames, image_size=self.image_size,
                         with_depth=True)


def generate(spec: SimMapSpec, cache_dir=DEFAULT_CACHE) -> Tuple[pathlib.Path, float]:
    """Render (or reuse) both traversals; returns (scene directory, seconds spent rendering)."""
    root = pathlib.Path(cache_dir) / spec.key()
    seconds = 0.0
    paths = []
    for traversal in (0, 1):
        info = generate_trajectory(root, spec.seed, traversal, spec.sim_config())
        seconds += info.get("seconds", 0.0)
        paths.append(pathlib.Path(info["path"]))
        if not info["skipped"]:
            LOG.info("rendered %d camera-frames in %.1f s", info["camera_frames"],
                     info["seconds"])
    return paths[0].parent, seconds


def trajectory(scene_dir: pathlib.Path, traversal: int) -> TrajectoryReader:
    return TrajectoryReader(pathlib.Path(scene_dir) / f"traj_{traversal:02d}")


def map_path(scene_dir: pathlib.Path, encoder: Dict) -> pathlib.Path:
    return pathlib.Path(scene_dir) / f"map_{encoder['name']}_{encoder['config_hash']}.g2gmap"


def build_map(scene_dir: pathlib.Path, pipeline) -> Tuple[pathlib.Path, Optional[float]]:
    """The map of traversal 0 (all frames, all cameras, tokens cached), built if missing.

    Returns (map file, seconds to build it or None when it was reused).
    """
    from g2g_model.maps.building import build_map_from_trajectory

    path = map_path(scene_dir, pipeline.backbone_id())
    if path.is_file():
        try:
            read_map_header(path)
            return path, None
        except MapError as exc:
            LOG.warning("rebuilding %s: %s", path, exc)
    t0 = time.perf_counter()
    gmap = build_map_from_trajectory(pathlib.Path(scene_dir) / "traj_00", pipeline,
                                     progress=False)
    save_map(gmap, path)
    return path, time.perf_counter() - t0


def query_group(reader: TrajectoryReader, camera: str, frames: Sequence[int]) -> Group:
    """Frames ``frames`` of one camera of a trajectory as a G2G group (true world poses)."""
    frames = [int(i) for i in frames]
    if not frames or min(frames) < 0 or max(frames) >= reader.num_frames:
        raise ValueError(f"query frames {frames[:1]}..{frames[-1:]} outside the trajectory's "
                         f"0..{reader.num_frames - 1}")
    return Group(images=[reader.image(camera, i) for i in frames],
                 intrinsics=reader.rig[camera].K,
                 cam_to_world=reader.world_T_cam(camera)[frames],
                 stamps=[int(reader.timestamps_ns[i]) for i in frames])


def _reduced_depth(reader: TrajectoryReader, camera: str, frames: Sequence[int]):
    pairs = [resize_depth(reader.depth(camera, int(i)), reader.rig[camera].K, LABEL_HW)
             for i in frames]
    return (np.stack([d for d, _ in pairs]).astype(np.float32), np.stack([k for _, k in pairs]),
            reader.world_T_cam(camera)[np.asarray(frames, dtype=np.int64)])


def true_overlap(map_reader: TrajectoryReader, map_camera: str, query_reader: TrajectoryReader,
                 query_camera: str, query_frames: Sequence[int]) -> np.ndarray:
    """``[T_A, T_B]`` reference symmetric overlap of every frame of ``map_camera`` against the
    query frames (depth reduced to 56 x 56, all points: the covisibility evaluation protocol)."""
    depth_a, k_a, pose_a = _reduced_depth(map_reader, map_camera, range(map_reader.num_frames))
    depth_b, k_b, pose_b = _reduced_depth(query_reader, query_camera, query_frames)
    return overlap_matrix(depth_a, k_a, pose_a, depth_b, k_b, pose_b, size=None)
