"""Decoded keyframe images of the loaded map, kept for the localizations that use them again.

Every localization decodes its map window's keyframes (JPEG or PNG in the map file) for G2G and
again, with the window's other cameras, for the verifier: about 4 ms a 480 x 360 JPEG, so 40 ms
or more a localization where tracking returns to the same windows over and over. The decoded
images are kept in a least-recently-used cache bounded in memory (:mod:`.bounded_cache`); they
are read-only, so no user of one can change it for the next.
"""

from __future__ import annotations

from typing import List, Sequence

import numpy as np

from g2g_model.localization.bounded_cache import BoundedCache

#: Memory of decoded images kept per map (about 120 images of 480 x 360).
DEFAULT_MB = 64.0


class MapImages:
    """``image(i)``: the RGB ``uint8 [H, W, 3]`` of ``gmap.frames[i]`` (read-only, cached)."""

    def __init__(self, gmap, max_mb: float = DEFAULT_MB):
        self.gmap = gmap
        self.cache = BoundedCache(int(max_mb * 2**20))

    def image(self, index: int) -> np.ndarray:
        index = int(index)
        hit = self.cache.get(index)
        if hit is None:
            hit = self.gmap.frames[index].decode()
            hit.setflags(write=False)
            hit = self.cache.put(index, hit)
        return hit

    def images(self, indices: Sequence[int]) -> List[np.ndarray]:
        return [self.image(i) for i in indices]
