"""Simulator: determinism, metric depth against hand-built geometry, layout / motion / rig
statistics and the split seed ranges."""

import hashlib

import numpy as np
import pytest

from g2g_model.data.format import TrajectoryReader
from g2g_model.data.rig import R_BODY_CAM_FORWARD, pinhole_K
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.data.sim.occupancy import build_occupancy
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.rigs import RIG_PRESETS, make_rig
from g2g_model.data.sim.layout import Door
from g2g_model.data.sim.scene import Scene, make_scene
from g2g_model.data.sim.trajectory import MotionConfig, frames_for_length, make_traversals
from g2g_model.data.splits import SPLIT_SEEDS, split_of_seed, split_seeds
from g2g_model.geometry import is_rotation, make_pose


def _empty(shape):
    return np.zeros(shape)


def hand_scene(boxes=(), spheres=(), two_rooms=False):
    """Room [0,4]x[0,3]x[0,2.5] (plus, optionally, room [4,7]x[0,3] behind a door in x = 4)."""
    room_lo = [[0, 0, 0]] + ([[4, 0, 0]] if two_rooms else [])
    room_hi = [[4, 3, 2.5]] + ([[7, 3, 2.5]] if two_rooms else [])
    doors = [Door(0, 1, 0, 4.0, (1.0, 2.0), 2.0)] if two_rooms else []
    nb, ns = len(boxes), len(spheres)
    nr = len(room_lo)
    return Scene(
        seed=0, season=0, room_lo=np.array(room_lo, float), room_hi=np.array(room_hi, float),
        room_mat=np.zeros((nr, 3), np.int64), doors=doors,
        group_lo=np.array([b[0] for b in boxes], float).reshape(-1, 3),
        group_hi=np.array([b[1] for b in boxes], float).reshape(-1, 3),
        group_room=np.zeros(nb, np.int64),
        box_lo=np.array([b[0] for b in boxes], float).reshape(-1, 3),
        box_hi=np.array([b[1] for b in boxes], float).reshape(-1, 3),
        box_group=np.arange(nb), box_mat=np.zeros(nb, np.int64),
        sph_center=np.array([s[0] for s in spheres], float).reshape(-1, 3),
        sph_radius=np.array([s[1] for s in spheres], float), sph_room=np.zeros(ns, np.int64),
        sph_mat=np.zeros(ns, np.int64), mat_tex=np.zeros(1, np.int64),
        mat_tint=np.ones((1, 3), np.float32), mat_scale=np.ones(1, np.float32),
        poster_room=_empty(0).astype(np.int64), poster_axis=_empty(0).astype(np.int64),
        poster_side=_empty(0).astype(np.int64), poster_u=_empty((0, 2)),
        poster_z=_empty((0, 2)), poster_image=_empty(0).astype(np.int64),
        light_pos=np.array([[2.0, 1.5, 2.4]] * nr), light_rgb=np.ones((nr, 3)),
        ambient=np.full(3, 0.3))


def _cam_looking_x(pos, yaw=0.0):
    c, s = np.cos(yaw), np.sin(yaw)
    rz = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    return make_pose(rz @ R_BODY_CAM_FORWARD, pos)


SIZE = 33  # odd: the principal point (16, 16) is a pixel centre
K = pinhole_K(SIZE, SIZE, 90.0)


