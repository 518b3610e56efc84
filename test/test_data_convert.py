"""Converters on tiny fake trees: a known 3-D point must project where it was drawn."""

import shutil

import cv2
import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from g2g_model.data.convert_nclt import convert_nclt
from g2g_model.data.convert_zjh import ZJH_CAMERAS, convert_zjh, stamp_from_name
from g2g_model.data.format import TrajectoryReader

RAW_W, RAW_H = 40, 30


def _ssc(v, degrees):
    """NCLT 6-vector -> 4x4 with R = Rz(yaw) Ry(pitch) Rx(roll), via scipy (independent)."""
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("ZYX", [v[5], v[4], v[3]], degrees=degrees).as_matrix()
    T[:3, 3] = v[:3]
    return T


def _project(K, world_T_cam, X):
    p = np.linalg.inv(world_T_cam) @ np.append(X, 1.0)
    return np.array([K[0, 0] * p[0] / p[2] + K[0, 2], K[1, 1] * p[1] / p[2] + K[1, 2]]), p[2]


def _brightest(img):
    g = img.astype(np.float64).sum(-1)
    mask = g > 0.5 * g.max()
    vv, uu = np.nonzero(mask)
    w = g[mask]
    return np.array([(uu * w).sum() / w.sum(), (vv * w).sum() / w.sum()])


def _nclt_tree(root, date, cams, utimes, dot_px):
    params = root / "cam_params"
    params.mkdir(parents=True)
    calib = {}
    for c in cams:
        K = np.array([[30.0 + c, 0, 20.3], [0, 34.0 - c, 13.1], [0, 0, 1]])
        x_lb3_c = [0.04, -0.002 * c, 0.001, 160.0 + c, 89.0 - c, 150.0 + 10 * c]
        np.savetxt(params / f"K_cam{c}.csv", K, delimiter=",")
        np.savetxt(params / f"x_lb3_c{c}.csv", np.array([x_lb3_c]), delimiter=",")
        rows, cols = np.mgrid[0:RAW_H, 0:RAW_W]
        lines = [f"{r} {q} {r} {q}" for r, q in zip(rows.ravel(), cols.ravel())]
        (params / f"U2D_Cam{c}_1616X1232.txt").write_text(
            f"{RAW_W},{RAW_H}\n" + "\n".join(lines) + "\n")
        calib[c] = (K, x_lb3_c)
    gt = ["%d,nan,nan,nan,nan,nan,nan" % (utimes[0] - 50_000)]
    poses = {}
    for k, u in enumerate(utimes):
        v = [1.0 + 0.5 * k, -2.0 + 0.1 * k, -0.3, 0.01 * k, -0.02, 0.3 + 0.2 * k]
        gt.append("%d," % u + ",".join(repr(x) for x in v))
        poses[u] = _ssc(v, degrees=False)
    (root / f"groundtruth_{date}.csv").write_text("\n".join(gt) + "\n")
    body_lb3 = _ssc([0.035, 0.002, -1.23, -179.93, -0.23, 0.50], degrees=True)
    points = {}
    for c in cams:
        K, x = calib[c]
        (root / date / "lb3" / f"Cam{c}").mkdir(parents=True)
        for u in utimes:
            world_T_cam = poses[u] @ body_lb3 @ _ssc(x, degrees=True)
            ray = np.linalg.inv(K) @ np.array([*dot_px, 1.0])
            points[(c, u)] = (world_T_cam @ np.append(ray * 6.0, 1.0))[:3]
            img = np.zeros((RAW_H, RAW_W, 3), np.uint8)
            img[dot_px[1], dot_px[0]] = 255
            cv2.imwrite(str(root / date / "lb3" / f"Cam{c}" / f"{u}.tiff"), img)
    return points


