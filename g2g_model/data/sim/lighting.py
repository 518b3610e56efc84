"""Randomized lighting of a scene: a directional "sun" and the gains of the lamps and ambient.

Drawn per scene and season from their own random stream (``[seed, 5, season]``), so it changes
nothing else in the scene and the same seed always lights the same way. Indoors the sun is a
directional fill light (no shadows, as for the lamps); outdoors (``street``, ``courtyard``) it is
the main light and the lamps fade.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Lighting:
    """``sun_dir [3]`` unit vector towards the sun, ``sun_rgb [3]``, ``ambient_gain [3]`` and
    ``lamp_gain [R]`` (factors on the scene's ambient level and lamp intensities), ``sky_rgb``
    (the light of an outdoor scene's sky)."""

    sun_dir: np.ndarray
    sun_rgb: np.ndarray
    ambient_gain: np.ndarray
    lamp_gain: np.ndarray
    sky_rgb: np.ndarray


def random_lighting(seed: int, season: int, num_rooms: int, outdoor: bool) -> Lighting:
    """Lighting of scene ``seed`` in ``season``: sun elevation 10-80 deg at any azimuth,
    intensity 0.2-0.8 (outdoors 0.6-1.1), colour from warm to cool; ambient x 0.5-1.4 with a
    slight tint (outdoors a sky-blue tint); lamps x 0.2-1.6 each (outdoors x 0-0.3); a sky
    0.8-1.15 bright, tinted like the ambient light."""
    rng = np.random.default_rng([int(seed), 5, int(season)])
    elev = np.radians(rng.uniform(10.0, 80.0))
    azim = rng.uniform(0.0, 2.0 * np.pi)
    sun_dir = np.array([np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim), np.sin(elev)])
    warm = rng.uniform(-1.0, 1.0)
    colour = np.array([1.0 + 0.2 * warm, 1.0, 1.0 - 0.25 * warm])
    sun_rgb = colour * (rng.uniform(0.6, 1.1) if outdoor else rng.uniform(0.2, 0.8))
    tint = rng.uniform(0.9, 1.1, 3)
    if outdoor:
        tint = tint * np.array([0.9, 1.0, 1.15])
    ambient_gain = tint * rng.uniform(0.5, 1.4)
    lamp_gain = rng.uniform(0.0, 0.3, num_rooms) if outdoor else rng.uniform(0.2, 1.6, num_rooms)
    sky_rgb = tint * rng.uniform(0.8, 1.15)
    return Lighting(sun_dir=sun_dir, sun_rgb=sun_rgb, ambient_gain=ambient_gain,
                    lamp_gain=lamp_gain, sky_rgb=sky_rgb)
