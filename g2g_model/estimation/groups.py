"""Image groups as users hand them to G2G, and their validation and preprocessing.

A group is a list of RGB images with intrinsics and camera-to-world poses in ANY world frame
(OpenCV camera axes, metres). :func:`prepare_group` validates everything with ``ValueError``
messages that name the field and the frame, resizes the images to the backbone's input size
(adjusting the intrinsics consistently) and re-anchors the poses to frame 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import cv2
import numpy as np
import torch

from g2g_model.geometry import invert_pose, is_rotation

ArrayLike = Union[np.ndarray, Sequence]


@dataclass
class Group:
    """One group of frames.

    Attributes:
        images: N RGB images, each ``uint8 [H, W, 3]`` (sizes may differ between frames).
        intrinsics: one ``[3, 3]`` K for all frames or ``[N, 3, 3]``, in pixels of each image.
        cam_to_world: ``[N, 4, 4]`` camera-to-world poses, OpenCV axes, metres.
        stamps: optional N acquisition times (any unit); G2G does not use them (the
            relocalization verifier tells the window's first instant by them).
    """

    images: Sequence[np.ndarray]
    intrinsics: ArrayLike
    cam_to_world: ArrayLike
    stamps: Optional[Sequence[float]] = None


@dataclass
class PreparedGroup:
    """Tensors ready for a backbone (batch dimension of 1).

    Attributes:
        images: ``[1, N, 3, H, W]`` float32 RGB in [0, 1].
        intrinsics: ``[1, N, 3, 3]`` K for the resized images.
        cam_to_anchor: ``[1, N, 4, 4]`` T_{X0<-Xi}; frame 0 is exactly the identity.
        anchor_to_world: ``[4, 4]`` numpy, the original pose of frame 0 (to map results back).
    """

    images: torch.Tensor
    intrinsics: torch.Tensor
    cam_to_anchor: torch.Tensor
    anchor_to_world: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.images.shape[1])


def _as_group(group, name: str) -> Group:
    if isinstance(group, Group):
        return group
    if isinstance(group, dict):
        unknown = set(group) - {"images", "intrinsics", "cam_to_world", "stamps"}
        if unknown:
            raise ValueError(f"{name}: unknown keys {sorted(unknown)}")
        try:
            return Group(**group)
        except TypeError as exc:
            raise ValueError(f"{name}: {exc}") from None
    raise ValueError(f"{name}: expected a Group or a dict, got {type(group).__name__}")


def validate_group(group, name: str = "group", rotation_tol: float = 1e-3) -> Group:
    """Check shapes and values; raise ``ValueError`` naming the field and frame index."""
    group = _as_group(group, name)
    images = list(group.images)
    n = len(images)
    if n < 1:
        raise ValueError(f"{name}.images: at least 1 frame is required, got 0")
    for i, img in enumerate(images):
        img = np.asarray(img)
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(
                f"{name}.images[{i}]: expected uint8 [H, W, 3], got shape {img.shape}"
            )
        if img.dtype != np.uint8:
            raise ValueError(f"{name}.images[{i}]: expected dtype uint8, got {img.dtype}")
        if img.shape[0] < 8 or img.shape[1] < 8:
            raise ValueError(
                f"{name}.images[{i}]: image too small ({img.shape[1]}x{img.shape[0]})"
            )

    k = np.asarray(group.intrinsics, dtype=np.float64)
    if k.shape == (3, 3):
        k = np.broadcast_to(k, (n, 3, 3)).copy()
    if k.shape != (n, 3, 3):
        raise ValueError(f"{name}.intrinsics: expected [3, 3] or [{n}, 3, 3], got {k.shape}")
    for i in range(n):
        if not np.all(np.isfinite(k[i])):
            raise ValueError(f"{name}.intrinsics[{i}]: non-finite values")
        if k[i, 0, 0] <= 0 or k[i, 1, 1] <= 0:
            raise ValueError(
                f"{name}.intrinsics[{i}]: focal lengths must be positive, "
                f"got fx={k[i, 0, 0]:g} fy={k[i, 1, 1]:g}"
            )

    poses = np.asarray(group.cam_to_world, dtype=np.float64)
    if poses.shape != (n, 4, 4):
        raise ValueError(f"{name}.cam_to_world: expected [{n}, 4, 4], got {poses.shape}")
    for i in range(n):
        if not np.all(np.isfinite(poses[i])):
            raise ValueError(f"{name}.cam_to_world[{i}]: non-finite values")
        if not np.allclose(poses[i, 3], [0, 0, 0, 1], atol=1e-6):
            raise ValueError(f"{name}.cam_to_world[{i}]: last row must be [0, 0, 0, 1]")
        if not is_rotation(poses[i, :3, :3], atol=rotation_tol):
            raise ValueError(
                f"{name}.cam_to_world[{i}]: rotation is not orthonormal with det +1 "
                f"(tolerance {rotation_tol:g})"
            )
    if group.stamps is not None and len(group.stamps) != n:
        raise ValueError(f"{name}.stamps: expected {n} values, got {len(group.stamps)}")
    return Group(images=images, intrinsics=k, cam_to_world=poses, stamps=group.stamps)


def scale_intrinsics(k, sx: float, sy: float):
    """K (``[..., 3, 3]``, numpy or torch, a copy) for an image scaled by ``sx`` x ``sy``, pixel
    centres at integer coordinates: x' + 0.5 = sx (x + 0.5)."""
    k = k.copy() if isinstance(k, np.ndarray) else k.clone()
    for axis, s in ((0, sx), (1, sy)):
        k[..., axis, axis] *= s
        k[..., axis, 2] = (k[..., axis, 2] + 0.5) * s - 0.5
    return k


def resize_with_intrinsics(image: np.ndarray, k: np.ndarray, size_hw: tuple):
    """Resize ``image`` to ``size_hw`` and scale K consistently (pixel-centre convention).

    Shrinking averages areas: first exact halvings while the image stays at least the target
    size (OpenCV's 2 x 2 fast path: a 1936 x 1216 image halves in ~1 ms, while one area resize
    of it to 320 px took ~9 ms), then one area resize for the rest; each step keeps the
    pixel-centre convention, so K scales by the total factor."""
    h, w = image.shape[:2]
    out_h, out_w = size_hw
    sx, sy = out_w / w, out_h / h
    if (h, w) != (out_h, out_w):
        shrink = sx < 1 and sy < 1
        while shrink and h % 2 == 0 and w % 2 == 0 and h // 2 >= out_h and w // 2 >= out_w:
            h, w = h // 2, w // 2
            image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
        if (h, w) != (out_h, out_w):
            image = cv2.resize(image, (out_w, out_h),
                               interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    return image, scale_intrinsics(k, sx, sy)


def prepare_group(group, image_size_hw: tuple, name: str = "group") -> PreparedGroup:
    """Validate, resize to ``image_size_hw`` and re-anchor a group (see module docstring)."""
    group = validate_group(group, name)
    images, ks = [], []
    for img, k in zip(group.images, group.intrinsics):
        img, k = resize_with_intrinsics(np.asarray(img), k, image_size_hw)
        images.append(img)
        ks.append(k)
    poses = np.asarray(group.cam_to_world)
    anchor_to_world = poses[0].copy()
    cam_to_anchor = invert_pose(anchor_to_world)[None] @ poses
    cam_to_anchor[0] = np.eye(4)  # exactly, not up to rounding
    image_t = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float().div_(255.0)
    return PreparedGroup(
        images=image_t[None],
        intrinsics=torch.from_numpy(np.stack(ks)).float()[None],
        cam_to_anchor=torch.from_numpy(cam_to_anchor).float()[None],
        anchor_to_world=anchor_to_world,
    )
