"""Local features: the content keys of images and matching restricted to allowed pairs."""

import gc

import numpy as np

from g2g_model.localization.image_keys import ImageKeys, content_key
from g2g_model.localization.local_features import LocalFeatures


def _image(seed: int, shape=(48, 64, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def test_a_key_is_the_content_not_the_array():
    keys = ImageKeys()
    a = _image(0)
    assert keys(a) == keys(a) == content_key(a)
    assert keys(a.copy()) == keys(a)                      # same picture, another array
    assert keys(_image(1)) != keys(a)                     # another picture
    assert keys(a[:, :32]) == content_key(np.ascontiguousarray(a[:, :32]))  # a view
    assert keys(a.reshape(64, 48, 3)) != keys(a)          # same bytes, other shape


def test_a_picture_changed_in_place_gets_a_new_key():
    keys = ImageKeys()
    a = _image(2)
    first = keys(a)
    a[...] = _image(3)
    assert keys(a) == content_key(a) != first


def test_an_array_that_reuses_a_dead_arrays_id_is_keyed_afresh():
    keys = ImageKeys(max_items=4)
    seen = {}
    for seed in range(40):  # CPython reuses the ids of freed arrays of one size
        image = _image(seed)
        seen[id(image)] = seen.get(id(image), 0) + 1
        assert keys(image) == content_key(image)
        del image
        gc.collect()
    assert max(seen.values()) > 1, "no id was reused: the case this test is about did not occur"
    assert len(keys) <= 4


def test_matching_on_the_allowed_rows_and_columns_equals_the_whole_matrix():
    """Guided matching works on the keypoints that have an allowed partner only; the matches
    and their ratios are those of the whole masked matrix, however sparse the mask."""
    local = LocalFeatures()
    rng = np.random.default_rng(4)
    compared = 0
    for trial in range(400):
        na, nb = rng.integers(2, 50, 2)
        a = rng.random((na, 16)).astype(np.float32)
        b = rng.random((nb, 16)).astype(np.float32)
        k = min(na, nb) // 2
        b[:k] = a[:k] + 0.01 * rng.random((k, 16)).astype(np.float32)  # true matches
        allowed = rng.random((na, nb)) < rng.choice([0.002, 0.02, 0.1, 0.5, 1.0])
        pairs, ratios = local.match(a, b, with_ratio=True, allowed=allowed)
        whole, whole_ratios = local._nearest(a, b, allowed, with_ratio=True)
        np.testing.assert_array_equal(pairs, whole)
        # float32 distances of near-equal descriptors differ in rounding with the matrix shape
        np.testing.assert_allclose(ratios, whole_ratios, atol=0.02)
        assert np.all(allowed[pairs[:, 0], pairs[:, 1]]) if len(pairs) else True
        compared += len(pairs)
    assert compared > 500  # the comparison saw matches, not only empty results
    none = np.zeros((5, 7), bool)
    assert local.match(np.ones((5, 16), np.float32), np.ones((7, 16), np.float32),
                       allowed=none).shape == (0, 2)


def test_matching_several_sets_at_once_equals_matching_each():
    local = LocalFeatures()
    rng = np.random.default_rng(5)
    b = rng.random((60, 16)).astype(np.float32)
    sets = [np.concatenate([b[k * 10:(k + 1) * 10] + 0.01 * rng.random((10, 16)),
                            rng.random((n, 16))]).astype(np.float32)
            for k, n in enumerate((5, 0, 20, 3))] + [b[:1], np.zeros((0, 16), np.float32)]
    each = local.match_each(sets, b)
    assert len(each) == len(sets)
    for found, desc in zip(each, sets):
        np.testing.assert_array_equal(found, local.match(desc, b))
    assert sum(len(f) for f in each) >= 30  # the planted matches were found
