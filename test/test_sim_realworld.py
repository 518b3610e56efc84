"""Simulator options towards real data: car-speed motion, real rig layouts with varied cameras,
photographs as textures, random lighting, per-camera exposure; the defaults stay as they were."""

import hashlib
import json

import numpy as np
import pytest

from g2g_model.data.format import TrajectoryReader
from g2g_model.data.rig import R_BODY_CAM_FORWARD
from g2g_model.data.sim import cli
from g2g_model.data.sim.exposure import (GAIN_RANGE, GAMMA_RANGE, apply_exposure,
                                         exposure_schedule)
from g2g_model.data.sim.furnishing import Materials
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.data.sim.photos import PHOTO_TEXTURE_NAMES, PHOTOS, load_photo, make_tileable
from g2g_model.data.sim.renderer import Renderer
from g2g_model.data.sim.rigs import RIG_PRESETS, make_rig
from g2g_model.data.sim.scene import make_scene
from g2g_model.data.sim.textures import TEXTURE_NAMES, texture_library
from g2g_model.data.sim.trajectory import MOTION_PRESETS, MotionConfig, make_traversals

# sha256 of a few default renders and traversals, computed with the simulator before these
# options existed (2026-11-29): the defaults must keep rendering exactly this.
DEFAULT_RENDER_SHA = "adc352fcec7ad03cab8c9c27ad346035062145f241d6aeca8add686498681fa1"
NEW_RIGS = ("car3", "car6", "stereo", "ladybug6", "zjh4")


def _steps_and_turns(poses):
    steps = np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=1)
    yaw = np.degrees(np.arctan2(poses[:, 1, 0], poses[:, 0, 0]))
    return steps, np.abs((np.diff(yaw) + 180.0) % 360.0 - 180.0)


def test_defaults_render_as_before():
    h = hashlib.sha256()
    for preset, rig_preset in (("small", "ring4"), ("hall", "car5")):
        trav = make_traversals(make_scene(3, 0, preset), 2, 3)[1]
        rig = make_rig(3, rig_preset, 32)
        rgb, depth = Renderer(make_scene(3, 1, preset)).render(
            trav.world_T_body[2] @ rig.T_body_cams(), rig.intrinsics(), 32, 32)
        h.update(trav.world_T_body.tobytes())
        h.update(rgb.tobytes())
        h.update(depth.tobytes())
    assert h.hexdigest() == DEFAULT_RENDER_SHA


@pytest.mark.parametrize("preset", ["street", "courtyard"])
def test_car_motion_spans_standstill_to_car_speed(preset):
    cfg = MOTION_PRESETS["car"]
    scene = make_scene(1, 0, preset)
    assert (scene.room_hi.max(0) - scene.room_lo.min(0))[:2].max() >= 30.0
    trav = make_traversals(scene, 2, 80, cfg)
    for t in trav:
        steps, turns = _steps_and_turns(t.world_T_body)
        assert steps.min() == 0.0                     # stands still ...
        assert 1.0 <= steps.max() <= 3.0 + 1e-9       # ... and drives (10 m/s and more)
        assert turns.max() <= 30.0 + 1e-6 and turns.max() > 10.0
        # A vehicle: its step changes by about accel_m per frame at most (the limit is taken
        # where the frame starts), and it heads where it goes: a step leaves the body at most
        # half a frame's turn off its axis (a bend's chord), plus the creep of a hairpin.
        assert np.abs(np.diff(steps)).max() <= 2 * cfg.accel_m
        moving = steps > 0.2
        body = np.array([np.linalg.solve(a, b)[:3, 3] for a, b in
                         zip(t.world_T_body[:-1], t.world_T_body[1:])])[moving]
        slip = np.degrees(np.arctan2(np.abs(body[:, 1]), body[:, 0]))
        assert slip.max() <= cfg.max_turn_deg / 2 + 2.0, slip.max()
        assert np.all(scene.room_of(t.world_T_body[:, :3, 3]) >= 0)
    again = make_traversals(make_scene(1, 0, preset), 2, 80, cfg)
    assert np.array_equal(again[0].world_T_body, trav[0].world_T_body)


