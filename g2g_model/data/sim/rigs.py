"""Simulated camera rigs: named presets with a per-scene random perturbation.

Body frame REP-103 (x forward, y left, z up), cameras OpenCV (x right, y down, z forward). Camera
i of an N-camera ring looks at yaw ``360 i / N`` degrees (counter-clockwise from forward), sits
on a ring of radius ``RING_RADIUS`` around the body origin (or where a preset's
``positions_m`` puts it), and is perturbed per scene by small yaw / pitch / roll and offset
errors so that no two scenes share exactly the same calibration.
"""

from __future__ import annotations

import numpy as np

from g2g_model.data.rig import R_BODY_CAM_FORWARD, CameraSpec, Rig, pinhole_K
from g2g_model.geometry import make_pose

# cameras: count or (min, max); hfov_deg: (min, max); yaws_deg: explicit nominal yaws.
RIG_PRESETS: dict[str, dict] = {
    "random": dict(cameras=(4, 8), hfov_deg=(45.0, 120.0)),
    "mono": dict(cameras=1, hfov_deg=(70.0, 70.0)),
    "ring4": dict(cameras=4, hfov_deg=(90.0, 90.0)),
    "ring5": dict(cameras=5, hfov_deg=(80.0, 80.0)),
    "ring8": dict(cameras=8, hfov_deg=(60.0, 60.0)),
    "humanoid4": dict(cameras=4, hfov_deg=(90.0, 90.0), yaws_deg=(30.0, -30.0, 90.0, -90.0),
                      names=("front_left", "front_right", "left", "right")),
    # A car: a forward stereo pair (0.8 m apart, turned 8 deg outwards), side and rear
    # cameras at the car's sides and back (positions_m: x forward, y left, instead of a ring);
    # the stereo pair overlaps by 64 deg, each of it with its side camera by 8 deg.
    "car5": dict(cameras=5, hfov_deg=(80.0, 80.0), yaws_deg=(8.0, -8.0, 80.0, -80.0, 180.0),
                 names=("front_left", "front_right", "left", "right", "rear"),
                 positions_m=((1.0, 0.4), (1.0, -0.4), (0.0, 0.9), (0.0, -0.9), (-1.2, 0.0))),
}
IMAGE_SIZE = 224
YAW_JITTER_DEG = 4.0
PITCH_JITTER_DEG = 3.0
ROLL_JITTER_DEG = 1.5
RING_RADIUS = (0.06, 0.15)


def _rot(axis: int, deg: float) -> np.ndarray:
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    r = np.eye(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def make_rig(seed: int, preset: str = "random", size: int = IMAGE_SIZE) -> Rig:
    """Rig of scene ``seed`` for ``preset`` (deterministic)."""
    if preset not in RIG_PRESETS:
        raise ValueError(f"rig preset must be one of {sorted(RIG_PRESETS)}, got {preset!r}")
    cfg = RIG_PRESETS[preset]
    rng = np.random.default_rng([int(seed), 2])
    count = cfg["cameras"]
    n = int(rng.integers(count[0], count[1] + 1)) if isinstance(count, tuple) else int(count)
    hfov = float(rng.uniform(*cfg["hfov_deg"]))
    yaws = cfg.get("yaws_deg") or tuple(360.0 * i / n for i in range(n))
    names = cfg.get("names") or tuple(f"cam{i}" for i in range(n))
    radius = rng.uniform(*RING_RADIUS)
    cams = []
    for name, yaw in zip(names, yaws):
        yaw_p = yaw + float(np.clip(rng.normal(0, YAW_JITTER_DEG), -2 * YAW_JITTER_DEG,
                                    2 * YAW_JITTER_DEG))
        pitch = float(np.clip(rng.normal(0, PITCH_JITTER_DEG), -8, 8))
        roll = float(np.clip(rng.normal(0, ROLL_JITTER_DEG), -4, 4))
        # Yaw about body z, then pitch (nose down positive) about the camera's right axis (-y).
        rot = _rot(2, yaw_p) @ _rot(1, pitch) @ _rot(0, roll) @ R_BODY_CAM_FORWARD
        nominal = (radius * np.cos(np.radians(yaw)), radius * np.sin(np.radians(yaw)))
        if "positions_m" in cfg:
            nominal = cfg["positions_m"][len(cams)]
        pos = np.array([*nominal, rng.uniform(-0.02, 0.02)]) + rng.normal(0, 0.005, 3)
        cams.append(CameraSpec(name=name, K=pinhole_K(size, size, hfov), width=size,
                               height=size, T_body_cam=make_pose(rot, pos)))
    return Rig(cams)
