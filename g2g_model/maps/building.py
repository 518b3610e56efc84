"""Building a map from keyframes: the one implementation behind `g2g-map build`, the
map_builder node, the demo and the benchmarks.

A camera's frame becomes a keyframe when the camera has moved ``min_translation_m`` or turned
``min_rotation_deg`` since that camera's previous keyframe (its first frame always does). A
keyframe is stored as PNG at the size relocalization's verifier describes images at
(``keyframe_max_px`` on the long side, an image wider than 16:9 the short side of a 16:9
image of it, :func:`~g2g_model.cameras.reduction.description_scale`; aspect kept, never below
the backbone's input; 0: as given), with consistent intrinsics: the verifier triangulates
the map's points from these images, and at the backbone's 112 x 112 (the size maps had before
2026-11-29) a real camera's image keeps few features and its aspect is lost.
:meth:`MapBuilder.finish` encodes every keyframe once with the backbone (which resizes to its
input) and returns the map.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from g2g_model.cameras.reduction import ImageNeeds
from g2g_model.estimation.groups import resize_with_intrinsics
from g2g_model.geometry import relative_pose, rotation_angle_deg
from g2g_model.localization.verifier_config import VerifierConfig
from g2g_model.maps.format import G2GMap, MapFrame, encode_image

#: The long side keyframes are stored at by default: relocalization's verification size.
KEYFRAME_MAX_PX = VerifierConfig.max_image_px

LOG = logging.getLogger(__name__)


class MapBuilder:
    """Collects keyframes (thread-safe) and makes the map.

    Args:
        pipeline: a :class:`~g2g_model.estimation.pipeline.G2GPipeline` (its backbone encodes the
            map).
        min_translation_m, min_rotation_deg: the keyframe rule (module docstring).
        max_keyframes: refuse more keyframes than this (``ValueError``); None: no limit.
        keyframe_max_px: the long side keyframes are stored at (module docstring).
    """

    def __init__(self, pipeline, min_translation_m: float = 0.0, min_rotation_deg: float = 0.0,
                 max_keyframes: Optional[int] = None, keyframe_max_px: int = KEYFRAME_MAX_PX):
        if keyframe_max_px < 0:
            raise ValueError(f"keyframe_max_px must be >= 0 (0: as given), got {keyframe_max_px}")
        self.pipeline = pipeline
        self.needs = ImageNeeds(tuple(pipeline.image_size), int(keyframe_max_px))
        self.min_translation_m = float(min_translation_m)
        self.min_rotation_deg = float(min_rotation_deg)
        self.max_keyframes = max_keyframes
        self._frames: List[MapFrame] = []
        self._last_pose: Dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._frames)

    def wants(self, camera: str, world_T_cam: np.ndarray) -> bool:
        """Whether a frame of ``camera`` at ``world_T_cam`` is a keyframe."""
        with self._lock:
            last = self._last_pose.get(camera)
        if last is None:
            return True
        rel = relative_pose(last, world_T_cam)
        return bool(np.linalg.norm(rel[:3, 3]) >= self.min_translation_m
                    or rotation_angle_deg(rel[:3, :3]) >= self.min_rotation_deg)

    def offer(self, camera: str, stamp_ns: int, world_T_cam: np.ndarray,
              image: Union[np.ndarray, Callable[[], np.ndarray]], K: np.ndarray) -> bool:
        """Add the frame if it is a keyframe (``image`` may be a function that gives the RGB
        image, called only then); returns whether it was added."""
        if not self.wants(camera, world_T_cam):
            return False
        self.add(camera, stamp_ns, world_T_cam, image() if callable(image) else image, K)
        return True

    def add(self, camera: str, stamp_ns: int, world_T_cam: np.ndarray, image: np.ndarray,
            K: np.ndarray) -> None:
        """Add a keyframe: RGB ``uint8 [H, W, 3]`` with its K in pixels of that image."""
        h, w = image.shape[:2]
        size_w, size_h = self.needs.size(w, h)
        small, k_small = (image, np.asarray(K, float)) if (size_w, size_h) == (w, h) else \
            resize_with_intrinsics(image, K, (size_h, size_w))
        frame = MapFrame(camera=camera, stamp_ns=int(stamp_ns),
                         world_T_cam=np.asarray(world_T_cam, float), intrinsics=k_small,
                         image=encode_image(small), size_hw=small.shape[:2])
        with self._lock:
            if self.max_keyframes is not None and len(self._frames) >= self.max_keyframes:
                raise ValueError(f"max_keyframes={self.max_keyframes} reached")
            self._frames.append(frame)
            self._last_pose[camera] = frame.world_T_cam

    def clear(self) -> int:
        """Forget every keyframe; returns how many there were."""
        with self._lock:
            n = len(self._frames)
            self._frames, self._last_pose = [], {}
        return n

    def finish(self, rig: Optional[dict] = None, source: str = "") -> G2GMap:
        """Encode every keyframe once and return the map (``ValueError`` without keyframes).
        ``rig``: the rig description stored in the map (default: the cameras recorded)."""
        with self._lock:
            frames = list(self._frames)
        if not frames:
            raise ValueError("no keyframes recorded")
        t0 = time.perf_counter()
        feats = self.pipeline.encode_frames([f.decode() for f in frames],
                                            np.stack([f.intrinsics for f in frames]))
        LOG.info("encoded %d keyframes in %.1f s", len(frames), time.perf_counter() - t0)
        return G2GMap(frames=frames, features=feats, backbone=self.pipeline.backbone_id(),
                      rig=rig or {"cameras": sorted({f.camera for f in frames})},
                      source=source)


def build_map_from_trajectory(path, pipeline, cameras: Optional[Sequence[str]] = None,
                              min_translation_m: float = 0.0, min_rotation_deg: float = 0.0,
                              progress: bool = True,
                              keyframe_max_px: int = KEYFRAME_MAX_PX) -> G2GMap:
    """Keyframes of ``cameras`` (default: all) of one trajectory, encoded with ``pipeline``
    (``keyframe_max_px``: :class:`MapBuilder`)."""
    from tqdm import tqdm

    from g2g_model.data.format import TrajectoryReader

    reader = TrajectoryReader(path)
    cameras = list(cameras or reader.cameras)
    unknown = [c for c in cameras if c not in reader.cameras]
    if unknown:
        raise ValueError(f"{path}: no camera(s) {unknown}; the rig has {reader.cameras}")
    builder = MapBuilder(pipeline, min_translation_m, min_rotation_deg,
                         keyframe_max_px=keyframe_max_px)
    for cam in cameras:
        poses = reader.world_T_cam(cam)
        spec = reader.rig[cam]
        for i in tqdm(range(reader.num_frames), desc=f"keyframes {cam}", disable=not progress,
                      leave=False):
            builder.offer(cam, int(reader.timestamps_ns[i]), poses[i],
                          lambda: reader.image(cam, i), spec.K)
    if not len(builder):
        raise ValueError(f"{path}: no keyframes selected")
    return builder.finish(reader.rig.to_dict(), f"g2g-map build {path}")
