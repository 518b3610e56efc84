"""Rig calibration from YAML and from a TF buffer; validation and log formatting."""

import numpy as np
import pytest
import yaml

from g2g_model.geometry import axis_angle_to_matrix, make_pose, matrix_to_quat_xyzw
from g2g_ros.calibration import (
    CameraCalibration,
    RigCalibration,
    format_rig_log_lines,
    load_rig_calibration,
    rig_from_dict,
    rig_from_tf,
    save_rig_calibration,
    validate_rig,
)
from g2g_ros.tf_buffer import TFBuffer, TFLookupError

# base_link (x forward, z up) <- optical frame (z forward, x right, y down), yawed per camera.
OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def _camera(i, yaw_deg):
    R = axis_angle_to_matrix([0, 0, np.radians(yaw_deg)]) @ OPTICAL
    return CameraCalibration(
        name=f"cam{i}", frame_id=f"cam{i}_optical_frame",
        K=np.array([[400.0 + i, 0, 320], [0, 401.0 + i, 240], [0, 0, 1]]), size=(640, 480),
        T_base_cam=make_pose(R, [0.1 * i, -0.05, 1.2]),
    )


def _rig():
    return RigCalibration("base_link", tuple(_camera(i, 72 * i) for i in range(5)))


def test_yaml_round_trip(tmp_path):
    rig = _rig()
    path = tmp_path / "rig.yaml"
    save_rig_calibration(rig, path)
    loaded = load_rig_calibration(path)
    assert loaded.names == rig.names and loaded.base_frame == "base_link"
    assert loaded.source == str(path)
    np.testing.assert_allclose(loaded.extrinsics(), rig.extrinsics(), atol=1e-15)
    np.testing.assert_allclose(loaded.intrinsics(), rig.intrinsics())
    assert loaded.camera("cam3").size == (640, 480)
    with pytest.raises(ValueError, match="no camera 'cam9'"):
        loaded.camera("cam9")


def test_yaml_quaternion_form_and_defaults(tmp_path):
    T = _rig().cameras[1].T_base_cam
    text = yaml.safe_dump({"cameras": [{
        "name": "front", "width": 320, "height": 240, "K": [200, 0, 160, 0, 200, 120, 0, 0, 1],
        "translation": T[:3, 3].tolist(),
        "rotation_xyzw": matrix_to_quat_xyzw(T[:3, :3]).tolist(),
    }]})
    path = tmp_path / "q.yaml"
    path.write_text(text)
    rig = load_rig_calibration(path)
    cam = rig.camera("front")
    assert cam.frame_id == "front_optical_frame" and rig.base_frame == "base_link"
    np.testing.assert_allclose(cam.T_base_cam, T, atol=1e-12)


def _dict_with(**changes):
    data = {"cameras": [{"name": "c", "width": 10, "height": 8,
                         "K": [[5, 0, 5], [0, 5, 4], [0, 0, 1]],
                         "T_base_cam": np.eye(4).tolist()}]}
    data["cameras"][0].update(changes)
    return data


@pytest.mark.parametrize("changes, message", [
    ({"K": [[-5, 0, 5], [0, 5, 4], [0, 0, 1]]}, "focal lengths"),
    ({"K": [1, 2, 3]}, "expected 3x3"),
    ({"T_base_cam": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 1]]}, "orthonormal"),
    ({"T_base_cam": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, -1, 0], [0, 0, 0, 1]]}, "det"),
    ({"T_base_cam": [[1, 0, 0, float("nan")], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]},
     "finite"),
    ({"width": 0}, "size must be positive"),
    ({"K": "abc"}, "numeric"),
])
def test_invalid_calibrations_name_the_camera_and_field(changes, message):
    with pytest.raises(ValueError, match=message) as err:
        rig_from_dict(_dict_with(**changes), source="rig.yaml")
    assert "camera 'c'" in str(err.value) and "rig.yaml" in str(err.value)


def test_structural_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_rig_calibration(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("cameras: [unclosed")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_rig_calibration(bad)
    with pytest.raises(ValueError, match="'cameras' list"):
        rig_from_dict({"base_frame": "base_link"})
    with pytest.raises(ValueError, match="missing fields"):
        rig_from_dict({"cameras": [{"name": "c", "width": 3}]})
    with pytest.raises(ValueError, match="T_base_cam or translation"):
        rig_from_dict({"cameras": [{"name": "c", "width": 3, "height": 3, "K": np.eye(3)}]})
    twice = _dict_with()
    twice["cameras"].append(dict(twice["cameras"][0]))
    with pytest.raises(ValueError, match="unique"):
        rig_from_dict(twice)


def test_rig_from_tf_static_matches_yaml():
    rig = _rig()
    buf = TFBuffer()
    for cam in rig.cameras:
        buf.set_transform_matrix("base_link", cam.frame_id, 0, cam.T_base_cam, static=True)
    intrinsics = {c.name: (c.K, c.size) for c in rig.cameras}
    from_tf = rig_from_tf(buf, intrinsics)
    assert from_tf.names == rig.names and from_tf.source == "/tf_static"
    np.testing.assert_allclose(from_tf.extrinsics(), rig.extrinsics(), atol=1e-12)
    with pytest.raises(TFLookupError, match="cam9_optical_frame"):
        rig_from_tf(buf, {"cam9": (rig.cameras[0].K, (640, 480))})


def test_log_lines_one_per_camera():
    rig = validate_rig(_rig())
    lines = format_rig_log_lines(rig)
    assert len(lines) == 5 and all("\n" not in line for line in lines)
    assert lines[2].startswith("camera cam2 (cam2_optical_frame) 640x480 fx=402.00")
    assert "t=[+0.2000 -0.0500 +1.2000] m" in lines[2]
    assert "hfov=77.3deg" in lines[0]  # 2 atan(320 / 400)