def test_nclt_geometry(tmp_path):
    cams, utimes, dot = (1, 4), [1_326_000_000_000_000, 1_326_000_000_200_000], (25, 10)
    points = _nclt_tree(tmp_path / "nclt", "2012-01-08", cams, utimes, dot)
    out = convert_nclt(tmp_path / "nclt", "2012-01-08", tmp_path / "out", cameras=cams,
                       scale=1.0)
    r = TrajectoryReader(out)
    assert r.num_frames == 2 and r.cameras == ["cam1", "cam4"]
    np.testing.assert_array_equal(r.timestamps_ns, np.array(utimes) * 1000)
    spec = r.rig["cam1"]
    assert (spec.width, spec.height) == (RAW_H, RAW_W)  # rotated to portrait
    # The converted world is NCLT's (z down) turned by pi about x (REP-103, z up).
    flip = np.diag([1.0, -1.0, -1.0])
    for i, u in enumerate(utimes):
        for c in cams:
            name = f"cam{c}"
            uv, z = _project(r.rig[name].K, r.world_T_cam(name)[i], flip @ points[(c, u)])
            assert z > 0
            # Rotating 90 deg clockwise sends raw (u, v) to (H - 1 - v, u).
            np.testing.assert_allclose(uv, [RAW_H - 1 - dot[1], dot[0]], atol=1e-6)
            np.testing.assert_allclose(_brightest(r.image(name, i)), uv, atol=1e-6)
    # REP-103 frames: with small roll / pitch the body z axis points (nearly) up in the world.
    assert r.world_T_body[0, 2, 2] > 0.99


def test_nclt_scaled_intrinsics_follow(tmp_path):
    cams, utimes, dot = (2,), [1_000_000_000, 1_000_200_000], (25, 10)
    points = _nclt_tree(tmp_path / "nclt", "d", cams, utimes, dot)
    r = TrajectoryReader(convert_nclt(tmp_path / "nclt", "d", tmp_path / "o", cameras=cams,
                                      scale=0.5))
    assert (r.rig["cam2"].width, r.rig["cam2"].height) == (15, 20)
    uv, _ = _project(r.rig["cam2"].K, r.world_T_cam("cam2")[1],
                     np.diag([1.0, -1.0, -1.0]) @ points[(2, utimes[1])])
    expected = [(RAW_H - 1 - dot[1] + 0.5) / 2 - 0.5, (dot[0] + 0.5) / 2 - 0.5]
    np.testing.assert_allclose(uv, expected, atol=1e-6)


def test_nclt_bad_inputs(tmp_path):
    _nclt_tree(tmp_path / "nclt", "d", (1,), [1_000_000_000, 1_000_200_000], (3, 3))
    with pytest.raises(ValueError, match="Cam3: missing camera folder"):
        convert_nclt(tmp_path / "nclt", "d", tmp_path / "o", cameras=(1, 3))
    lb3 = tmp_path / "nclt" / "d" / "lb3"
    shutil.copytree(lb3 / "Cam1", lb3 / "Cam3")
    with pytest.raises(ValueError, match=r"K_cam3\.csv: missing"):
        convert_nclt(tmp_path / "nclt", "d", tmp_path / "o", cameras=(1, 3))
    tiff = next((tmp_path / "nclt" / "d" / "lb3" / "Cam1").glob("*.tiff"))
    cv2.imwrite(str(tiff), np.zeros((RAW_H, RAW_W + 2, 3), np.uint8))
    with pytest.raises(ValueError, match="not 40x30|map is"):
        convert_nclt(tmp_path / "nclt", "d", tmp_path / "o", cameras=(1,))
    gt = tmp_path / "nclt" / "groundtruth_d.csv"
    gt.write_text(gt.read_text() + "5,1,2\n")
    with pytest.raises(ValueError, match=r"groundtruth_d\.csv:4: expected 7 fields"):
        convert_nclt(tmp_path / "nclt", "d", tmp_path / "o", cameras=(1,))
    assert not (tmp_path / "o").exists()


def _zjh_pose(t):
    """Ground-truth body pose of the fake ZJH run at time t (linear motion, constant yaw rate)."""
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("z", 0.2 + 0.4 * t).as_matrix()
    T[:3, 3] = [2.0 + 0.8 * t, -1.0 + 0.3 * t, 1.3]
    return T


