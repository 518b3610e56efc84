"""Load groups of frames from trajectories of the dataset format, resized for a backbone.

A *group spec* names one group:

* ``("win", traj, cam, start, n, stride)``: a temporal window, frames ``start + k * stride`` of
  one camera (relocalization groups, pretraining windows);
* ``("rig", traj, frame)``: every camera of the rig at one frame (rig-odometry groups);
  ``("rig", traj, frame, cameras)``: the named cameras only, in that order (the first is the
  anchor), e.g. a 3- or 5-camera subset of a 6-camera car rig;
* ``("frames", traj, cam, (i0, i1, ...))``: the listed frames of one camera, anchor first (the
  windows of a bag replay's relocalization, ``FramesPair``).

``traj`` is relative to the collection root. Loading returns anchor-relative poses (frame 0 of
the group exactly the identity) and the world pose of the anchor, from which pair targets
``T_{A0<-Bj} = inv(world_T_A0) @ world_T_Bj`` follow.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

import cv2
import numpy as np
import torch

from g2g_model.data.format import TrajectoryReader
from g2g_model.geometry import invert_pose
from g2g_model.estimation.groups import resize_with_intrinsics

GroupSpec = Tuple


@dataclass
class LoadedGroup:
    """One group at the backbone's input size.

    Attributes:
        images: ``[N, 3, H, W]`` float32 RGB in [0, 1].
        intrinsics: ``[N, 3, 3]`` float32 K at H x W.
        cam_to_anchor: ``[N, 4, 4]`` float32 T_{X0<-Xi}, frame 0 the identity.
        world_T_cam: ``[N, 4, 4]`` float64 numpy camera-to-world poses.
        depth: ``[N, H, W]`` float32 metres (0 = invalid) or None.
    """

    images: torch.Tensor
    intrinsics: torch.Tensor
    cam_to_anchor: torch.Tensor
    world_T_cam: np.ndarray
    depth: Optional[torch.Tensor] = None


def group_key(spec: GroupSpec) -> str:
    """Stable text key of a group spec (used by the feature cache)."""
    return "|".join(str(x) for x in spec)


def relative_poses(world_T_cam: np.ndarray) -> np.ndarray:
    """``[N, 4, 4]`` world poses -> T_{X0<-Xi} with frame 0 exactly the identity."""
    rel = invert_pose(world_T_cam[0])[None] @ world_T_cam
    rel[0] = np.eye(4)
    return rel


def pair_targets(world_a: np.ndarray, world_b: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Ground truth ``(T_{A0<-Ai} [N_A,4,4], T_{A0<-Bj} [N_B,4,4])`` from world poses."""
    inv_a0 = invert_pose(world_a[0])
    gt_a = inv_a0[None] @ world_a
    gt_a[0] = np.eye(4)
    return gt_a, inv_a0[None] @ world_b


class TrajectoryStore:
    """Opens trajectories of one collection lazily (bounded cache of readers).

    Args:
        root: collection root.
        image_size: (H, W) the groups are resized to.
        max_open: readers kept open.
        workers: threads of :meth:`load_many` (0 or 1: in the caller's thread). Image decoding
            and resizing release the GIL, so threads keep a GPU fed where one thread cannot.
    """

    def __init__(self, root: str | Path, image_size: Tuple[int, int], max_open: int = 64,
                 workers: int = 0):
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValueError(f"dataset root {self.root} is not a directory")
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.max_open = max_open
        self.workers = int(workers)
        self._readers: "OrderedDict[str, TrajectoryReader]" = OrderedDict()
        self._lock = threading.Lock()
        self._pool: Optional[ThreadPoolExecutor] = None

    def reader(self, traj: str) -> TrajectoryReader:
        with self._lock:
            if traj not in self._readers:
                self._readers[traj] = TrajectoryReader(self.root / traj)
                while len(self._readers) > self.max_open:
                    self._readers.popitem(last=False)
            self._readers.move_to_end(traj)
            return self._readers[traj]

    def load_many(self, specs: list, with_depth: bool = False) -> list:
        """:meth:`load` of each spec, in order, on ``workers`` threads."""
        if self.workers <= 1 or len(specs) <= 1:
            return [self.load(s, with_depth) for s in specs]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="g2g-load")
        return list(self._pool.map(lambda s: self.load(s, with_depth), specs))

    def frames(self, spec: GroupSpec) -> list:
        """``[(camera, frame index)]`` of a group spec."""
        kind = spec[0]
        if kind == "win":
            _, traj, cam, start, n, stride = spec
            return [(cam, int(start) + k * int(stride)) for k in range(int(n))]
        if kind == "rig":
            traj, frame = spec[1], int(spec[2])
            names = list(self.reader(traj).cameras)
            cams = list(spec[3]) if len(spec) > 3 else names
            missing = [c for c in cams if c not in names]
            if missing or not cams or len(set(cams)) != len(cams):
                raise ValueError(f"{traj}: cameras {cams} are not distinct cameras of its rig "
                                 f"{names}" + (f" (no {', '.join(missing)})" if missing else ""))
            return [(cam, frame) for cam in cams]
        if kind == "frames":
            _, traj, cam, frames = spec
            if cam not in self.reader(traj).cameras:
                raise ValueError(f"{spec}: trajectory {traj} has no camera {cam!r}")
            return [(cam, int(i)) for i in frames]
        raise ValueError(f"unknown group kind {kind!r} in {spec}")

    def world_poses(self, spec: GroupSpec) -> np.ndarray:
        """``[N, 4, 4]`` camera-to-world poses of a group (no image is read)."""
        reader = self.reader(spec[1])
        poses = {cam: reader.world_T_cam(cam) for cam in reader.cameras}
        return np.stack([poses[cam][i] for cam, i in self.frames(spec)])

    def load(self, spec: GroupSpec, with_depth: bool = False) -> LoadedGroup:
        """Images, intrinsics and poses (and optionally depth) of one group."""
        reader = self.reader(spec[1])
        height, width = self.image_size
        images, ks, depths = [], [], []
        for cam, i in self.frames(spec):
            if not 0 <= i < reader.num_frames:
                raise ValueError(f"{spec}: frame {i} outside 0..{reader.num_frames - 1}")
            img, k = resize_with_intrinsics(reader.image(cam, i), reader.rig[cam].K,
                                            (height, width))
            images.append(img)
            ks.append(k)
            if with_depth:
                dep = reader.depth(cam, i)
                if dep.shape != (height, width):
                    dep = cv2.resize(dep, (width, height), interpolation=cv2.INTER_NEAREST)
                depths.append(dep)
        world = self.world_poses(spec)
        image_t = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float().div_(255.0)
        return LoadedGroup(
            images=image_t.contiguous(),
            intrinsics=torch.from_numpy(np.stack(ks)).float(),
            cam_to_anchor=torch.from_numpy(relative_poses(world)).float(),
            world_T_cam=world,
            depth=torch.from_numpy(np.stack(depths)) if with_depth else None,
        )


def stack_groups(groups: list) -> Dict[str, torch.Tensor]:
    """Batch :class:`LoadedGroup` s of equal size: ``images [B, N, 3, H, W]`` etc."""
    sizes = {g.images.shape for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"groups of one batch must have equal shapes, got {sorted(sizes)}")
    out = {"images": torch.stack([g.images for g in groups]),
           "intrinsics": torch.stack([g.intrinsics for g in groups]),
           "cam_to_anchor": torch.stack([g.cam_to_anchor for g in groups])}
    if groups[0].depth is not None:
        out["depth"] = torch.stack([g.depth for g in groups])
    return out
