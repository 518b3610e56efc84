"""Cameras of a NeRF-style ``transforms.json`` (instant-ngp, nerfstudio, colmap2nerf) in the
dataset's conventions.

Such a file holds one camera model for all images (``fl_x fl_y cx cy w h``, and for an OpenCV
lens ``k1 k2 p1 p2``, optionally ``k3``) and per image a camera-to-world ``transform_matrix``
whose camera axes are OpenGL's: x right, y up, z backwards (the camera looks along -z). The
dataset format and the rest of g2g use OpenCV camera axes (x right, y down, z forward), so the
camera's y and z axes flip and its centre stays: ``world_T_cv = world_T_gl @ diag(1, -1, -1, 1)``.

The world of such a file is the reconstruction's (e.g. COLMAP's, re-centred and scaled by
colmap2nerf): its scale is arbitrary; ``metres_per_unit`` states the one assumed.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from g2g_model.cameras.lens import Lens

#: Camera axes: OpenCV's in OpenGL's (x kept, y and z flipped); its own inverse.
OPENGL_T_OPENCV = np.diag([1.0, -1.0, -1.0, 1.0])
ROTATION_ATOL = 1e-4


def opencv_cam_to_world(transform_matrix: Any, metres_per_unit: float = 1.0) -> np.ndarray:
    """``world_T_cam [4, 4]`` with OpenCV camera axes from a NeRF ``transform_matrix``
    (OpenGL camera axes), its translation multiplied by ``metres_per_unit``. Raises
    ``ValueError`` for a matrix that is not 4 x 4, not finite, or not a rotation and a
    translation (a reflection, a scale, a bottom row other than 0 0 0 1)."""
    T = np.asarray(transform_matrix, dtype=np.float64)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ValueError(f"transform_matrix must be a finite 4 x 4 matrix, got shape {T.shape}")
    if not (np.isfinite(metres_per_unit) and metres_per_unit > 0):
        raise ValueError(f"metres_per_unit must be > 0, got {metres_per_unit}")
    R = T[:3, :3]
    if (not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0], atol=ROTATION_ATOL)
            or not np.allclose(R.T @ R, np.eye(3), atol=ROTATION_ATOL)
            or np.linalg.det(R) < 0):
        raise ValueError("transform_matrix is not rigid (a rotation and a translation): "
                         f"{np.round(T, 6).tolist()}")
    out = T @ OPENGL_T_OPENCV
    out[:3, 3] *= metres_per_unit
    out[3] = (0.0, 0.0, 0.0, 1.0)
    return out


def transforms_lens(transforms: Mapping[str, Any], what: str = "camera") -> Lens:
    """The shared camera of a ``transforms.json`` as a :class:`Lens`: ``plumb_bob`` with
    ``D = (k1, k2, p1, p2, k3)`` (absent coefficients are 0), a pinhole when all are 0. Raises
    ``ValueError`` naming a missing field; per-frame intrinsics and fisheye models
    (``camera_model`` other than ``OPENCV``) are refused."""
    model = str(transforms.get("camera_model", "OPENCV"))
    if model != "OPENCV":
        raise ValueError(f"{what}: camera_model {model!r} is not supported (only OPENCV)")
    try:
        fx, fy, cx, cy = (float(transforms[k]) for k in ("fl_x", "fl_y", "cx", "cy"))
        width, height = int(transforms["w"]), int(transforms["h"])
    except KeyError as exc:
        raise ValueError(f"{what}: transforms.json lacks {exc.args[0]!r}") from None
    D = [float(transforms.get(k, 0.0)) for k in ("k1", "k2", "p1", "p2", "k3")]
    K = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    if not any(D):
        return Lens.pinhole(K, width, height, what)
    return Lens("plumb_bob", K, np.array(D), width, height, what)