def test_stop_go_indoors_and_motion_config_checks():
    steps, _ = _steps_and_turns(make_traversals(make_scene(2, 0, "small"), 1, 60,
                                                MOTION_PRESETS["stop_go"])[0].world_T_body)
    assert steps.min() == 0.0 and 0.95 <= steps.max() <= 1.0 + 1e-9
    walk, _ = _steps_and_turns(make_traversals(make_scene(2, 0, "small"), 1, 60)[0].world_T_body)
    assert walk.max() < 0.35  # the default robot still walks
    with pytest.raises(ValueError, match="speed_profile"):
        MotionConfig(speed_profile="fast")
    with pytest.raises(ValueError, match="step_m"):
        MotionConfig(step_m=(1.0, 0.5))


@pytest.mark.parametrize("preset", NEW_RIGS)
def test_new_rig_presets(preset):
    cfg = RIG_PRESETS[preset]
    rigs = [make_rig(seed, preset, 96) for seed in range(6)]
    for rig in rigs:
        assert len(rig) == cfg["cameras"] and rig.names == list(cfg["names"])
        for cam in rig.cameras:
            aspect = cam.width / cam.height
            assert cfg["aspect"][0] - 0.02 <= aspect <= cfg["aspect"][1] + 0.02
            assert 0.9 * 96 ** 2 <= cam.width * cam.height <= 1.1 * 96 ** 2
            hfov = np.degrees(2 * np.arctan(cam.width / 2 / cam.K[0, 0]))
            jitter = 1.0 + cfg["hfov_jitter"]
            assert cfg["hfov_deg"][0] / jitter - 0.5 <= hfov <= cfg["hfov_deg"][1] * jitter + 0.5
            off = np.abs(cam.K[:2, 2] - [(cam.width - 1) / 2, (cam.height - 1) / 2])
            assert np.all(off <= np.array([cam.width, cam.height]) * cfg["principal_jitter"])
    sizes = {(r.cameras[0].width, r.cameras[0].height) for r in rigs}
    assert len(sizes) > 1 or cfg["aspect"][0] == cfg["aspect"][1]   # varies per scene
    again = make_rig(3, preset, 96)
    assert np.array_equal(again.intrinsics(), rigs[3].intrinsics())
    assert np.array_equal(again.T_body_cams(), rigs[3].T_body_cams())


def test_rig_layouts():
    lady = make_rig(5, "ladybug6", 96)
    axes = lady.T_body_cams()[:, :3, 2]               # optical axes in the body frame
    assert axes[5, 2] > 0.98                          # "up" looks up
    assert np.all(np.abs(axes[:5, 2]) < 0.2)          # the ring looks sideways
    assert all(c.height > c.width for c in lady.cameras)   # portrait images
    for seed in range(5):
        pos = make_rig(seed, "stereo", 96).T_body_cams()[:, :3, 3]
        assert 0.05 <= np.linalg.norm(pos[0] - pos[1]) <= 0.32
    car = make_rig(0, "car6", 96).T_body_cams()
    assert car[0, 0, 3] > 1.0 and car[5, 0, 3] < -1.0   # front camera at the front, rear behind
    ring = make_rig(0, "ring4", 96)
    assert all(c.width == c.height == 96 for c in ring.cameras)
    assert np.allclose(ring.T_body_cams()[0, :3, :3] @ R_BODY_CAM_FORWARD.T, np.eye(3),
                       atol=0.3)


