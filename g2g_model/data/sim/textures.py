"""Surface appearance for the simulator: procedural textures and real photographs.

Textures are tileable ``S x S`` RGB images in [0, 1] with ``MIP_LEVELS`` pre-blurred levels
(a cheap stand-in for mip-mapping: the renderer picks the level from the pixel footprint so that
distant surfaces do not alias). The library is built once per process from a fixed seed, so it is
identical on every machine.

Photographs come from scikit-image's bundled sample images (``skimage.data``: astronaut, coffee,
chelsea, rocket, ... all shipped inside the wheel, no download). They serve as posters on walls
and, for the grey-level material samples (brick, grass, gravel), as tinted surface textures.
After these come the tileable photograph crops of :mod:`.photos` (``PHOTO_TEXTURE_NAMES``, used
only by scenes built with ``photo_share > 0``, and loaded only for them: ``photos=True``); the
indices before them never change.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from g2g_model.data.sim.photos import PHOTO_TEXTURE_NAMES, photo_crops, skimage_image

TEX_SIZE = 128
MIP_LEVELS = 3
POSTER_SIZE = 256

# skimage.data loaders used as posters (colour or grey) and as real surface textures.
POSTER_IMAGES = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field",
                 "immunohistochemistry", "retina", "colorwheel", "camera", "coins", "moon",
                 "page", "text", "logo")
PHOTO_TEXTURES = ("brick", "grass", "gravel")
PROCEDURAL_KINDS = ("plaster", "planks", "tiles", "checker", "stripes", "carpet", "bricks", "dots")
BASE_TEXTURE_NAMES = tuple(f"{k}{i}" for k in PROCEDURAL_KINDS for i in range(2)) + PHOTO_TEXTURES
TEXTURE_NAMES = BASE_TEXTURE_NAMES + PHOTO_TEXTURE_NAMES


def _value_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """Tileable smooth noise ``[size,size]`` in [0,1] from a ``cells x cells`` random lattice."""
    lattice = rng.random((cells, cells)).astype(np.float32)
    big = np.tile(lattice, (3, 3))
    up = cv2.resize(big, (3 * size, 3 * size), interpolation=cv2.INTER_CUBIC)
    return np.clip(up[size:2 * size, size:2 * size], 0.0, 1.0)


def _procedural(kind: str, rng: np.random.Generator, s: int = TEX_SIZE) -> np.ndarray:
    """One grey-level pattern ``[s,s]`` in [0,1] (colour comes from the material tint)."""
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
    noise = _value_noise(rng, s, int(rng.integers(4, 12)))
    fine = _value_noise(rng, s, 32)
    if kind == "plaster":
        out = 0.75 + 0.15 * noise + 0.1 * fine
    elif kind == "planks":
        n = int(rng.integers(3, 7))
        plank = np.floor(yy * n)
        grain = 0.5 + 0.5 * np.sin(2 * np.pi * (xx * rng.integers(2, 6) + 3 * noise + plank))
        seam = (np.abs((yy * n) % 1.0) < 0.04).astype(np.float32)
        out = 0.55 + 0.25 * grain + 0.1 * (plank % 2) - 0.35 * seam
    elif kind == "tiles":
        n = int(rng.integers(2, 6))
        grout = ((xx * n) % 1.0 < 0.05) | ((yy * n) % 1.0 < 0.05)
        jitter = rng.random((n, n))[(yy * n).astype(int) % n, (xx * n).astype(int) % n]
        out = np.where(grout, 0.35, 0.75 + 0.2 * jitter + 0.05 * fine)
    elif kind == "checker":
        n = int(rng.integers(2, 5))
        out = 0.35 + 0.5 * ((np.floor(xx * 2 * n) + np.floor(yy * 2 * n)) % 2) + 0.1 * noise
    elif kind == "stripes":
        n = int(rng.integers(3, 9))
        out = 0.6 + 0.3 * (np.sin(2 * np.pi * n * xx) > 0.3) + 0.1 * fine
    elif kind == "carpet":
        out = 0.45 + 0.35 * fine + 0.2 * noise
    elif kind == "bricks":
        rows = int(rng.integers(4, 8))
        row = np.floor(yy * rows)
        shifted = (xx * rows / 2 + 0.5 * (row % 2)) % 1.0
        mortar = ((yy * rows) % 1.0 < 0.08) | (shifted < 0.06)
        out = np.where(mortar, 0.85, 0.45 + 0.25 * noise + 0.1 * fine)
    elif kind == "dots":
        n = int(rng.integers(3, 8))
        d = np.hypot((xx * n) % 1.0 - 0.5, (yy * n) % 1.0 - 0.5)
        out = np.where(d < 0.2, 0.3, 0.8) + 0.1 * noise
    else:
        raise ValueError(f"unknown procedural texture kind {kind!r}")
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _mips(texture: np.ndarray) -> np.ndarray:
    """``[S,S,3]`` -> ``[MIP_LEVELS,S,S,3]``: level k is blurred with sigma 2^k - 1 texels.

    The blur wraps around (tile 3x3, blur, crop) so the levels stay tileable.
    """
    s = texture.shape[0]
    tiled = np.tile(texture, (3, 3, 1))
    levels = [texture]
    for k in range(1, MIP_LEVELS):
        blurred = cv2.GaussianBlur(tiled, (0, 0), float(2 ** k - 1))
        levels.append(blurred[s:2 * s, s:2 * s])
    return np.stack(levels)


@functools.lru_cache(maxsize=2)
def texture_library(photos: bool = False) -> np.ndarray:
    """Surface textures ``[T, MIP_LEVELS, S, S, 3]`` float32 in [0,1]: the first
    ``len(BASE_TEXTURE_NAMES)`` of ``TEXTURE_NAMES``, all of them with ``photos`` (the
    photograph crops take a few seconds to build: only scenes that use them ask)."""
    rng = np.random.default_rng(12345)
    out = []
    for kind in PROCEDURAL_KINDS:
        for _ in range(2):
            grey = _procedural(kind, rng)
            out.append(_mips(np.repeat(grey[..., None], 3, axis=-1)))
    for name in PHOTO_TEXTURES:
        img = cv2.resize(skimage_image(name), (TEX_SIZE, TEX_SIZE), interpolation=cv2.INTER_AREA)
        img = img / max(float(img.mean()), 1e-3) * 0.6  # normalise brightness; tint adds colour
        out.append(_mips(np.clip(img, 0.0, 1.0)))
    if photos:
        out.extend(_mips(crop) for crop in photo_crops(TEX_SIZE))
    return np.stack(out).astype(np.float32)


@functools.lru_cache(maxsize=1)
def poster_library() -> tuple[np.ndarray, np.ndarray]:
    """Posters ``[P, MIP_LEVELS, S, S, 3]`` float32 and aspect ratios (width / height) ``[P]``."""
    images, aspects = [], []
    for name in POSTER_IMAGES:
        img = skimage_image(name)
        aspects.append(img.shape[1] / img.shape[0])
        small = cv2.resize(img, (POSTER_SIZE, POSTER_SIZE), interpolation=cv2.INTER_AREA)
        images.append(_mips(small))
    return np.stack(images).astype(np.float32), np.array(aspects, dtype=np.float32)
