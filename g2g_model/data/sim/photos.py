"""Photographs as surface textures (random real photographs on simple geometry).

Every photograph comes from a package that ``requirements/python.txt`` installs, read from the
package's own files (nothing is downloaded): scikit-image's bundled samples, matplotlib's sample
data and scikit-learn's sample images. ``PHOTOS`` records each one's source and licence (also
listed in docs/SIMULATOR.md). Each photograph gives ``CROPS_PER_PHOTO`` square crops at a few
positions and scales, made seamlessly tileable (see :func:`make_tileable`), so one photograph
covers walls, floors and furniture of any size without visible tile borders.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Photo:
    """One photograph: ``name``, the ``package`` and ``loader`` (function or file) it comes
    from, its ``licence``, where the package says it comes from (``origin``) and whether it has
    ``colour`` (grey ones take their colour from the material tint)."""

    name: str
    package: str
    loader: str
    licence: str
    origin: str
    colour: bool = True


PHOTOS: tuple[Photo, ...] = (
    Photo("astronaut", "scikit-image", "skimage.data.astronaut", "public domain",
          "NASA Great Images database (Eileen Collins)"),
    Photo("coffee", "scikit-image", "skimage.data.coffee", "CC0",
          "Rachel Michetti, courtesy of Pikolo Espresso Bar"),
    Photo("chelsea", "scikit-image", "skimage.data.chelsea", "CC0", "Stefan van der Walt"),
    Photo("rocket", "scikit-image", "skimage.data.rocket", "public domain",
          "SpaceX photos (DSCOVR launch on Falcon 9)"),
    Photo("hubble_deep_field", "scikit-image", "skimage.data.hubble_deep_field",
          "public domain", "NASA / hubblesite.org"),
    Photo("immunohistochemistry", "scikit-image", "skimage.data.immunohistochemistry",
          "no known copyright restrictions", "scikit-image sample data"),
    Photo("retina", "scikit-image", "skimage.data.retina", "CC0",
          "Wikimedia Commons, Fundus photograph of normal left eye"),
    Photo("camera", "scikit-image", "skimage.data.camera", "CC0", "Lav Varshney",
          colour=False),
    Photo("coins", "scikit-image", "skimage.data.coins", "no known copyright restrictions",
          "Boston Public Library, Greek coins from Pompeii", colour=False),
    Photo("moon", "scikit-image", "skimage.data.moon", "no known copyright restrictions",
          "scikit-image sample data (moon surface)", colour=False),
    Photo("brick", "scikit-image", "skimage.data.brick", "CC0", "CC0Textures, Bricks25",
          colour=False),
    Photo("grass", "scikit-image", "skimage.data.grass", "CC0",
          "DeviantArt, linolafett Grass-01", colour=False),
    Photo("gravel", "scikit-image", "skimage.data.gravel", "CC0", "CC0Textures, Gravel04",
          colour=False),
    Photo("cell", "scikit-image", "skimage.data.cell", "CC0",
          "Paul Mueller et al., quantitative phase image", colour=False),
    Photo("grace_hopper", "matplotlib", "sample_data/grace_hopper.jpg", "public domain",
          "U.S. Navy photograph (Grace Hopper)"),
    Photo("china", "scikit-learn", "china.jpg", "CC BY 2.0",
          "danielbuechele on Flickr (photo 6061409035), via scikit-learn"),
    Photo("flower", "scikit-learn", "flower.jpg", "CC BY 2.0",
          "vultilion on Flickr (photo 6056698931), via scikit-learn"),
)
CROPS_PER_PHOTO = 3
PHOTO_TEXTURE_NAMES = tuple(f"photo_{p.name}{i}" for p in PHOTOS for i in range(CROPS_PER_PHOTO))


def load_photo(photo: Photo) -> np.ndarray:
    """The photograph as float RGB ``[H,W,3]`` in [0,1] (grey repeated, alpha on white)."""
    if photo.package == "scikit-image":
        return skimage_image(photo.loader.rsplit(".", 1)[1])
    if photo.package == "matplotlib":
        import matplotlib.cbook

        path = matplotlib.cbook.get_sample_data(photo.loader.split("/", 1)[1], asfileobj=False)
        img = cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    elif photo.package == "scikit-learn":
        from sklearn.datasets import load_sample_image

        img = np.asarray(load_sample_image(photo.loader))
    else:
        raise ValueError(f"unknown photograph package {photo.package!r}")
    return _to_rgb(img)


def skimage_image(name: str) -> np.ndarray:
    """A ``skimage.data`` sample as float RGB ``[H,W,3]`` in [0,1]."""
    import skimage.data  # heavy import: only when a library is first built

    return _to_rgb(np.asarray(getattr(skimage.data, name)()))


def _to_rgb(img: np.ndarray) -> np.ndarray:
    """uint8 / bool grey, RGB or RGBA -> float RGB in [0,1] (alpha composited on white)."""
    if img.dtype == bool:
        img = img.astype(np.uint8) * 255
    img = img.astype(np.float32) / 255.0
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    if img.shape[-1] == 4:
        img = img[..., :3] * img[..., 3:] + (1.0 - img[..., 3:])
    return img


def make_tileable(img: np.ndarray) -> np.ndarray:
    """Square ``[S,S,C]`` image -> one that repeats without seams.

    Per axis, cross-fade the image with itself shifted by half a period, with a weight that is 1
    in the middle and 0 at the borders: at the borders the result is the shifted copy, which is
    continuous across the wrap, and the shifted copy's own seam falls where the weight hides it.
    (No installed library offers this; it is the usual half-shift cross-fade.)
    """
    s = img.shape[0]
    w = np.sin(np.pi * (np.arange(s, dtype=np.float32) + 0.5) / s) ** 2
    out = img
    for axis in (0, 1):
        shape = [1, 1, 1]
        shape[axis] = s
        wa = w.reshape(shape)
        out = wa * out + (1.0 - wa) * np.roll(out, s // 2, axis=axis)
    return out


def photo_crops(size: int) -> np.ndarray:
    """``[len(PHOTO_TEXTURE_NAMES), size, size, 3]`` float32: tileable crops, brightness
    normalised to a mean of 0.6 (the material tint adds colour and level)."""
    rng = np.random.default_rng(54321)
    out = []
    for photo in PHOTOS:
        img = load_photo(photo)
        h, w = img.shape[:2]
        for _ in range(CROPS_PER_PHOTO):
            side = int(min(h, w) * rng.uniform(0.35, 0.8))
            y0 = int(rng.integers(0, h - side + 1))
            x0 = int(rng.integers(0, w - side + 1))
            crop = cv2.resize(img[y0:y0 + side, x0:x0 + side], (size, size),
                              interpolation=cv2.INTER_AREA)
            crop = make_tileable(crop)
            crop = crop / max(float(crop.mean()), 1e-3) * 0.6
            out.append(np.clip(crop, 0.0, 1.0))
    return np.stack(out).astype(np.float32)