def test_zjh_geometry(tmp_path):
    root = tmp_path / "zjh"
    base = root / "Floor_03" / "traj_2"
    w, h = 48, 36
    K = np.array([[40.0, 0, 23.7], [0, 41.0, 17.2], [0, 0, 1]])
    yaws = {"front_left": 20.0, "front_right": -20.0, "left": 90.0, "right": -90.0}
    dist = {"left": [0.05, -0.01, 0.001, 0.0005, 0.0]}
    base_rot = np.array([[0, 0, 1], [-1, 0, 0], [0, -1, 0]], float)  # camera forward = body x
    cal = {"cameras": {}}
    for c in ZJH_CAMERAS:
        T = np.eye(4)
        T[:3, :3] = Rotation.from_euler("z", yaws[c], degrees=True).as_matrix() @ base_rot
        T[:3, 3] = [0.1, 0.05 if "left" in c else -0.05, 0.2]
        cal["cameras"][c] = {"K": K.tolist(), "T_body_cam": T.tolist(),
                             "dist": dist.get(c, [0, 0, 0, 0, 0])}
    base.mkdir(parents=True)
    (root / "Floor_03" / "calib.yaml").write_text(yaml.safe_dump(cal))
    lines = ["# t x y z qx qy qz qw"]
    for t in np.arange(0.0, 1.01, 0.05):
        T = _zjh_pose(t)
        q = Rotation.from_matrix(T[:3, :3]).as_quat()
        lines.append(f"1700000000.{int(round(t * 1e6)):06d} " if t < 1 else "1700000001.000000 ")
        lines[-1] += " ".join(repr(float(x)) for x in [*T[:3, 3], *q])
    (base / "tum_gt.txt").write_text("\n".join(lines) + "\n")
    px = {"front_left": (30, 12), "front_right": (10, 20), "left": (40, 30), "right": (5, 5)}
    points = {}
    for c in ZJH_CAMERAS:
        (base / f"cam_{c}").mkdir()
        T_bc = np.array(cal["cameras"][c]["T_body_cam"])
        for k, t in enumerate((0.2, 0.5, 0.8)):
            t_img = t + (0.003 if c == "right" else 0.0)  # within the default 10 ms slop
            world_T_cam = _zjh_pose(t) @ T_bc
            ray = np.linalg.inv(K) @ np.array([*px[c], 1.0])
            X = (world_T_cam @ np.append(ray * 5.0, 1.0))[:3]
            points[(c, k)] = X
            # Draw where the *distorted* camera sees X (cv2.projectPoints applies dist).
            uv, _ = cv2.projectPoints((ray * 5.0)[None], np.zeros(3), np.zeros(3), K,
                                      np.array(cal["cameras"][c]["dist"], float))
            img = np.zeros((h, w, 3), np.uint8)
            cv2.circle(img, tuple(int(round(v)) for v in uv[0, 0]), 1, (255, 255, 255), -1)
            name = f"1700000000.{int(round(t_img * 1e6)):06d}.jpg"
            cv2.imwrite(str(base / f"cam_{c}" / name), img, [cv2.IMWRITE_JPEG_QUALITY, 100])
    out = convert_zjh(root, "Floor_03", "traj_2", tmp_path / "out")
    r = TrajectoryReader(out)
    assert r.num_frames == 3 and r.cameras == list(ZJH_CAMERAS)
    np.testing.assert_array_equal(r.timestamps_ns,
                                  [1_700_000_000_200_000_000, 1_700_000_000_500_000_000,
                                   1_700_000_000_800_000_000])
    np.testing.assert_allclose(r.world_T_body[1], _zjh_pose(0.5), atol=1e-6)
    for c in ZJH_CAMERAS:
        for k in range(3):
            uv, z = _project(r.rig[c].K, r.world_T_cam(c)[k], points[(c, k)])
            assert z > 0
            np.testing.assert_allclose(uv, px[c], atol=1e-6)
            np.testing.assert_allclose(_brightest(r.image(c, k)), px[c], atol=1.0)


def test_zjh_bad_inputs(tmp_path):
    assert stamp_from_name("1700000000.5") == 1_700_000_000_500_000_000
    with pytest.raises(ValueError, match="not <sec>.<fraction>"):
        stamp_from_name("frame_001")
    with pytest.raises(ValueError, match="no calib.yaml"):
        convert_zjh(tmp_path, "Floor_01", "traj_1", tmp_path / "o")
