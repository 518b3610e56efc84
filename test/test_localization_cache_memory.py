"""The verification caches are bounded in memory, not only in entries.

A 640x480 camera image gives up to ``max_features`` = 2,000 SIFT features (~1 MB of RootSIFT
descriptors), a simulator frame ~100: caches bounded only by their number of entries (160
images) hold ~160 MB with real cameras. These tests feed the verifiers' caches many distinct
feature-rich images and measure what stays allocated (tracemalloc traces numpy's buffers).
"""

import gc
import tracemalloc

import cv2
import numpy as np
import pytest

from g2g_model.localization.bounded_cache import BoundedCache, value_nbytes
from g2g_model.localization.rig_motion import RigMotionVerifier
from g2g_model.localization.verification import StructureVerifier, VerifierConfig

MB = 2**20


def textured_images(n, size=(240, 320), seed=0):
    """``n`` distinct images with ~2,000 SIFT features each (shifted blurred noise)."""
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 255, (size[0] * 2, size[1] * 2, 3), np.uint8),
                            (0, 0), 1.5)
    for i in range(n):
        y, x = divmod(i * 7, size[1])
        yield np.ascontiguousarray(base[y:y + size[0], x:x + size[1]])


def test_bounded_cache_evicts_least_recently_used_by_bytes_and_count():
    cache = BoundedCache(max_bytes=3000, max_items=3)
    for k in "abc":
        cache.put(k, np.zeros(1000, np.uint8))
    assert cache.nbytes == 3000 and len(cache) == 3
    assert cache.get("a") is not None          # "a" is now the most recently used
    cache.put("d", np.zeros(1000, np.uint8))   # evicts "b", the least recently used
    assert "b" not in cache and {"a", "c", "d"} <= {k for k in "abcd" if k in cache}
    cache.put("e", (np.zeros(1500, np.uint8), [np.zeros(500, np.uint8)]))  # 2000 bytes
    assert cache.nbytes <= 3000 and "e" in cache and len(cache) == 2
    big = np.zeros(4000, np.uint8)
    assert cache.put("big", big) is big and "big" not in cache  # larger than the budget
    assert value_nbytes({"x": np.zeros((2, 3), np.float32), "y": b"abc"}) == 27
    with pytest.raises(ValueError):
        BoundedCache(-1)


@pytest.mark.parametrize("verifier_type", [StructureVerifier, RigMotionVerifier])
def test_feature_cache_of_the_default_verifiers_stays_within_its_budget(verifier_type):
    # The defaults: cache_mb 128, of which half for features. 120 feature-rich images would
    # hold ~120 MB in a cache bounded by count only (160 images).
    verifier = verifier_type(VerifierConfig())
    images = list(textured_images(120))
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for image in images:
            assert len(verifier.local.describe(image).keypoints) > 1500
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held < 72 * MB, f"feature cache holds {held / MB:.0f} MB after 120 images"
    assert verifier.local.cache.nbytes <= 64 * MB
    assert len(verifier.local) < 120  # it did evict
    # The newest image is still cached (a hit returns the same object).
    assert verifier.local.describe(images[-1]) is verifier.local.describe(images[-1])


def test_structure_verifier_caches_stay_within_cache_mb():
    # Map windows of feature-rich frames: points, pairs and matches caches fill too.
    cfg = VerifierConfig(cache_mb=6.0)
    verifier = StructureVerifier(cfg)
    images = list(textured_images(30, seed=1))
    K = np.array([[300.0, 0, 160], [0, 300, 120], [0, 0, 1]])
    poses = np.stack([np.eye(4)] * 3)
    for i, x in enumerate((0.0, 0.1, 0.2)):
        poses[i, 0, 3] = x
    for start in range(0, 27, 3):
        verifier.map_points(images[start:start + 3], np.stack([K] * 3), poses)
        assert verifier.cache_bytes() <= 6.0 * MB
    assert verifier.cache_bytes() > 1 * MB  # the caches are used