def test_photographs_load_from_installed_packages_and_tile():
    for photo in PHOTOS:
        img = load_photo(photo)
        assert img.ndim == 3 and img.shape[2] == 3 and min(img.shape[:2]) >= 100, photo.name
        assert 0.0 <= img.min() and img.max() <= 1.0 and img.std() > 0.03, photo.name
        assert photo.licence and photo.origin
    assert {p.package for p in PHOTOS} == {"scikit-image", "matplotlib", "scikit-learn"}
    lib = texture_library(photos=True)
    assert len(lib) == len(TEXTURE_NAMES) == 19 + len(PHOTO_TEXTURE_NAMES)
    assert TEXTURE_NAMES[19:] == PHOTO_TEXTURE_NAMES
    assert np.array_equal(lib[:19], texture_library())   # the procedural ones unchanged
    # Tileable: a ramp jumps by ~1 where it repeats; made tileable, the jump across the tile
    # border is no larger than the largest step between neighbouring texels.
    yy, xx = np.mgrid[0:64, 0:64].astype(np.float32) / 64
    ramp = np.repeat(((xx + yy) / 2)[..., None], 3, axis=-1)
    tile = make_tileable(ramp)
    for axis in (0, 1):
        wrap = np.abs(tile.take(0, axis) - tile.take(-1, axis)).max()
        assert wrap <= np.abs(np.diff(tile, axis=axis)).max() + 1e-6
        assert np.abs(ramp.take(0, axis) - ramp.take(-1, axis)).max() > 20 * wrap


def test_photo_textures_on_scene_surfaces():
    plain = make_scene(4, 0, "small")
    photo = make_scene(4, 0, "small", photo_share=0.5)
    first = TEXTURE_NAMES.index(PHOTO_TEXTURE_NAMES[0])
    assert not np.any(plain.mat_tex >= first)
    used = photo.mat_tex[np.concatenate([photo.room_mat.ravel(), photo.box_mat])]
    assert np.any(used >= first)                      # walls, floors or furniture
    season = make_scene(4, 1, "small", photo_share=0.5)
    assert np.array_equal(season.box_lo[season.floor_boxes], photo.box_lo[photo.floor_boxes])
    again = make_scene(4, 0, "small", photo_share=0.5)
    assert np.array_equal(again.mat_tex, photo.mat_tex)
    with pytest.raises(ValueError, match="photo_share"):
        Materials(1.5)


def _render_small(scene, exposure=None):
    trav = make_traversals(make_scene(6, 0, "small"), 1, 2)[0]
    rig = make_rig(6, "ring4", 40)
    return Renderer(scene).render(trav.world_T_body[0] @ rig.T_body_cams(), rig.intrinsics(),
                                  40, 40, exposure=exposure)[0]


def test_random_lighting_changes_light_only():
    lamps = make_scene(6, 0, "small")
    lit = make_scene(6, 0, "small", random_light=True)
    assert not lamps.sun_rgb.any() and lit.sun_rgb.any()
    assert np.isclose(np.linalg.norm(lit.sun_dir), 1.0) and lit.sun_dir[2] > 0.15
    assert np.array_equal(lit.mat_tex, lamps.mat_tex) and np.array_equal(lit.box_lo,
                                                                         lamps.box_lo)
    a, b = _render_small(lamps), _render_small(lit)
    assert np.abs(a.astype(int) - b).mean() > 3.0
    assert np.array_equal(b, _render_small(make_scene(6, 0, "small", random_light=True)))
    other = make_scene(6, 1, "small", random_light=True)
    assert not np.allclose(other.sun_dir, lit.sun_dir)   # per season
    street = make_scene(2, 0, "street")
    assert street.sun_rgb.any() and street.sky_rgb.any()  # outdoors: sun and sky always


def test_exposure_jitter_changes_statistics_within_bounds():
    sched = exposure_schedule(6, 0, 50, 4)
    assert sched.shape == (50, 4, 2)
    assert np.all((sched[..., 0] >= GAIN_RANGE[0]) & (sched[..., 0] <= GAIN_RANGE[1]))
    assert np.all((sched[..., 1] >= GAMMA_RANGE[0]) & (sched[..., 1] <= GAMMA_RANGE[1]))
    assert np.ptp(sched[0, :, 0]) > 0.05              # cameras differ ...
    assert np.ptp(sched[:, 0, 0]) > 0.01              # ... and drift over time
    assert np.array_equal(sched, exposure_schedule(6, 0, 50, 4))
    x = np.linspace(0.0, 1.0, 11, dtype=np.float32)
    assert np.all(apply_exposure(x, 1.5, 1.0) >= x) and np.all(apply_exposure(x, 0.6, 1.0) <= x)
    assert np.array_equal(apply_exposure(x, 1.0, 1.0), x)
    scene = make_scene(6, 0, "small")
    base = _render_small(scene).astype(float)
    exp = np.array([[0.5, 1.0], [2.0, 1.0], [1.0, 1.25], [1.0, 0.8]])
    out = _render_small(scene, exposure=exp).astype(float)
    ratio = out.mean((1, 2, 3)) / base.mean((1, 2, 3))
    assert 0.45 <= ratio[0] <= 0.56                   # half the gain, half as bright
    assert 1.3 <= ratio[1] <= 2.05                    # double (minus what clips)
    assert ratio[2] < 1.0 < ratio[3]                  # gamma > 1 darkens mid-tones


