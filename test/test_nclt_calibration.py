"""The NCLT rig that the converter and config/nclt.yaml build matches NCLT's published Ladybug3
calibration: extrinsics composed independently (scipy) from the published numbers, each
camera's viewing direction (Cam0 up, Cam1-Cam5 a horizontal ring 72 deg apart, Cam5 forward),
the 90 deg rotation that makes the sideways-mounted images upright, and the intrinsics; a
calibration file that departs from the published values is reported."""

import logging
import pathlib

import numpy as np
import yaml
from scipy.spatial.transform import Rotation

from g2g_model.data import nclt_calibration as nclt
from g2g_model.data.convert_nclt import DEFAULT_CAMERAS, camera_model, camera_spec

ROOT = pathlib.Path(__file__).resolve().parents[1]
W, H = nclt.IMAGE_WH


def _ssc(v):
    """NCLT 6-vector (degrees) -> 4x4, R = Rz(yaw) Ry(pitch) Rx(roll), via scipy."""
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("ZYX", [v[5], v[4], v[3]], degrees=True).as_matrix()
    T[:3, 3] = v[:3]
    return T


def _rig(cams=range(6), scale=1.0):
    return {c: camera_spec(c, nclt.published_K(c), _ssc(nclt.X_LB3_C[c]), (W, H), scale)
            for c in cams}


def _azimuth_deg(v):
    return float(np.degrees(np.arctan2(v[1], v[0])))


def test_extrinsics_are_the_published_ones_turned_upright():
    # REP-103 body <- NCLT body (z down), and the upright camera <- the stored camera.
    flip = np.diag([1.0, -1.0, -1.0, 1.0])
    upright = np.eye(4)
    upright[:3, :3] = Rotation.from_euler("z", -90, degrees=True).as_matrix()
    for c, spec in _rig().items():
        expected = flip @ _ssc(nclt.X_BODY_LB3) @ _ssc(nclt.X_LB3_C[c]) @ upright
        np.testing.assert_allclose(spec.T_body_cam, expected, atol=1e-9)


def test_camera_directions_ring_of_five_and_one_up():
    rig = _rig()
    up = rig[nclt.SKY_CAMERA].T_body_cam[:3, 2]
    assert up[2] > np.cos(np.radians(1.0)), up  # Cam0 looks at the sky
    ring = {c: rig[c].T_body_cam[:3, 2] for c in nclt.RING_CAMERAS}
    for c, axis in ring.items():
        assert abs(np.degrees(np.arcsin(axis[2]))) < 1.0, (c, axis)  # horizontal
    assert abs(_azimuth_deg(ring[nclt.FORWARD_CAMERA])) < 1.0  # Cam5 looks forward (+x)
    # Cam1, Cam2, ... follow Cam5 counter-clockwise (to the left), 72 deg apart.
    for k, c in enumerate(nclt.RING_CAMERAS, start=1):
        turn = _azimuth_deg(ring[c]) - _azimuth_deg(ring[nclt.FORWARD_CAMERA])
        assert abs((turn - 72.0 * k + 180.0) % 360.0 - 180.0) < 2.0, (c, turn)
    # About 4 cm from the Ladybug3 centre, 1.23 m above the body origin.
    centre = np.mean([rig[c].T_body_cam[:3, 3] for c in nclt.RING_CAMERAS], axis=0)
    for c in nclt.RING_CAMERAS:
        assert 0.03 < np.linalg.norm(rig[c].T_body_cam[:2, 3] - centre[:2]) < 0.05
    assert abs(centre[2] - 1.23) < 0.01


def test_images_are_rotated_upright():
    # In the stored image of a ring camera the image x axis points down (the cameras are
    # mounted sideways); after the converter's 90 deg clockwise rotation the image y axis
    # (rows, downwards) is the body's -z and the image is portrait.
    for c, spec in _rig(nclt.RING_CAMERAS).items():
        stored_x = (_ssc(nclt.X_BODY_LB3) @ _ssc(nclt.X_LB3_C[c]))[:3, 0]
        assert stored_x[2] > 0.99, (c, stored_x)  # NCLT body z is down
        np.testing.assert_allclose(spec.T_body_cam[:3, 1], [0, 0, -1], atol=0.01)
        assert (spec.width, spec.height) == (H, W)


