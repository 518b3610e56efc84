"""Rig calibration from YAML and from a TF buffer; validation, camera_info and log formatting."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from g2g_model.data.rig import (
    CALIBRATION_ROTATION_ATOL,
    CameraSpec,
    Rig,
    load_rig,
    save_rig,
)
from g2g_model.geometry import axis_angle_to_matrix, make_pose, matrix_to_quat_xyzw
from g2g_ros.calibration import camera_info_to_lens, format_rig_log_lines, rig_from_tf
from g2g_ros.tf_buffer import TFBuffer, TFLookupError

# base_link (x forward, z up) <- optical frame (z forward, x right, y down), yawed per camera.
OPTICAL = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def _camera(i, yaw_deg):
    R = axis_angle_to_matrix([0, 0, np.radians(yaw_deg)]) @ OPTICAL
    return CameraSpec(
        name=f"cam{i}", frame_id=f"cam{i}_optical_frame",
        K=np.array([[400.0 + i, 0, 320], [0, 401.0 + i, 240], [0, 0, 1]]), width=640, height=480,
        T_body_cam=make_pose(R, [0.1 * i, -0.05, 1.2]),
    )


def _rig():
    return Rig([_camera(i, 72 * i) for i in range(5)], base_frame="base_link")


def test_yaml_round_trip(tmp_path):
    rig = _rig()
    path = tmp_path / "rig.yaml"
    save_rig(rig, path, calibration=True)
    loaded = load_rig(path, calibration=True)
    assert loaded.names == rig.names and loaded.base_frame == "base_link"
    assert loaded.source == str(path)
    np.testing.assert_allclose(loaded.T_body_cams(), rig.T_body_cams(), atol=1e-15)
    np.testing.assert_allclose(loaded.intrinsics(), rig.intrinsics())
    assert loaded["cam3"].size == (640, 480)
    with pytest.raises(ValueError, match="no camera 'cam9'"):
        loaded["cam9"]


def test_yaml_quaternion_form_and_defaults(tmp_path):
    T = _rig().cameras[1].T_body_cam
    text = yaml.safe_dump({"cameras": [{
        "name": "front", "width": 320, "height": 240, "K": [200, 0, 160, 0, 200, 120, 0, 0, 1],
        "translation": T[:3, 3].tolist(),
        "rotation_xyzw": matrix_to_quat_xyzw(T[:3, :3]).tolist(),
    }]})
    path = tmp_path / "q.yaml"
    path.write_text(text)
    rig = load_rig(path, calibration=True)
    cam = rig["front"]
    assert cam.frame_id == "front_optical_frame" and rig.base_frame == "base_link"
    np.testing.assert_allclose(cam.T_body_cam, T, atol=1e-12)


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
        Rig.from_dict(_dict_with(**changes), "rig.yaml", calibration=True)
    assert "camera 'c'" in str(err.value) and "rig.yaml" in str(err.value)


def test_structural_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_rig(tmp_path / "missing.yaml", calibration=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cameras: [unclosed")
    with pytest.raises(ValueError, match="not valid YAML"):
        load_rig(bad, calibration=True)
    with pytest.raises(ValueError, match="'cameras' list"):
        Rig.from_dict({"base_frame": "base_link"}, calibration=True)
    with pytest.raises(ValueError, match="missing fields"):
        Rig.from_dict({"cameras": [{"name": "c", "width": 3}]}, calibration=True)
    with pytest.raises(ValueError, match="T_base_cam or translation"):
        Rig.from_dict({"cameras": [{"name": "c", "width": 3, "height": 3, "K": np.eye(3)}]},
                      calibration=True)
    twice = _dict_with()
    twice["cameras"].append(dict(twice["cameras"][0]))
    with pytest.raises(ValueError, match="unique"):
        Rig.from_dict(twice, calibration=True)


def test_rig_from_tf_static_matches_yaml():
    rig = _rig()
    buf = TFBuffer()
    for cam in rig.cameras:
        buf.set_transform_matrix("base_link", cam.frame_id, 0, cam.T_body_cam, static=True)
    intrinsics = {c.name: (c.K, c.size) for c in rig.cameras}
    from_tf = rig_from_tf(buf, intrinsics)
    assert from_tf.names == rig.names and from_tf.source == "/tf_static"
    np.testing.assert_allclose(from_tf.T_body_cams(), rig.T_body_cams(), atol=1e-12)
    with pytest.raises(TFLookupError, match="cam9_optical_frame"):
        rig_from_tf(buf, {"cam9": (rig.cameras[0].K, (640, 480))})


def test_log_lines_one_per_camera():
    rig = _rig().validate(CALIBRATION_ROTATION_ATOL)
    lines = format_rig_log_lines(rig)
    assert len(lines) == 5 and all("\n" not in line for line in lines)
    assert lines[2].startswith("camera cam2 (cam2_optical_frame) 640x480 fx=402.00")
    assert "t=[+0.2000 -0.0500 +1.2000] m" in lines[2]
    assert "hfov=77.3deg" in lines[0]  # 2 atan(320 / 400)


def _info(**fields):
    return SimpleNamespace(**fields)


def test_camera_info_to_lens():
    from sensor_msgs.msg import CameraInfo

    info = CameraInfo(width=640, height=480, k=[500.0, 0, 320, 0, 510, 240, 0, 0, 1])
    lens = camera_info_to_lens(info)
    assert lens.size == (640, 480) and lens.is_pinhole
    np.testing.assert_allclose(lens.K, [[500, 0, 320], [0, 510, 240], [0, 0, 1]])
    ros1 = _info(width=10, height=5, K=[1, 0, 5, 0, 1, 2.5, 0, 0, 1], D=[0.1, 0, 0, 0],
                 distortion_model="equidistant")
    assert camera_info_to_lens(ros1).model == "equidistant"
    with pytest.raises(ValueError, match="focal"):
        camera_info_to_lens(CameraInfo(width=640, height=480))  # all-zero K
    with pytest.raises(ValueError, match="size"):
        camera_info_to_lens(_info(width=0, height=480, k=[1, 0, 0, 0, 1, 0, 0, 0, 1]))
    with pytest.raises(ValueError, match="finite"):
        camera_info_to_lens(_info(width=1, height=1, k=[np.nan, 0, 0, 0, 1, 0, 0, 0, 1]))
    with pytest.raises(ValueError, match="principal point"):  # a K for another image size
        camera_info_to_lens(_info(width=320, height=240, k=[500, 0, 640, 0, 500, 480, 0, 0, 1]))
    with pytest.raises(ValueError, match="'fov' is not supported"):
        camera_info_to_lens(_info(width=10, height=5, k=[1, 0, 5, 0, 1, 2.5, 0, 0, 1],
                                  d=[0.9], distortion_model="fov"))
    with pytest.raises(ValueError, match="takes 5 coefficients, got 4"):
        camera_info_to_lens(_info(width=10, height=5, k=[1, 0, 5, 0, 1, 2.5, 0, 0, 1],
                                  d=[0.1, 0, 0, 0], distortion_model="plumb_bob"))


def test_one_rig_for_datasets_and_ros(tmp_path):
    # The dataset's rig.yaml layout and the ROS calibration file describe the same Rig.
    rig = _rig()
    dataset = rig.to_dict()
    assert set(dataset) == {"cameras"} and "frame_id" not in dataset["cameras"][0]
    again = Rig.from_dict(dataset)
    np.testing.assert_allclose(again.T_body_cams(), rig.T_body_cams())
    assert [c.frame_id for c in again.cameras] == [c.frame_id for c in rig.cameras]
    path = tmp_path / "rig.yaml"
    save_rig(again, path, calibration=True)
    assert yaml.safe_load(path.read_text())["cameras"][0]["T_base_cam"] == \
        dataset["cameras"][0]["T_body_cam"]
    # Camera names are folder names in a dataset only.
    named = _dict_with(name="front/left")
    assert Rig.from_dict(named, calibration=True).names == ["front/left"]
    with pytest.raises(ValueError, match="A-Za-z0-9"):
        Rig.from_dict({"cameras": [{**named["cameras"][0], "T_body_cam": np.eye(4)}]})


T265_CALIBRATION = Path(__file__).resolve().parent / "fixtures" / "t265" / "t265_calibration.yaml"


def test_calibration_file_lens_is_rectified_by_the_nodes(tmp_path):
    # A calibration file's distortion (the T265's fisheye) is the camera's lens: kept through a
    # round trip, rectified by the nodes' calibrations, refused with its name when unsupported.
    from g2g_model.cameras.reduction import ImageNeeds
    from g2g_ros.camera_calibrations import CameraCalibrations, rig_calibrations

    rig = load_rig(T265_CALIBRATION, calibration=True)
    spec = rig["fisheye1"]
    assert spec.distortion_model == "equidistant" and not spec.is_pinhole
    assert spec.distortion_coefficients == (0.0008, 0.031, -0.03, 0.005)
    save_rig(rig, tmp_path / "again.yaml", calibration=True)
    assert load_rig(tmp_path / "again.yaml", calibration=True)["fisheye2"].lens().same_as(
        rig["fisheye2"].lens())
    assert "lens equidistant D=[0.0008, 0.031, -0.03, 0.005]" in format_rig_log_lines(rig)[0]
    calibrations = rig_calibrations(rig, CameraCalibrations(needs=ImageNeeds((112, 112), 480)))
    imaging = calibrations.get("fisheye1")
    assert imaging.lens.model == "equidistant" and imaging.size == (480, 453)
    hfov = np.degrees(2 * np.arctan(imaging.size[0] / 2 / imaging.K[0, 0]))
    assert hfov == pytest.approx(100.0, abs=0.5)  # the rectified pinhole's default view
    data = yaml.safe_load(T265_CALIBRATION.read_text())
    data["cameras"][0]["distortion_model"] = "fov"
    with pytest.raises(ValueError, match=r"fisheye1.*'fov' is not supported"):
        Rig.from_dict(data, calibration=True)
    data["cameras"][0].update(distortion_model="plumb_bob",
                              distortion_coefficients={"rows": 1, "cols": 5,
                                                       "data": [0.1, 0, 0, 0, 0]})
    assert Rig.from_dict(data, calibration=True)["fisheye1"].distortion_model == "plumb_bob"
    with pytest.raises(ValueError, match="a dataset's images are pinhole images"):
        Rig.from_dict({"cameras": data["cameras"][:1]})
