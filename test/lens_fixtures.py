"""Real lens calibrations and exact distorted images of simulated scenes, for the lens tests.

Calibrations (published values of real cameras):

* ``TUM_FR1``: plumb_bob of the Kinect RGB camera of the TUM RGB-D benchmark's "freiburg1"
  sequences (640x480; the dataset's "File Formats" page, intrinsic camera calibration).
* ``T265_FISHEYE``: equidistant lens of the first fisheye of an Intel RealSense T265 (848x800),
  from ``samples/t265/kapture/sensors/sensors.txt`` of naver/kapture (OPENCV_FISHEYE).
* ``OAKD_RATIONAL``: rational_polynomial of an OAK-D RGB preview stream (250x250) of a
  TurtleBot 4, a camera_info as published by its driver.

A distorted image is made from a pinhole rendering that covers the lens's view: every distorted
pixel is undistorted to its ray (OpenCV's iterative undistortion run to 1e-12) and the pinhole
image is sampled there, so the distorted image is the scene as the lens sees it, up to one
bilinear resampling.
"""

from __future__ import annotations

from typing import List

import cv2
import numpy as np

from g2g_model.cameras.lens import FISHEYE, Lens

TUM_FR1 = dict(model="plumb_bob", K=[[517.3, 0, 318.6], [0, 516.5, 255.3], [0, 0, 1]],
               D=[0.2624, -0.9531, -0.0054, 0.0026, 1.1633], width=640, height=480)
T265_FISHEYE = dict(model="equidistant",
                    K=[[284.468, 0, 424.355], [0, 285.51, 393.742], [0, 0, 1]],
                    D=[0.0008, 0.031, -0.03, 0.005], width=848, height=800)
OAKD_RATIONAL = dict(model="rational_polynomial",
                     K=[[196.50531005859375, 0, 126.86713409423828],
                        [0, 196.50531005859375, 125.84786987304688], [0, 0, 1]],
                     D=[-4.860828876495361, 17.2819766998291, 0.00020376102474983782,
                        0.0010251018684357405, -25.172250747680664, -4.943647384643555,
                        17.51442527770996, -25.290760040283203], width=250, height=250)


def lens(calibration: dict, binning: int = 1) -> Lens:
    """The calibration as a :class:`Lens`, optionally of the sensor binned ``binning`` x
    ``binning`` (K scaled with pixel centres at integers; D acts on normalized coordinates and
    stays as it is)."""
    K = np.array(calibration["K"], float)
    K[:2, :2] /= binning
    K[:2, 2] = (K[:2, 2] + 0.5) / binning - 0.5
    return Lens(calibration["model"], K, calibration["D"], calibration["width"] // binning,
                calibration["height"] // binning)


def undistorted_pixels(lens: Lens, K_new: np.ndarray) -> np.ndarray:
    """``[H, W, 2]`` float32: where each pixel of ``lens`` lies in the pinhole ``K_new``."""
    v, u = np.mgrid[0:lens.height, 0:lens.width].astype(np.float64)
    pts = np.stack([u.ravel(), v.ravel()], 1)[:, None]
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 100, 1e-12)
    if lens.model == FISHEYE:
        out = cv2.fisheye.undistortPoints(pts, lens.K, lens.D, R=np.eye(3), P=K_new,
                                          criteria=criteria)
    else:
        out = cv2.undistortPoints(pts, lens.K, lens.D, R=None, P=K_new, criteria=criteria)
    return out.reshape(lens.height, lens.width, 2).astype(np.float32)


def distort(lens: Lens, pinhole_images: List[np.ndarray], K_pinhole: np.ndarray
            ) -> List[np.ndarray]:
    """The pinhole images (``K_pinhole``) as ``lens`` sees them (black where they end)."""
    where = undistorted_pixels(lens, K_pinhole)
    return [cv2.remap(im, where[..., 0], where[..., 1], cv2.INTER_LINEAR,
                      borderMode=cv2.BORDER_CONSTANT) for im in pinhole_images]


def covering_pinhole(lens: Lens, max_half_fov_deg: float = 60.0):
    """``(K, width, height)`` of a pinhole with the lens's central pixel density that covers
    what the lens sees, up to ``max_half_fov_deg`` off axis (a fisheye sees more than any
    pinhole holds: beyond that its image stays black)."""
    f = float(np.mean([lens.K[0, 0], lens.K[1, 1]]))
    centred = np.array([[f, 0, 0], [0, f, 0], [0, 0, 1.0]])
    extent = np.abs(undistorted_pixels(lens, centred)).reshape(-1, 2).max(0)
    half = np.minimum(extent, f * np.tan(np.radians(max_half_fov_deg))) + 2
    width, height = (2 * np.ceil(half)).astype(int)
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2], [0, 0, 1.0]])
    return K, int(width), int(height)