def test_intrinsics_follow_the_rotation_and_scale():
    for c, spec in _rig(scale=0.25).items():
        fx, fy, cx, cy = nclt.INTRINSICS[c]
        np.testing.assert_allclose(spec.K[0], [fy / 4, 0, (H - 1 - cy + 0.5) / 4 - 0.5])
        np.testing.assert_allclose(spec.K[1], [0, fx / 4, (cx + 0.5) / 4 - 0.5])
        assert (spec.width, spec.height) == (H // 4, W // 4)
        # The principal point stays inside the image, near its centre.
        assert abs(spec.K[0, 2] - spec.width / 2) < 0.05 * spec.width
        assert abs(spec.K[1, 2] - spec.height / 2) < 0.05 * spec.height


def test_converter_and_config_use_the_ring_and_the_forward_camera():
    assert tuple(DEFAULT_CAMERAS) == nclt.RING_CAMERAS
    config = yaml.safe_load((ROOT / "config" / "nclt.yaml").read_text())
    ring = [f"cam{c}" for c in nclt.RING_CAMERAS]
    forward = f"cam{nclt.FORWARD_CAMERA}"
    assert config["/**/rig_odometry"]["ros__parameters"]["cameras"] == ring
    reloc = config["/**/relocalize"]["ros__parameters"]
    assert reloc["cameras"] == ring and reloc["reloc_camera"] == forward
    assert config["/**/map_builder"]["ros__parameters"]["cameras"] == [forward]


def _write_params(folder, cam, K, x_lb3_c, wh):
    folder.mkdir(exist_ok=True)
    np.savetxt(folder / f"K_cam{cam}.csv", K, delimiter=",")
    np.savetxt(folder / f"x_lb3_c{cam}.csv", np.array([x_lb3_c]), delimiter=",")
    # A U2D map of the test image size (the real ones are 1616x1232: 2 M rows).
    rows, cols = np.mgrid[0:wh[1], 0:wh[0]]
    lines = [f"{r} {q} {r} {q}" for r, q in zip(rows.ravel(), cols.ravel())]
    (folder / f"U2D_Cam{cam}_1616X1232.txt").write_text(f"{wh[0]},{wh[1]}\n"
                                                        + "\n".join(lines) + "\n")


def test_calibration_files_are_checked_against_the_published_values(tmp_path, caplog):
    x = nclt.X_LB3_C[5]
    assert nclt.calibration_differences(5, nclt.published_K(5), _ssc(x), (W, H)) == []
    params = tmp_path / "cam_params"
    _write_params(params, 5, nclt.published_K(5), x, (8, 6))
    with caplog.at_level(logging.WARNING, logger="g2g_model.data.convert_nclt"):
        spec, _ = camera_model(params, 5, (8, 6), 1.0)
    assert not caplog.records, caplog.text
    np.testing.assert_allclose(spec.T_body_cam, _rig([5])[5].T_body_cam, atol=1e-9)
    # Angles written in radians, a camera 2 cm off, a K of another camera.
    radians = list(x[:3]) + list(np.radians(x[3:]))
    _write_params(params, 5, nclt.published_K(5), radians, (8, 6))
    with caplog.at_level(logging.WARNING, logger="g2g_model.data.convert_nclt"):
        camera_model(params, 5, (8, 6), 1.0)
    assert "Cam5: x_lb3_c orientation" in caplog.text and "must be degrees" in caplog.text
    moved = _ssc(x)
    moved[0, 3] += 0.02
    K4 = nclt.published_K(4)
    found = nclt.calibration_differences(5, K4, moved, (W, H))
    assert len(found) == 2 and "2.0 cm" in found[0] and "K differs" in found[1], found
    assert nclt.calibration_differences(5, K4, _ssc(x), (W // 2, H // 2)) == []  # other size
