"""sensor_msgs Image / CompressedImage <-> numpy, without cv_bridge (pure numpy); CameraInfo is
:mod:`g2g_ros.calibration`.

Messages are duck-typed, so real rclpy messages, rosbags messages and simple stand-ins all work:

* Image-like: ``height``, ``width``, ``encoding``, ``step``, ``is_bigendian``, ``data``.
* CompressedImage-like: ``format``, ``data``.

Everything returns ``uint8 [H, W, 3]`` RGB, C-contiguous and owning its memory (the message
buffer can be released). 16-bit images (``mono16``, 16-bit PNG) are mapped to 8 bit with a
*fixed* scale, ``round(v * 255 / max_value)`` clipped to 255, where ``max_value`` defaults to
65535 (full 16-bit range); pass e.g. 4095 for a 12-bit sensor. A fixed scale, unlike per-frame
min/max normalisation, keeps brightness stable from frame to frame, which the model relies on.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from g2g_ros.conversions import to_stamp

#: encoding -> (channels, bytes per channel); the order of the channels is handled below.
IMAGE_ENCODINGS: Dict[str, Tuple[int, int]] = {
    "rgb8": (3, 1),
    "bgr8": (3, 1),
    "rgba8": (4, 1),
    "bgra8": (4, 1),
    "mono8": (1, 1),
    "mono16": (1, 2),
}
COMPRESSED_FORMATS = ("jpeg", "png")
#: JPEG reduction -> the OpenCV flag that decodes at it.
REDUCED_JPEG_FLAGS = {2: "IMREAD_REDUCED_COLOR_2", 4: "IMREAD_REDUCED_COLOR_4",
                      8: "IMREAD_REDUCED_COLOR_8"}


def _buffer_to_uint8(data: Any) -> np.ndarray:
    """bytes / bytearray / array.array / numpy / list of ints -> flat uint8 view or copy."""
    try:
        return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    except TypeError:  # no buffer protocol (e.g. a list of ints)
        return np.asarray(data, dtype=np.uint8).reshape(-1)


def _scale_16_to_8(values: np.ndarray, max_value: Optional[int]) -> np.ndarray:
    max_value = 65535 if max_value is None else int(max_value)
    if not 0 < max_value <= 65535:
        raise ValueError(f"mono16_max must be in (0, 65535], got {max_value}")
    scaled = np.rint(values.astype(np.float32) * (255.0 / max_value))
    return np.clip(scaled, 0, 255).astype(np.uint8)


def image_to_rgb(msg: Any, mono16_max: Optional[int] = None) -> np.ndarray:
    """Image-like message -> ``uint8 [H, W, 3]`` RGB.

    Honours row padding (``step`` > width * bytes per pixel) and ``is_bigendian`` for mono16;
    alpha is discarded; mono is replicated to three channels.

    Raises:
        ValueError: unsupported encoding (the message names the supported ones), or
            inconsistent height / width / step / data size.
    """
    encoding = str(msg.encoding)
    key = encoding.lower()
    if key not in IMAGE_ENCODINGS:
        raise ValueError(
            f"unsupported image encoding {encoding!r}; supported: {sorted(IMAGE_ENCODINGS)} "
            f"(and CompressedImage formats {list(COMPRESSED_FORMATS)})"
        )
    channels, depth = IMAGE_ENCODINGS[key]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    row_bytes = width * channels * depth
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got height={height} width={width}")
    if step < row_bytes:
        raise ValueError(f"step {step} < width * bytes per pixel = {row_bytes} ({encoding})")
    flat = _buffer_to_uint8(msg.data)
    if flat.size < step * height:
        raise ValueError(
            f"image data has {flat.size} bytes, expected step * height = {step * height}"
        )
    rows = flat[: step * height].reshape(height, step)[:, :row_bytes]
    if depth == 2:
        dtype = np.dtype(">u2" if msg.is_bigendian else "<u2")
        mono = rows.copy().view(dtype).reshape(height, width)
        return np.repeat(_scale_16_to_8(mono, mono16_max)[..., None], 3, axis=2)
    pixels = rows.reshape(height, width, channels)
    if key == "mono8":
        return np.repeat(pixels, 3, axis=2)
    if key.startswith("bgr"):
        return np.ascontiguousarray(pixels[..., 2::-1])
    return np.array(pixels[..., :3], order="C")


def _is_jpeg(fmt: str) -> bool:
    return "jpeg" in fmt or "jpg" in fmt


def compressed_size(msg: Any) -> Tuple[int, int]:
    """``(width, height)`` of a CompressedImage-like from its header alone (Pillow reads no
    pixel), so a reduced decode can still be checked against the calibration's size."""
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(_buffer_to_uint8(msg.data).tobytes())) as img:
            return img.size
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"could not read the size of a {msg.format!r} image: {exc}") from None


