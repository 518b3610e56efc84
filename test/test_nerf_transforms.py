"""NeRF transforms.json cameras (OpenGL axes) in the dataset's OpenCV conventions."""

import numpy as np
import pytest

from g2g_model.data.nerf_transforms import opencv_cam_to_world, transforms_lens


def gl_look_at(centre, target, up=(0.0, 0.0, 1.0)):
    """A NeRF camera-to-world matrix: x right, y up, z backwards (looks along -z)."""
    back = np.asarray(centre, float) - np.asarray(target, float)
    back /= np.linalg.norm(back)
    right = np.cross(up, back)
    right /= np.linalg.norm(right)
    T = np.eye(4)
    T[:3, :3] = np.stack([right, np.cross(back, right), back], axis=1)
    T[:3, 3] = centre
    return T


def project(world_T_cam, K, point):
    p = np.linalg.inv(world_T_cam) @ np.append(point, 1.0)
    return p[2], (K @ (p[:3] / p[2]))[:2]


def test_converted_pose_sees_what_the_opengl_camera_sees():
    K = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
    gl = gl_look_at([2.0, -1.0, 0.5], [0.0, 0.0, 0.5])
    cv = opencv_cam_to_world(gl, metres_per_unit=0.1)
    assert np.allclose(cv[:3, 3], [0.2, -0.1, 0.05])
    target = np.array([0.0, 0.0, 0.05])
    depth, uv = project(cv, K, target)
    assert depth == pytest.approx(np.hypot(0.2, 0.1))
    assert np.allclose(uv, [320, 240])
    # World up (+z) is image up (smaller v); the camera's right is image right.
    _, uv_up = project(cv, K, target + [0, 0, 0.02])
    assert uv_up[1] < 240 - 10 and abs(uv_up[0] - 320) < 1e-6
    right = gl[:3, 0]
    _, uv_right = project(cv, K, target + 0.02 * right)
    assert uv_right[0] > 320 + 10
    assert np.linalg.det(cv[:3, :3]) == pytest.approx(1.0)


def test_non_rigid_matrices_are_refused():
    gl = gl_look_at([1.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    mirrored = gl @ np.diag([-1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="not rigid"):
        opencv_cam_to_world(mirrored)
    with pytest.raises(ValueError, match="4 x 4"):
        opencv_cam_to_world(gl[:3])
    with pytest.raises(ValueError, match="metres_per_unit"):
        opencv_cam_to_world(gl, 0.0)


def test_lens_from_transforms():
    fields = {"fl_x": 1375.5, "fl_y": 1374.5, "cx": 554.6, "cy": 965.3, "w": 1080, "h": 1920,
              "k1": 0.058, "k2": -0.081, "p1": -0.00098, "p2": 0.00016}
    lens = transforms_lens(fields)
    assert lens.model == "plumb_bob" and lens.size == (1080, 1920)
    assert np.allclose(lens.D, [0.058, -0.081, -0.00098, 0.00016, 0.0])
    assert np.allclose(lens.K, [[1375.5, 0, 554.6], [0, 1374.5, 965.3], [0, 0, 1]])
    pinhole = {k: v for k, v in fields.items() if k not in ("k1", "k2", "p1", "p2")}
    assert transforms_lens(pinhole).is_pinhole
    with pytest.raises(ValueError, match="'fl_y'"):
        transforms_lens({k: v for k, v in fields.items() if k != "fl_y"})
    with pytest.raises(ValueError, match="OPENCV_FISHEYE"):
        transforms_lens(dict(fields, camera_model="OPENCV_FISHEYE"))
