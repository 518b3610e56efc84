"""The reduced copy of a camera image keeps its K consistent: a projected 3D point lands at the
same normalized coordinates in the full image and in the reduced one (JPEG decoded at 1/2, 1/4,
1/8, area-averaged, and both, with and without lens distortion), within a tenth of a reduced
pixel. Scaling K alone (no pixel-centre shift) misses by 0.25-0.44 reduced pixels."""

from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from g2g_model.cameras.lens import Lens
from g2g_model.cameras.reduction import ImageNeeds, description_scale, jpeg_factor
from g2g_ros.camera_calibrations import CameraCalibrations
from g2g_ros.image_conversion import rgb_to_compressed_fields, rgb_to_image_fields

W, H = 1936, 1216
K = np.array([[1400.0, 0.0, 967.3], [0.0, 1398.0, 610.9], [0.0, 0.0, 1.0]])
POINTS = np.array([[0.31, -0.12, 2.0], [-0.52, 0.20, 3.1], [0.05, 0.33, 1.7]])
PLUMB_BOB = np.array([-0.28, 0.09, 0.0008, -0.0005, -0.012])


def _blobs(pixels: np.ndarray) -> np.ndarray:
    """A full-size RGB image with a Gaussian blob (sigma 6 px) at each pixel position."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    img = np.zeros((H, W), np.float32)
    for u, v in pixels:
        img += 255 * np.exp(-((xx - u) ** 2 + (yy - v) ** 2) / (2 * 6.0 ** 2))
    return np.repeat(np.clip(img, 0, 255).astype(np.uint8)[..., None], 3, 2)


def _centroid(image: np.ndarray, guess: np.ndarray, radius: int) -> np.ndarray:
    gray = image[..., 1].astype(float)
    x0, y0 = np.round(guess).astype(int)
    ys, xs = np.mgrid[y0 - radius:y0 + radius + 1, x0 - radius:x0 + radius + 1]
    w = gray[ys, xs]
    w = np.where(w > 0.05 * w.max(), w, 0.0)
    return np.array([(w * xs).sum() / w.sum(), (w * ys).sum() / w.sum()])


def _message(rgb: np.ndarray, transport: str):
    if transport == "jpeg":
        return SimpleNamespace(**rgb_to_compressed_fields(rgb, "jpeg", 95))
    return SimpleNamespace(**rgb_to_image_fields(rgb))


@pytest.fixture(scope="module", params=["pinhole", "plumb_bob"])
def scene(request):
    D = np.zeros(5) if request.param == "pinhole" else PLUMB_BOB
    pixels, _ = cv2.projectPoints(POINTS, np.zeros(3), np.zeros(3), K, D)
    lens = Lens("plumb_bob", K, D, W, H, "cam0")
    return lens, _blobs(pixels.reshape(-1, 2))


SIZES = [(968, 2, (968, 608)), (484, 4, (484, 304)), (242, 8, (242, 152)),
         (320, 4, (320, 201)), (700, 2, (700, 440))]


@pytest.mark.parametrize("max_px,factor,size", SIZES)
@pytest.mark.parametrize("transport", ["jpeg", "raw"])
def test_a_projected_point_lands_where_the_reduced_K_says(scene, transport, max_px, factor,
                                                          size):
    lens, full = scene
    calibrations = CameraCalibrations(needs=ImageNeeds((112, 112), max_px))
    imaging = calibrations.set_lens("cam0", lens)
    assert imaging.size == size and imaging.jpeg_factor == factor
    image, K_small = calibrations.image("cam0", _message(full, transport))
    assert image.shape[1::-1] == size
    assert np.array_equal(K_small, calibrations.intrinsics("cam0")[0])
    scale = size[0] / W
    for point in POINTS:
        expected = (K_small @ (point / point[2]))[:2]
        found = _centroid(image, expected, radius=max(4, int(round(24 * scale))))
        assert np.abs(found - expected).max() < 0.1, (found, expected)


def test_without_the_pixel_centre_shift_a_point_would_miss_by_a_quarter_pixel():
    # Guards the test's power: a K scaled as x' = s x is measurably off at 1/2.
    full = _blobs((K @ (POINTS[0] / POINTS[0][2]))[None, :2])
    calibrations = CameraCalibrations(needs=ImageNeeds((112, 112), 968))
    calibrations.set_lens("cam0", Lens.pinhole(K, W, H))
    image, _ = calibrations.image("cam0", _message(full, "jpeg"))
    naive = (np.diag([0.5, 0.5, 1.0]) @ K @ (POINTS[0] / POINTS[0][2]))[:2]
    off = _centroid(image, naive, 12) - naive
    assert np.all(np.abs(off + 0.25) < 0.05), off


def test_sizes_follow_the_consumers():
    assert ImageNeeds((112, 112), 320).size(W, H) == (320, 201)
    assert ImageNeeds((112, 112), None).size(W, H) == (178, 112)  # the model alone
    assert ImageNeeds((112, 112), 0).size(W, H) == (W, H)  # a verifier at full size
    assert ImageNeeds((224, 224), 64).size(W, H) == (357, 224)  # the model needs more
    assert ImageNeeds((112, 112), 4096).size(W, H) == (W, H)
    assert jpeg_factor((W, H), (320, 201)) == 4
    assert jpeg_factor((W, H), (W, H)) == 1
    assert jpeg_factor((1930, 1216), (241, 152)) == 2  # 8 and 4 do not divide 1930


def test_wide_images_keep_the_short_side_of_a_sixteen_by_nine_image():
    """Images up to 16:9 are described at max_image_px on the long side; a wider one (a
    1241 x 376 car camera) keeps the short side of a 16:9 image of that long side (180 rows
    at 320) instead of shrinking to 320 x 97; the verifier's features and the node's reduced
    copy agree."""
    def size(w, h, px):
        s = description_scale(w, h, px)
        return round(w * s), round(h * s)

    assert size(480, 480, 320) == (320, 320)
    assert size(640, 480, 320) == (320, 240)
    assert size(1920, 1080, 480) == (480, 270)          # 16:9: as before (JPEG at 1/4)
    assert size(W, H, 480) == (480, 301)
    assert size(1241, 376, 320) == (594, 180)           # the rows of 320 x 180
    assert size(376, 1241, 320) == (180, 594)           # portrait: the same rule
    assert size(1226, 370, 480) == (895, 270)           # the rows of 480 x 270
    assert size(200, 100, 320) == (200, 100)            # never enlarged
    assert description_scale(1241, 376, 0) == 1.0       # 0: full size
    assert ImageNeeds((112, 112), 320).size(1241, 376) == (594, 180)
    from g2g_model.localization.local_features import LocalFeatures

    rng = np.random.default_rng(0)
    wide = cv2.resize(rng.integers(0, 255, (47, 155), dtype=np.uint8), (1241, 376),
                      interpolation=cv2.INTER_CUBIC)
    feats = LocalFeatures(max_image_px=320).describe(np.repeat(wide[..., None], 3, axis=2))
    assert len(feats.keypoints) > 20
    assert feats.keypoints[:, 0].max() > 1000 and feats.keypoints[:, 1].max() > 300  # full px


def test_a_jpeg_of_another_size_is_refused_before_its_reduced_decode():
    calibrations = CameraCalibrations(needs=ImageNeeds((112, 112), 242))
    calibrations.set_lens("cam0", Lens.pinhole(K, W, H))
    # 1930 / 8 rounds up to 242, the calibration's reduced width: only the header tells.
    other = np.zeros((H, 1930, 3), np.uint8)
    with pytest.raises(ValueError, match="image is 1930x1216 but its camera_info says "
                                         "1936x1216"):
        calibrations.image("cam0", _message(other, "jpeg"))
    with pytest.raises(ValueError, match="could not read the size"):
        calibrations.image("cam0", SimpleNamespace(format="jpeg", data=b"\xff\xd8garbage"))
