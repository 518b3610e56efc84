"""The loaded map's decoded keyframes (g2g_model/localization/map_images.py)."""

import numpy as np
import pytest

from g2g_model.localization.map_images import MapImages
from g2g_model.maps.format import G2GMap, MapFrame, encode_image


class CountingFrame(MapFrame):
    decodes = 0

    def decode(self):
        CountingFrame.decodes += 1
        return super().decode()


def _map(n=4, size=(48, 64)):
    rng = np.random.default_rng(0)
    frames = [CountingFrame("cam0", i, np.eye(4), np.eye(3),
                            encode_image(rng.integers(0, 256, (*size, 3), dtype=np.uint8)), size)
              for i in range(n)]
    return G2GMap(frames=frames)


def test_each_keyframe_is_decoded_once_and_cannot_be_changed():
    gmap = _map()
    images = MapImages(gmap)
    CountingFrame.decodes = 0
    first = images.images([0, 1, 2])
    again = images.images([2, 1, 0])
    assert CountingFrame.decodes == 3
    assert again[0] is first[2]
    np.testing.assert_array_equal(first[1], gmap.frames[1].decode())
    with pytest.raises(ValueError):
        first[0][0, 0, 0] = 1


def test_the_memory_is_bounded():
    gmap = _map(n=6)
    one = gmap.frames[0].decode().nbytes
    images = MapImages(gmap, max_mb=2.5 * one / 2**20)  # room for two images
    CountingFrame.decodes = 0
    images.images(range(6))
    assert len(images.cache) == 2 and images.cache.nbytes <= 2.5 * one
    images.image(5)
    images.image(0)  # evicted long ago: decoded again
    assert CountingFrame.decodes == 7
