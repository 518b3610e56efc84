"""ALIKED keypoints for verification (g2g_model/localization/aliked_keypoints.py): sub-pixel
positions, and LocalFeatures(feature="aliked") in the camera's pixels."""

import math

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from g2g_model.localization.aliked_keypoints import AlikedKeypoints, soft_argmax
from g2g_model.localization.local_features import LocalFeatures
from test_aliked import _one_thread  # noqa: F401 (autouse: one torch thread)


def _texture(height: int, width: int, seed: int = 3) -> np.ndarray:
    """``uint8 [H, W, 3]`` with structure at several scales (blobs of random colours)."""
    gen = torch.Generator().manual_seed(seed)
    image = torch.zeros(1, 3, height, width)
    for cells in (5, 11, 29):
        coarse = torch.rand(1, 3, cells, math.ceil(cells * width / height), generator=gen)
        image += F.interpolate(coarse, size=(height, width), mode="bicubic", align_corners=False)
    image = (image - image.min()) / (image.max() - image.min())
    return (255 * image[0].permute(1, 2, 0)).round().byte().numpy()


@pytest.mark.parametrize("centre", [(12.3, 8.7), (10.5, 9.0), (11.9, 8.1)])
def test_soft_argmax_moves_a_peak_towards_its_sub_pixel_centre(centre):
    ys, xs = torch.meshgrid(torch.arange(20.0), torch.arange(25.0), indexing="ij")
    scores = 0.9 * torch.exp(-((xs - centre[0]) ** 2 + (ys - centre[1]) ** 2) / (2 * 1.2 ** 2))
    i = int(scores.argmax())
    integer = torch.tensor([[i % 25, i // 25]])
    refined = soft_argmax(scores, integer)[0]
    truth = torch.tensor(centre)
    assert (refined - truth).norm() < 0.1
    assert (refined - truth).norm() < (integer[0].float() - truth).norm()


def test_keypoints_follow_a_half_pixel_shift():
    """An image and the same scene moved by half a pixel: matched keypoints are half a pixel
    apart (integer maxima could only be 0 or 1 pixel apart)."""
    big = _texture(400, 480)
    # 2x area reduction of the big image and of it moved by one big pixel: half a pixel here.
    small = big.reshape(200, 2, 240, 2, 3).mean((1, 3)).round().astype(np.uint8)
    moved = big[:, 1:][:, :478]
    moved = moved.reshape(200, 2, 239, 2, 3).mean((1, 3)).round().astype(np.uint8)
    local = LocalFeatures("aliked", max_features=400)
    fa, fb = local.describe(small[:, :239]), local.describe(moved)
    pairs = local.match(fa.descriptors, fb.descriptors)
    assert len(pairs) >= 100
    d = fa.keypoints[pairs[:, 0]] - fb.keypoints[pairs[:, 1]]
    good = np.linalg.norm(d - [0.5, 0.0], axis=1) < 1.0
    assert good.mean() > 0.8
    assert np.median(d[good, 0]) == pytest.approx(0.5, abs=0.15)
    assert np.median(np.abs(d[good, 1])) < 0.15
    # Integer maxima: every offset 0 or 1, 0.5 from the truth (measured: 0.31 refined).
    assert np.abs(d[good, 0] - 0.5).mean() < 0.4


def test_a_downscaled_description_is_in_the_original_pixels():
    image = _texture(240, 320)
    small = cv2.resize(image, (160, 120), interpolation=cv2.INTER_AREA)  # as describe does
    reduced = LocalFeatures("aliked", max_image_px=160).describe(image)
    native = LocalFeatures("aliked").describe(small)
    assert reduced.descriptors.shape == native.descriptors.shape
    assert reduced.descriptors.shape[1] == AlikedKeypoints().dim == 64
    np.testing.assert_allclose(reduced.keypoints, (native.keypoints + 0.5) * 2 - 0.5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(reduced.descriptors, axis=1), 1.0, atol=1e-4)


def test_grey_and_flat_images():
    local = LocalFeatures("aliked")
    grey = _texture(96, 128)[..., 0]
    assert len(local.describe(grey).keypoints) > 20
    flat = local.describe(np.full((64, 64, 3), 128, np.uint8))
    assert flat.keypoints.shape[1] == 2 and flat.descriptors.shape[1] == 64
    assert len(flat.keypoints) == len(flat.descriptors)


def test_an_unknown_feature_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="verify_feature must be one of.*aliked.*'orb'"):
        LocalFeatures("orb")