def test_generate_with_every_option_and_resume_old_meta(tmp_path):
    cfg = SimConfig(scene_preset="street", rig_preset="car3", traversals=1, frames=3,
                    image_size=40, motion="car", textures="photo", lighting="random",
                    exposure="jitter")
    res = generate_trajectory(tmp_path, 1, 0, cfg)
    reader = TrajectoryReader(res["path"])
    assert reader.rig.names == ["front", "front_left", "front_right"]
    cam = reader.rig["front"]
    img = reader.image("front", 2)
    assert img.shape == (cam.height, cam.width, 3) and cam.width > cam.height
    meta = json.loads((tmp_path / "scene_00001/traj_00/meta.json").read_text())
    assert meta["sim_config"]["motion"] == "car" and meta["motion"]["step_m"] == [0.0, 3.0]
    # A trajectory written before the options existed resumes (its defaults are implied).
    old = SimConfig(scene_preset="small", rig_preset="ring4", traversals=1, frames=2,
                    image_size=24)
    path = generate_trajectory(tmp_path / "old", 3, 0, old)["path"]
    meta_file = tmp_path / "old/scene_00003/traj_00/meta.json"
    meta = json.loads(meta_file.read_text())
    for key in ("motion", "textures", "lighting", "exposure"):
        del meta["sim_config"][key]
    meta_file.write_text(json.dumps(meta))
    assert generate_trajectory(tmp_path / "old", 3, 0, old)["skipped"]
    with pytest.raises(ValueError, match="complete but generated"):
        generate_trajectory(tmp_path / "old", 3, 0, SimConfig(
            scene_preset="small", rig_preset="ring4", traversals=1, frames=2, image_size=24,
            lighting="random"))
    assert path
    with pytest.raises(ValueError, match="textures"):
        SimConfig(textures="paintings")
    args = cli.build_parser().parse_args(["--motion", "car", "--textures", "photo",
                                          "--lighting", "random", "--exposure", "jitter"])
    assert (args.motion, args.textures, args.lighting, args.exposure) == (
        "car", "photo", "random", "jitter")


def test_car_rigs_stay_inside_the_scene_and_a_wide_rig_is_refused_before_rendering(tmp_path):
    """The car preset's clearance keeps every camera of the widest car rig inside the street
    (a car turning in place at a dead end used to put its rear cameras through the wall, and
    the render failed frames into it); a motion too narrow for its rig is refused up front,
    naming both figures."""
    import dataclasses

    cfg = MOTION_PRESETS["car"]
    scene = make_scene(270, 0, "street")
    rig = make_rig(270, "car6", 32)
    for t in make_traversals(scene, 3, 100, cfg):
        centres = (t.world_T_body[:, None] @ rig.T_body_cams()[None])[..., :3, 3]
        assert np.all(scene.room_of(centres.reshape(-1, 3)) >= 0)
    narrow = dataclasses.replace(cfg, radius_m=1.0)
    sim = SimConfig(scene_preset="street", rig_preset="car6", traversals=3, frames=100,
                    image_size=32, with_depth=False)
    with pytest.raises(ValueError, match=r"cameras outside the scene .* reach 2\.\d\d m .* "
                                         r"radius_m is 1\.0 m"):
        generate_trajectory(str(tmp_path), seed=270, traversal=1, cfg=sim, motion=narrow)
    assert not any(tmp_path.rglob("*.png"))
