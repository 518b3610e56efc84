"""Per-camera exposure: gain and gamma that differ between cameras and drift over time.

Real rigs rarely share one exposure: each camera's auto-exposure meters its own view, and
sensors and lenses differ. ``exposure_schedule`` draws, per camera of a traversal, a base gain
(log-normal, sigma 0.25) and gamma (0.8-1.25) and adds a slow per-frame drift of the gain (as an
auto-exposure would), from the random stream ``[seed, 6, traversal]``; the renderer applies it to
the linear colour before quantisation (:func:`apply_exposure`).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

GAIN_RANGE = (0.5, 2.0)
GAMMA_RANGE = (0.8, 1.25)


def apply_exposure(rgb: np.ndarray, gain: float, gamma: float) -> np.ndarray:
    """``clip(gain * rgb, 0, 1) ** gamma`` for float colour in [0,1] (any shape)."""
    out = np.clip(rgb * np.float32(gain), 0.0, 1.0)
    return out if gamma == 1.0 else np.power(out, np.float32(gamma))


def exposure_schedule(seed: int, traversal: int, frames: int, cameras: int) -> np.ndarray:
    """``[frames, cameras, 2]`` (gain, gamma) of every camera at every frame (deterministic);
    gains stay in ``GAIN_RANGE``, gammas in ``GAMMA_RANGE``."""
    if frames < 1 or cameras < 1:
        raise ValueError(f"need frames >= 1 and cameras >= 1, got {frames}, {cameras}")
    rng = np.random.default_rng([int(seed), 6, int(traversal)])
    base = np.clip(rng.normal(0.0, 0.25, cameras), -0.5, 0.5)
    gamma = rng.uniform(*GAMMA_RANGE, cameras)
    drift = ndimage.gaussian_filter1d(rng.normal(0.0, 1.0, (frames + 40, cameras)), 10.0,
                                      axis=0)[20:frames + 20]
    drift = drift / (np.abs(drift).max() + 1e-9) * 0.2
    log_gain = np.clip(base[None] + drift, np.log(GAIN_RANGE[0]), np.log(GAIN_RANGE[1]))
    return np.stack([np.exp(log_gain), np.broadcast_to(gamma, (frames, cameras))], -1)
