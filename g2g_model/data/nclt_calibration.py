"""NCLT's published Ladybug3 calibration, and a check of calibration files against it.

The numbers (facts, not code) are those the NCLT development kit ships in ``cam_params/``,
as reproduced in two public repositories that agree digit for digit:

* ethz-asl/nclt_tools, ``nclt-tools/python/sensor_extrinsics.py`` at commit
  ff4fcec42e54cde5d38b83189eed6228b2976b64: ``x_body_lb3``, ``x_lb3_c`` of Cam0-Cam5 and
  fx, fy, cx, cy of Cam0-Cam5;
* OPR-Project/OpenPlaceRecognition, ``src/opr/datasets/projection.py`` at commit
  ded86f5e7b998e94d9adb5eee5cc38528995dba6: ``x_body_lb3``, ``x_lb3_c`` and K of Cam2 and Cam5.

Conventions (the development kit's): a 6-vector is ``x, y, z, roll, pitch, yaw`` (metres,
degrees) with ``R = Rz(yaw) Ry(pitch) Rx(roll)``; ``x_lb3_c`` places camera ``c`` in the
Ladybug3 frame, ``x_body_lb3`` the Ladybug3 in the body frame (x forward, y right, z down). K
is the pinhole matrix of the undistorted 1616x1232 image as stored, i.e. before the 90 degree
rotation that makes the sideways-mounted cameras upright.

What the numbers say (checked by ``test/test_nclt_calibration.py``): Cam0 looks straight up;
Cam1-Cam5 form a horizontal ring 72 degrees apart, Cam5 facing forward (body +x), Cam1 72
degrees to its left, then Cam2, Cam3, Cam4 round to Cam5's right; each ring camera's stored
image x axis points down, so the image is rotated 90 degrees clockwise to be upright.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from g2g_model.geometry import make_pose

IMAGE_WH = (1616, 1232)  # stored (unrotated) image size that K refers to
X_BODY_LB3 = (0.035, 0.002, -1.23, -179.93, -0.23, 0.50)
X_LB3_C: Dict[int, Tuple[float, ...]] = {
    0: (0.000920, -0.000569, 0.062413, -0.028132, 0.196467, 0.248664),
    1: (0.014543, 0.039337, 0.000398, -138.449751, 89.703877, -66.518051),
    2: (-0.032674, 0.025928, 0.000176, 160.101024, 89.836345, -56.101163),
    3: (-0.034969, -0.022993, 0.000030, 95.603967, 89.724274, -48.640335),
    4: (0.011238, -0.040367, -0.000393, -160.239278, 89.812338, 127.472911),
    5: (0.041862, -0.001905, -0.000212, 160.868615, 89.914152, 160.619894),
}
# fx, fy, cx, cy of the undistorted stored image (pixels).
INTRINSICS: Dict[int, Tuple[float, float, float, float]] = {
    0: (410.777504, 410.777504, 805.879152, 613.277472),
    1: (409.719024, 409.719024, 813.947840, 624.237344),
    2: (408.385824, 408.385824, 793.959536, 623.058320),
    3: (406.802144, 406.802144, 810.874208, 617.352928),
    4: (403.920816, 403.920816, 823.270544, 601.929520),
    5: (399.433184, 399.433184, 826.361952, 621.668624),
}
SKY_CAMERA = 0
RING_CAMERAS = (1, 2, 3, 4, 5)
FORWARD_CAMERA = 5

# Beyond these a calibration file is not NCLT's published one (another rig, a unit mix-up).
TOL_TRANSLATION_M = 0.005
TOL_ROTATION_DEG = 0.5
TOL_PIXELS = 2.0


def ssc_to_pose(values: Sequence[float], degrees: bool) -> np.ndarray:
    """``(x, y, z, roll, pitch, yaw)`` -> 4x4 with ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    x, y, z, roll, pitch, yaw = [float(v) for v in values]
    if degrees:
        roll, pitch, yaw = np.radians([roll, pitch, yaw])
    cr, sr, cp, sp, cy, sy = (np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch),
                              np.cos(yaw), np.sin(yaw))
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return make_pose(rz @ ry @ rx, [x, y, z])


def published_K(cam: int) -> np.ndarray:
    fx, fy, cx, cy = INTRINSICS[cam]
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def _rotation_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = (np.trace(a.T @ b) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def calibration_differences(cam: int, K: np.ndarray, lb3_T_cam: np.ndarray,
                            image_wh: Sequence[int]) -> List[str]:
    """How camera ``Cam{cam}``'s calibration (K of the stored image of size ``image_wh``,
    the camera's 4x4 pose in the Ladybug3 frame) departs from NCLT's published values beyond
    the tolerances above; empty when it matches. K is compared only at the published size."""
    if cam not in X_LB3_C:
        return [f"Cam{cam}: NCLT publishes no calibration for it (Cam0-Cam5)"]
    out = []
    ref = ssc_to_pose(X_LB3_C[cam], degrees=True)
    dt = float(np.linalg.norm(lb3_T_cam[:3, 3] - ref[:3, 3]))
    if dt > TOL_TRANSLATION_M:
        out.append(f"Cam{cam}: x_lb3_c position {dt * 100:.1f} cm from NCLT's published one")
    dr = _rotation_deg(lb3_T_cam[:3, :3], ref[:3, :3])
    if dr > TOL_ROTATION_DEG:
        out.append(f"Cam{cam}: x_lb3_c orientation {dr:.1f} deg from NCLT's published one "
                   f"(angles must be degrees)")
    if tuple(image_wh) == IMAGE_WH:
        dk = float(np.abs(np.asarray(K)[:2] - published_K(cam)[:2]).max())
        if dk > TOL_PIXELS:
            out.append(f"Cam{cam}: K differs from NCLT's published one by up to {dk:.1f} px")
    return out
