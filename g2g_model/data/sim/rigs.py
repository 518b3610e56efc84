"""Simulated camera rigs: named presets with a per-scene random perturbation.

Body frame REP-103 (x forward, y left, z up), cameras OpenCV (x right, y down, z forward). Camera
i of an N-camera ring looks at yaw ``360 i / N`` degrees (counter-clockwise from forward), sits
on a ring of radius ``RING_RADIUS`` around the body origin (or where a preset's
``positions_m`` puts it), and is perturbed per scene by small yaw / pitch / roll and offset
errors so that no two scenes share exactly the same calibration.

Presets may also vary the cameras themselves (drawn from their own random stream
``[seed, 2, 1]``, so presets without these keys are unchanged): ``aspect`` (image width / height
range, per scene; the image keeps about ``size x size`` pixels), ``hfov_jitter`` (each camera's
field of view x 1 +- this), ``principal_jitter`` (principal point off-centre by up to this
fraction of the image), ``position_scale`` (``positions_m`` x a factor per scene: car sizes,
stereo baselines) and ``pitches_deg`` (nominal pitch, e.g. -90: looking up).
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
    # Varied-camera rigs of real layouts (sizes, fields of view, aspect ratios per scene).
    # A car's front camera and two front-side ones 55 deg out: little overlap.
    "car3": dict(cameras=3, hfov_deg=(55.0, 100.0), yaws_deg=(0.0, 55.0, -55.0),
                 names=("front", "front_left", "front_right"),
                 positions_m=((1.9, 0.0), (1.7, 0.8), (1.7, -0.8)), position_scale=(0.8, 1.2),
                 aspect=(1.33, 1.9), hfov_jitter=0.1, principal_jitter=0.03),
    # Front, front-sides, sides and rear of a car (0-35 deg of overlap between neighbours).
    "car6": dict(cameras=6, hfov_deg=(60.0, 90.0),
                 yaws_deg=(0.0, 55.0, -55.0, 110.0, -110.0, 180.0),
                 names=("front", "front_left", "front_right", "left", "right", "rear"),
                 positions_m=((1.9, 0.0), (1.7, 0.8), (1.7, -0.8), (0.2, 0.9), (0.2, -0.9),
                              (-2.0, 0.0)),
                 position_scale=(0.8, 1.2), aspect=(1.33, 1.9), hfov_jitter=0.1,
                 principal_jitter=0.03),
    # A forward stereo pair, baseline 6-30 cm.
    "stereo": dict(cameras=2, hfov_deg=(50.0, 100.0), yaws_deg=(0.0, 0.0),
                   names=("left", "right"), positions_m=((0.0, 0.5), (0.0, -0.5)),
                   position_scale=(0.06, 0.3), aspect=(1.0, 1.9), hfov_jitter=0.02,
                   principal_jitter=0.02),
    # Ladybug-like: five cameras 72 deg apart on a 4 cm ring (portrait images) and one up.
    "ladybug6": dict(cameras=6, hfov_deg=(70.0, 85.0),
                     yaws_deg=(0.0, 72.0, 144.0, 216.0, 288.0, 0.0),
                     pitches_deg=(0.0, 0.0, 0.0, 0.0, 0.0, -90.0),
                     names=("cam1", "cam2", "cam3", "cam4", "cam5", "up"),
                     positions_m=((0.04, 0.0), (0.012, 0.038), (-0.032, 0.024),
                                  (-0.032, -0.024), (0.012, -0.038), (0.0, 0.0)),
                     aspect=(0.7, 0.8), hfov_jitter=0.03, principal_jitter=0.02),
    # ZJH-like humanoid head: a front pair 30 deg out and two side cameras.
    "zjh4": dict(cameras=4, hfov_deg=(70.0, 110.0), yaws_deg=(30.0, -30.0, 90.0, -90.0),
                 names=("front_left", "front_right", "left", "right"),
                 positions_m=((0.06, 0.05), (0.06, -0.05), (0.0, 0.08), (0.0, -0.08)),
                 position_scale=(0.8, 1.3), aspect=(1.25, 1.8), hfov_jitter=0.05,
                 principal_jitter=0.03),
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


def _camera_variation(seed: int, cfg: dict, n: int, size: int) -> dict:
    """Per-scene image size, per-camera field-of-view factors and principal-point offsets, and
    the position scale of a preset (identity when it has none of these keys)."""
    rng = np.random.default_rng([int(seed), 2, 1])
    aspect = float(rng.uniform(*cfg["aspect"])) if "aspect" in cfg else 1.0
    width, height = int(round(size * np.sqrt(aspect))), int(round(size / np.sqrt(aspect)))
    jitter = cfg.get("hfov_jitter", 0.0)
    pp = cfg.get("principal_jitter", 0.0)
    return dict(width=width, height=height,
                hfov_factor=1.0 + rng.uniform(-jitter, jitter, n),
                principal=rng.uniform(-pp, pp, (n, 2)) * [width, height],
                position_scale=float(rng.uniform(*cfg.get("position_scale", (1.0, 1.0)))))


def make_rig(seed: int, preset: str = "random", size: int = IMAGE_SIZE) -> Rig:
    """Rig of scene ``seed`` for ``preset`` (deterministic). ``size``: the image side (square
    presets) or about ``sqrt(width * height)`` (presets with an ``aspect``)."""
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
    var = _camera_variation(seed, cfg, n, size)
    width, height = var["width"], var["height"]
    pitches = cfg.get("pitches_deg") or (0.0,) * n
    cams = []
    for name, yaw in zip(names, yaws):
        yaw_p = yaw + float(np.clip(rng.normal(0, YAW_JITTER_DEG), -2 * YAW_JITTER_DEG,
                                    2 * YAW_JITTER_DEG))
        pitch = float(np.clip(rng.normal(0, PITCH_JITTER_DEG), -8, 8)) + pitches[len(cams)]
        roll = float(np.clip(rng.normal(0, ROLL_JITTER_DEG), -4, 4))
        # Yaw about body z, then pitch (nose down positive) about the camera's right axis (-y).
        rot = _rot(2, yaw_p) @ _rot(1, pitch) @ _rot(0, roll) @ R_BODY_CAM_FORWARD
        nominal = (radius * np.cos(np.radians(yaw)), radius * np.sin(np.radians(yaw)))
        if "positions_m" in cfg:
            nominal = cfg["positions_m"][len(cams)]
            if "position_scale" in cfg:
                nominal = tuple(var["position_scale"] * c for c in nominal)
        pos = np.array([*nominal, rng.uniform(-0.02, 0.02)]) + rng.normal(0, 0.005, 3)
        K = pinhole_K(width, height, min(hfov * var["hfov_factor"][len(cams)], 170.0))
        K[:2, 2] += var["principal"][len(cams)]
        cams.append(CameraSpec(name=name, K=K, width=width, height=height,
                               T_body_cam=make_pose(rot, pos)))
    return Rig(cams)