def compressed_to_rgb(msg: Any, mono16_max: Optional[int] = None,
                      reduction: int = 1) -> np.ndarray:
    """CompressedImage-like (JPEG or PNG, decoded with OpenCV) -> ``uint8 [H, W, 3]`` RGB.

    ``format`` may be plain (``jpeg``, ``png``) or in image_transport style
    (``bgr8; jpeg compressed bgr8``). 16-bit PNGs are scaled like mono16. ``reduction`` 2, 4
    or 8 decodes a JPEG at that fraction of its size (libjpeg's DCT scaling, see
    :mod:`g2g_model.cameras.reduction`); a PNG must be decoded whole (``reduction`` 1). EXIF
    orientation is ignored either way: a camera's pixels are its sensor's.
    """
    import cv2  # heavy import kept out of module import

    fmt = str(msg.format).lower()
    if not any(name in fmt for name in ("jpeg", "jpg", "png")):
        raise ValueError(
            f"unsupported compressed format {msg.format!r}; supported: {list(COMPRESSED_FORMATS)}"
        )
    buf = _buffer_to_uint8(msg.data)
    if buf.size == 0:
        raise ValueError(f"compressed image ({msg.format!r}) has no data")
    if reduction != 1 and (reduction not in REDUCED_JPEG_FLAGS or not _is_jpeg(fmt)):
        raise ValueError(f"a {msg.format!r} image cannot be decoded at 1/{reduction} (JPEG "
                         f"only, 1/2, 1/4 or 1/8)")
    flags = cv2.IMREAD_UNCHANGED if reduction == 1 else (
        getattr(cv2, REDUCED_JPEG_FLAGS[reduction]) | cv2.IMREAD_IGNORE_ORIENTATION)
    decoded = cv2.imdecode(buf, flags)
    if decoded is None:
        raise ValueError(f"could not decode {buf.size} bytes as {msg.format!r}")
    if decoded.dtype == np.uint16:
        decoded = _scale_16_to_8(decoded, mono16_max)
    if decoded.ndim == 2:
        return np.repeat(decoded[..., None], 3, axis=2)
    if decoded.shape[2] == 4:
        return cv2.cvtColor(decoded, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)


def reducible(msg: Any) -> bool:
    """Whether ``msg`` can be decoded at a reduced size (a JPEG CompressedImage)."""
    return is_compressed(msg) and _is_jpeg(str(msg.format).lower())


def is_compressed(msg: Any) -> bool:
    """CompressedImage-like (has ``format``, no ``encoding``)."""
    return hasattr(msg, "format") and not hasattr(msg, "encoding")


def to_rgb(msg: Any, mono16_max: Optional[int] = None) -> np.ndarray:
    """Dispatch on the message kind: CompressedImage-like (has ``format``) or Image-like."""
    if is_compressed(msg):
        return compressed_to_rgb(msg, mono16_max)
    return image_to_rgb(msg, mono16_max)


def rgb_to_image_fields(
    rgb: np.ndarray, encoding: str = "rgb8", is_bigendian: bool = False, row_padding: int = 0
) -> Dict[str, Any]:
    """``uint8 [H, W, 3]`` RGB -> keyword arguments of ``sensor_msgs.msg.Image``.

    The inverse of :func:`image_to_rgb` for publishers and tests: ``Image(**fields)``. Mono
    encodings use the mean of the three channels (mono16 maps 0..255 to 0..65535, i.e. v * 257).
    ``row_padding`` extra bytes are appended to each row (``step`` grows accordingly).
    """
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb must be uint8 [H, W, 3], got {rgb.dtype} {list(rgb.shape)}")
    key = encoding.lower()
    if key not in IMAGE_ENCODINGS:
        raise ValueError(
            f"unsupported image encoding {encoding!r}; supported: {sorted(IMAGE_ENCODINGS)}"
        )
    height, width = rgb.shape[:2]
    if key in ("mono8", "mono16"):
        mono = np.rint(rgb.astype(np.float32).mean(axis=2))
        if key == "mono8":
            pixels = mono.astype(np.uint8)[..., None]
        else:
            words = (mono * 257).astype(">u2" if is_bigendian else "<u2")
            pixels = words.view(np.uint8).reshape(height, width, 2)
    else:
        pixels = rgb[..., ::-1] if key.startswith("bgr") else rgb
        if key.endswith("a8"):
            alpha = np.full((height, width, 1), 255, np.uint8)
            pixels = np.concatenate([pixels, alpha], axis=2)
    rows = np.ascontiguousarray(pixels).reshape(height, -1)
    if row_padding:
        rows = np.concatenate([rows, np.zeros((height, row_padding), np.uint8)], axis=1)
    return {
        "height": height,
        "width": width,
        "encoding": key,
        "is_bigendian": int(bool(is_bigendian) and key == "mono16"),
        "step": rows.shape[1],
        "data": rows.tobytes(),
    }


def rgb_to_compressed_fields(rgb: np.ndarray, fmt: str = "jpeg", quality: int = 95) -> Dict:
    """``uint8 [H, W, 3]`` RGB -> keyword arguments of ``sensor_msgs.msg.CompressedImage``."""
    import cv2

    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"rgb must be uint8 [H, W, 3], got {rgb.dtype} {list(rgb.shape)}")
    if fmt not in COMPRESSED_FORMATS:
        raise ValueError(f"unsupported compressed format {fmt!r}; supported: {COMPRESSED_FORMATS}")
    params = [cv2.IMWRITE_JPEG_QUALITY, int(quality)] if fmt == "jpeg" else []
    ok, buf = cv2.imencode("." + fmt, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ValueError(f"OpenCV could not encode a {list(rgb.shape)} image as {fmt}")
    return {"format": fmt, "data": buf.tobytes()}


def image_msg(rgb: np.ndarray, frame_id: str, stamp_ns: int, encoding: str = "rgb8"):
    """A ``sensor_msgs/Image`` (rclpy) of ``uint8 [H, W, 3]`` RGB in ``encoding``."""
    from sensor_msgs.msg import Image

    msg = Image(**rgb_to_image_fields(rgb, encoding))
    msg.header.stamp = to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    return msg


def jpeg_msg(rgb: np.ndarray, frame_id: str, stamp_ns: int, quality: int = 95):
    """A JPEG ``sensor_msgs/CompressedImage`` (rclpy) of ``uint8 [H, W, 3]`` RGB."""
    from sensor_msgs.msg import CompressedImage

    msg = CompressedImage(**rgb_to_compressed_fields(rgb, "jpeg", quality))
    msg.header.stamp = to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    return msg
