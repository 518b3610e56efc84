"""Validation and preprocessing of user-supplied image groups."""

import numpy as np
import pytest

from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_model.estimation.groups import (
    Group, prepare_group, resize_with_intrinsics, validate_group,
)

K = np.array([[300.0, 0, 159.5], [0, 300.0, 119.5], [0, 0, 1]])


def _group(n=3, seed=0):
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 255, (240, 320, 3), dtype=np.uint8) for _ in range(n)]
    poses = make_pose(axis_angle_to_matrix(rng.normal(size=(n, 3))), rng.normal(size=(n, 3)))
    return Group(images=images, intrinsics=K, cam_to_world=poses)


def test_prepare_reanchors_and_resizes():
    g = _group()
    prep = prepare_group(g, (224, 224))
    assert prep.images.shape == (1, 3, 3, 224, 224)
    assert float(prep.images.max()) <= 1.0
    np.testing.assert_array_equal(prep.cam_to_anchor[0, 0].numpy(), np.eye(4))
    expected = np.linalg.inv(g.cam_to_world[0]) @ g.cam_to_world[2]
    np.testing.assert_allclose(prep.cam_to_anchor[0, 2].numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(prep.anchor_to_world, g.cam_to_world[0])


def test_resize_keeps_projection_consistent():
    # A 3D point projects to the same relative position before and after resizing.
    point = np.array([0.3, -0.2, 2.0])
    img = np.zeros((240, 320, 3), np.uint8)
    _, k2 = resize_with_intrinsics(img, K, (224, 224))
    uv1 = (K @ point)[:2] / point[2]
    uv2 = (k2 @ point)[:2] / point[2]
    np.testing.assert_allclose((uv2 + 0.5) / [224, 224], (uv1 + 0.5) / [320, 240], atol=1e-12)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda g: g.images.clear(), "at least 1 frame"),
        (lambda g: g.images.__setitem__(1, np.zeros((10, 10), np.uint8)), "images[1]"),
        (lambda g: g.images.__setitem__(2, np.zeros((10, 10, 3), np.float32)), "dtype uint8"),
        (lambda g: g.cam_to_world.__setitem__((1, 0, 3), np.nan), "cam_to_world[1]: non-finite"),
        (lambda g: g.cam_to_world.__setitem__((2, 0, 0), 3.0), "cam_to_world[2]: rotation"),
    ],
)
def test_bad_input_names_field_and_frame(mutate, message):
    g = _group()
    mutate(g)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_group(g, "group_b")


def test_bad_intrinsics():
    g = _group()
    k = np.stack([K] * 3)
    k[1, 1, 1] = -5
    g.intrinsics = k
    with pytest.raises(ValueError, match=r"group_a.intrinsics\[1\]: focal lengths"):
        validate_group(g, "group_a")
    g.intrinsics = np.eye(4)
    with pytest.raises(ValueError, match="intrinsics: expected"):
        validate_group(g, "group_a")


def test_dict_groups_and_unknown_keys():
    g = _group(2)
    ok = validate_group({"images": g.images, "intrinsics": K, "cam_to_world": g.cam_to_world})
    assert ok.intrinsics.shape == (2, 3, 3)
    with pytest.raises(ValueError, match="unknown keys"):
        validate_group({"images": g.images, "K": K, "cam_to_world": g.cam_to_world})