def test_depth_of_known_walls_box_sphere_and_door():
    r = Renderer(hand_scene())
    _, depth = r.render(_cam_looking_x([1.0, 1.5, 1.2]), K, SIZE, SIZE)
    assert depth[0, 16, 16] == pytest.approx(3.0, abs=1e-5)      # wall x = 4
    # Pixel u = 32 looks right (-y) with slope (32 - 16) / f: it hits the wall y = 0 (1.5 m to
    # the right) at z-depth 1.5 / slope; pixel v = 32 hits the floor 1.2 m below likewise.
    slope = (32 - 16) / K[0, 0]
    assert depth[0, 16, 32] == pytest.approx(1.5 / slope, abs=1e-4)
    assert depth[0, 32, 16] == pytest.approx(1.2 / slope, abs=1e-4)
    r = Renderer(hand_scene(boxes=[((2.0, 1.0, 0.0), (2.5, 2.0, 2.0))],
                            spheres=[((1.0, 0.5, 1.2), 0.2)]))
    _, depth = r.render(_cam_looking_x([1.0, 1.5, 1.2]), K, SIZE, SIZE)
    assert depth[0, 16, 16] == pytest.approx(1.0, abs=1e-5)      # box face x = 2
    # Sphere centre 1 m to the right (-y is right: y 1.5 -> 0.5) straight along -y from the
    # camera: a camera looking at yaw -90 deg sees it at 1.0 - 0.2 = 0.8 m.
    _, depth = r.render(_cam_looking_x([1.0, 1.5, 1.2], yaw=-np.pi / 2), K, SIZE, SIZE)
    assert depth[0, 16, 16] == pytest.approx(0.8, abs=1e-5)
    # Through a door (x = 4, y in [1, 2], z < 2) into the second room: far wall x = 7.
    r = Renderer(hand_scene(two_rooms=True))
    _, depth = r.render(_cam_looking_x([1.0, 1.5, 1.2]), K, SIZE, SIZE)
    assert depth[0, 16, 16] == pytest.approx(6.0, abs=1e-5)
    # Row 10 looks up with slope 6 / f: at x = 4 it is at z = 2.29, above the door (2.0).
    assert depth[0, 10, 16] == pytest.approx(3.0, abs=1e-5)
    with pytest.raises(ValueError, match="outside every room"):
        r.render(_cam_looking_x([9.0, 1.5, 1.2]), K, SIZE, SIZE)


def test_render_is_deterministic_and_varies_with_season():
    scene = make_scene(3, season=0, preset="small")
    lo, hi = scene.room_lo[0], scene.room_hi[0]
    pose = _cam_looking_x([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 1.0], 0.7)
    a_rgb, a_d = Renderer(scene).render(pose, K, SIZE, SIZE)
    b_rgb, b_d = Renderer(make_scene(3, season=0, preset="small")).render(pose, K, SIZE, SIZE)
    assert a_rgb.tobytes() == b_rgb.tobytes() and a_d.tobytes() == b_d.tobytes()
    s_rgb, s_d = Renderer(make_scene(3, season=1, preset="small")).render(pose, K, SIZE, SIZE)
    assert s_rgb.tobytes() != a_rgb.tobytes()          # lighting / materials changed
    assert np.mean(np.abs(s_d - a_d) < 1e-4) > 0.8     # the building itself did not
    assert a_rgb.std() > 5 and (a_d > 0).all()


def _digest(path):
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def test_generated_trajectory_bytes_are_identical(tmp_path):
    cfg = SimConfig(scene_preset="small", rig_preset="ring4", traversals=2, frames=3,
                    image_size=32)
    a = generate_trajectory(tmp_path / "a", 7, 1, cfg)
    generate_trajectory(tmp_path / "b", 7, 1, cfg)
    assert _digest(tmp_path / "a" / "scene_00007") == _digest(tmp_path / "b" / "scene_00007")
    assert not a["skipped"] and a["camera_frames"] == 12
    assert generate_trajectory(tmp_path / "a", 7, 1, cfg)["skipped"]  # resumable
    with pytest.raises(ValueError, match="complete but generated with"):
        generate_trajectory(tmp_path / "a", 7, 1, SimConfig(**{**cfg.__dict__, "frames": 4}))
    r = TrajectoryReader(a["path"])
    r.validate_files()
    assert r.has_depth and r.num_frames == 3 and len(r.cameras) == 4
    assert r.meta["scene_seed"] == 7 and r.meta["season"] == 1 and r.meta["split"] == "train"


