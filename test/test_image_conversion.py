"""Image / CompressedImage conversion without cv_bridge."""

from types import SimpleNamespace

import numpy as np
import pytest

from g2g_ros.image_conversion import (
    IMAGE_ENCODINGS,
    compressed_to_rgb,
    image_to_rgb,
    rgb_to_compressed_fields,
    rgb_to_image_fields,
    to_rgb,
)


def _rgb(h=5, w=7, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _msg(**fields):
    return SimpleNamespace(**fields)


def test_hand_built_pixels_decode_per_encoding():
    # One pixel row of two pixels, written byte by byte (independent of rgb_to_image_fields).
    cases = {
        "rgb8": ([10, 20, 30, 40, 50, 60], [[10, 20, 30], [40, 50, 60]]),
        "bgr8": ([10, 20, 30, 40, 50, 60], [[30, 20, 10], [60, 50, 40]]),
        "rgba8": ([10, 20, 30, 99, 40, 50, 60, 99], [[10, 20, 30], [40, 50, 60]]),
        "bgra8": ([10, 20, 30, 99, 40, 50, 60, 99], [[30, 20, 10], [60, 50, 40]]),
        "mono8": ([7, 200], [[7, 7, 7], [200, 200, 200]]),
    }
    for enc, (data, expected) in cases.items():
        pad = [0xEE] * 3  # step padding must be skipped
        msg = _msg(height=2, width=2, encoding=enc, is_bigendian=0, step=len(data) + 3,
                   data=bytes(data + pad + data + pad))
        out = image_to_rgb(msg)
        assert out.dtype == np.uint8 and out.shape == (2, 2, 3) and out.flags.c_contiguous
        np.testing.assert_array_equal(out[0], expected, err_msg=enc)
        np.testing.assert_array_equal(out[1], expected, err_msg=enc)


def test_mono16_endianness_and_scaling():
    word = [0x12, 0x34]  # 0x1234 big-endian = 4660, little-endian = 13330
    for bigendian, value in ((1, 4660), (0, 13330)):
        msg = _msg(height=1, width=1, encoding="mono16", is_bigendian=bigendian, step=4,
                   data=bytes(word + [0, 0]))
        expected = round(value * 255 / 65535)
        np.testing.assert_array_equal(image_to_rgb(msg)[0, 0], [expected] * 3)
    twelve_bit = np.array([[0, 2048, 4095, 65535]], dtype="<u2")
    msg = _msg(height=1, width=4, encoding="mono16", is_bigendian=0, step=8,
               data=twelve_bit.tobytes())
    np.testing.assert_array_equal(image_to_rgb(msg, mono16_max=4095)[0, :, 0], [0, 128, 255, 255])
    np.testing.assert_array_equal(image_to_rgb(msg)[0, :, 0], [0, 8, 16, 255])


@pytest.mark.parametrize("encoding", sorted(IMAGE_ENCODINGS))
@pytest.mark.parametrize("padding", [0, 5])
def test_round_trip_every_encoding_with_real_message(encoding, padding):
    from sensor_msgs.msg import Image

    rgb = _rgb()
    for bigendian in ((False, True) if encoding == "mono16" else (False,)):
        msg = Image(**rgb_to_image_fields(rgb, encoding, is_bigendian=bigendian,
                                          row_padding=padding))
        assert msg.step == 7 * {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1,
                                "mono16": 2}[encoding] + padding
        out = image_to_rgb(msg)
        if encoding.startswith("mono"):
            gray = np.rint(rgb.astype(np.float32).mean(axis=2))
            np.testing.assert_array_equal(out, np.repeat(gray[..., None], 3, 2).astype(np.uint8))
        else:
            np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_compressed_round_trip(fmt):
    from sensor_msgs.msg import CompressedImage

    yy, xx = np.mgrid[0:48, 0:64]
    rgb = np.stack([xx * 4, yy * 5, 255 - xx * 2], axis=2).astype(np.uint8)  # smooth: JPEG-safe
    msg = CompressedImage(**rgb_to_compressed_fields(rgb, fmt))
    out = compressed_to_rgb(msg)
    assert out.shape == rgb.shape and out.dtype == np.uint8
    err = np.abs(out.astype(int) - rgb).mean()
    if fmt == "png":
        assert err == 0
    else:
        assert err < 3.0
        # Channel order: red grows with x, blue falls with x.
        assert out[:, -1, 0].mean() > out[:, 0, 0].mean() + 100
        assert out[:, -1, 2].mean() < out[:, 0, 2].mean() - 50
    np.testing.assert_array_equal(to_rgb(msg), out)
    # image_transport-style format string.
    styled = _msg(format=f"bgr8; {fmt} compressed bgr8", data=msg.data)
    np.testing.assert_array_equal(compressed_to_rgb(styled), out)


def test_compressed_gray_and_16bit_png():
    import cv2

    gray16 = np.array([[0, 65535], [32768, 257]], dtype=np.uint16)
    ok, buf = cv2.imencode(".png", gray16)
    out = compressed_to_rgb(_msg(format="png", data=buf.tobytes()))
    np.testing.assert_array_equal(out[..., 0], [[0, 255], [128, 1]])
    assert (out[..., 0] == out[..., 2]).all()


def test_unsupported_and_malformed_inputs_raise_clear_errors():
    msg = _msg(height=1, width=1, encoding="yuv422", is_bigendian=0, step=2, data=b"\0\0")
    with pytest.raises(ValueError, match=r"'yuv422'.*supported.*mono16.*rgb8"):
        image_to_rgb(msg)
    with pytest.raises(ValueError, match="step"):
        image_to_rgb(_msg(height=1, width=2, encoding="rgb8", is_bigendian=0, step=5,
                          data=bytes(6)))
    with pytest.raises(ValueError, match="expected step"):
        image_to_rgb(_msg(height=2, width=2, encoding="rgb8", is_bigendian=0, step=6,
                          data=bytes(6)))
    with pytest.raises(ValueError, match="'tiff'"):
        compressed_to_rgb(_msg(format="tiff", data=b"xx"))
    with pytest.raises(ValueError, match="could not decode"):
        compressed_to_rgb(_msg(format="jpeg", data=b"not a jpeg"))
    with pytest.raises(ValueError, match="encoding"):
        rgb_to_image_fields(_rgb(), "16UC1")