@pytest.mark.parametrize("seed", [0, 10_000, 20_000])
def test_scene_traversals_are_walkable_and_revisit(seed):
    scene = make_scene(seed)
    assert 2 <= scene.num_rooms <= 6 and len(scene.doors) >= scene.num_rooms - 1
    trav = make_traversals(scene, 3, 150)
    occ = build_occupancy(scene)
    cfg = MotionConfig()
    for t in trav:
        xyz = t.world_T_body[:, :3, 3]
        assert occ.clearance_at(xyz[:, :2]).min() >= 0.8 * cfg.radius_m    # collision-free
        steps = np.linalg.norm(np.diff(xyz[:, :2], axis=0), axis=1)
        assert 0.1 <= steps.mean() <= 0.3 and steps.max() <= 0.3 + 1e-9
        assert 0.5 <= xyz[:, 2].mean() <= 1.5
        assert np.all(np.diff(t.timestamps_ns) == 100_000_000)
        assert is_rotation(t.world_T_body[:, :3, :3]).all()
        yaw = np.arctan2(t.world_T_body[:, 1, 0], t.world_T_body[:, 0, 0])
        turn = np.degrees(np.abs((np.diff(yaw) + np.pi) % (2 * np.pi) - np.pi))
        assert turn.max() <= cfg.max_turn_deg + 1e-6
    # Revisits from another direction: traversal 1 passes within 0.5 m of traversal 0 while
    # heading more than 90 deg differently.
    p0, p1 = trav[0].world_T_body, trav[1].world_T_body
    d = np.linalg.norm(p0[:, None, :2, 3] - p1[None, :, :2, 3], axis=-1)
    y0 = np.arctan2(p0[:, 1, 0], p0[:, 0, 0])
    y1 = np.arctan2(p1[:, 1, 0], p1[:, 0, 0])
    dy = np.abs((y0[:, None] - y1[None] + np.pi) % (2 * np.pi) - np.pi)
    assert ((d < 0.5) & (dy > np.pi / 2)).any()


def test_rigs():
    counts = set()
    for seed in range(12):
        rig = make_rig(seed, "random")
        counts.add(len(rig))
        assert 4 <= len(rig) <= 8
        hfov = np.degrees(2 * np.arctan(rig.cameras[0].width / 2 / rig.cameras[0].K[0, 0]))
        assert 45 - 1e-6 <= hfov <= 120 + 1e-6
        for cam in rig.cameras:
            assert (cam.width, cam.height) == (224, 224)
            # Optical axis roughly horizontal (pitch perturbation only) in the z-up body frame.
            assert abs(cam.T_body_cam[2, 2]) < np.sin(np.radians(10))
    assert len(counts) > 2
    rig = make_rig(0, "ring4")
    yaws = [np.degrees(np.arctan2(c.T_body_cam[1, 2], c.T_body_cam[0, 2])) for c in rig.cameras]
    err = (np.array(yaws) - [0, 90, 180, 270] + 180) % 360 - 180
    assert np.abs(err).max() < 10
    with pytest.raises(ValueError, match="rig preset"):
        make_rig(0, "nope")
    assert set(RIG_PRESETS) >= {"random", "ring4", "ring8"}


@pytest.mark.parametrize("preset, motion, length", [
    ("hall", MotionConfig(step_m=(1.0, 3.0), radius_m=1.0, max_turn_deg=15.0,
                          places_per_room=4), 120.0),
    ("small", MotionConfig(), 15.0),
])
def test_frames_for_length_covers_the_length(preset, motion, length):
    scene = make_scene(20015, 0, preset)
    frames = frames_for_length(scene, length, motion)

    def covered(n):
        xyz = make_traversals(scene, 1, n, motion)[0].world_T_body[:, :3, 3]
        return np.linalg.norm(np.diff(xyz, axis=0), axis=1).sum()

    assert covered(frames) >= length
    assert covered(frames - 3) < length       # a few frames more than the fewest at most
    with pytest.raises(ValueError, match="length_m"):
        frames_for_length(scene, 0.0, motion)


def test_split_seed_ranges_are_disjoint():
    ranges = list(SPLIT_SEEDS.values())
    for i in range(len(ranges)):
        for j in range(i + 1, len(ranges)):
            assert not set(ranges[i]) & set(ranges[j])
    assert split_seeds("test", 2) == [20_000, 20_001] and split_of_seed(10_500) == "val"
    with pytest.raises(ValueError, match="exceeds"):
        split_seeds("val", 2000)
    with pytest.raises(ValueError, match="no split"):
        split_of_seed(15_000)
