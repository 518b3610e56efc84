"""Map artefacts: round trip, atomic writes, and clear errors for corrupt/incompatible maps."""

import json
import os

import numpy as np
import pytest
import torch

from g2g_model.geometry import make_pose
from g2g_model.maps.windows import map_windows, nearest_window
from g2g_model.maps.format import (
    G2GMap, MapError, MapFrame, encode_image, load_map, read_map_header, save_map,
)


def _map(n=6, with_features=True):
    rng = np.random.default_rng(0)
    frames = []
    for i in range(n):
        img = rng.integers(0, 255, (32, 40, 3), dtype=np.uint8)
        frames.append(MapFrame(
            camera="cam0" if i % 2 == 0 else "cam1", stamp_ns=1_000_000 * i,
            world_T_cam=make_pose(np.eye(3), [float(i), 0.0, 0.0]),
            intrinsics=np.array([[50.0, 0, 20], [0, 50, 16], [0, 0, 1]]),
            image=encode_image(img), size_hw=(32, 40),
        ))
    feats = torch.randn(n, 4, 8) if with_features else None
    return G2GMap(frames=frames, rig={"cameras": ["cam0", "cam1"]},
                  backbone={"name": "compact", "config_hash": "abc"}, features=feats,
                  source="unit test")


def test_round_trip(tmp_path):
    gmap = _map()
    path = save_map(gmap, tmp_path / "office")
    assert path.name == "office.g2gmap"
    back = load_map(path, expect_backbone={"name": "compact", "config_hash": "abc"})
    assert len(back) == 6 and back.cameras() == ["cam0", "cam1"]
    for a, b in zip(gmap.frames, back.frames):
        np.testing.assert_array_equal(a.decode(), b.decode())  # PNG is lossless
        np.testing.assert_allclose(a.world_T_cam, b.world_T_cam)
    torch.testing.assert_close(back.features.float(), gmap.features.half().float())
    assert list(back.camera_indices("cam1")) == [1, 3, 5]
    wins = map_windows(back, "cam0", 2)
    assert [list(w) for w in wins] == [[0, 2], [2, 4]]
    assert nearest_window(back, wins, [3.9, 0, 0]) == 1
    assert nearest_window(back, wins, [100, 0, 0], radius=5.0) is None


def test_missing_directory_and_foreign_files(tmp_path):
    with pytest.raises(MapError, match="does not exist"):
        load_map(tmp_path / "nope.g2gmap")
    with pytest.raises(MapError, match="is a directory"):
        load_map(tmp_path)
    junk = tmp_path / "junk.g2gmap"
    junk.write_bytes(b"this is not a map")
    with pytest.raises(MapError, match="corrupt or truncated"):
        load_map(junk)


def test_truncated_and_bit_flipped(tmp_path):
    path = save_map(_map(), tmp_path / "m.g2gmap")
    data = path.read_bytes()
    (tmp_path / "trunc.g2gmap").write_bytes(data[: len(data) - 100])
    with pytest.raises(MapError, match="corrupt or truncated"):
        load_map(tmp_path / "trunc.g2gmap")
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF  # inside the last tensor's payload
    (tmp_path / "flip.g2gmap").write_bytes(bytes(flipped))
    with pytest.raises(MapError, match="checksum mismatch"):
        load_map(tmp_path / "flip.g2gmap")


def test_incompatible_backbone_and_version(tmp_path):
    path = save_map(_map(), tmp_path / "m.g2gmap")
    with pytest.raises(MapError, match="backbone 'compact'.*config_hash differs"):
        load_map(path, expect_backbone={"name": "compact", "config_hash": "zzz"})
    # Rewrite the header with a future version.
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        header = json.loads(fh.metadata()["g2g_map"])
    header["version"] = 99
    save_file(load_file(str(path)), str(tmp_path / "v99.g2gmap"),
              metadata={"g2g_map": json.dumps(header)})
    with pytest.raises(MapError, match="version 99"):
        read_map_header(tmp_path / "v99.g2gmap")


def test_atomic_write_keeps_old_map_when_write_fails(tmp_path, monkeypatch):
    path = save_map(_map(4), tmp_path / "m.g2gmap")
    before = path.read_bytes()
    import safetensors.torch as st

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(st, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        save_map(_map(6), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.g2gmap"], "temporary file left behind"
    assert len(load_map(path)) == 4


def test_empty_map_is_refused(tmp_path):
    with pytest.raises(ValueError, match="empty map"):
        save_map(G2GMap(frames=[]), tmp_path / "e.g2gmap")
    assert not os.listdir(tmp_path)


def test_nearest_window_prefers_the_same_viewing_direction():
    # Two windows at the same place, one looking +x, one looking -x (optical axis = column 2).
    from g2g_model.geometry import axis_angle_to_matrix

    look_px = axis_angle_to_matrix([0, np.pi / 2, 0])   # z axis -> +x
    look_mx = axis_angle_to_matrix([0, -np.pi / 2, 0])  # z axis -> -x
    frames = [MapFrame("c", i, make_pose(look_px if i < 2 else look_mx, [0.1 * i, 0, 0]),
                       np.eye(3), b"", (1, 1)) for i in range(4)]
    gmap = G2GMap(frames=frames)
    windows = [np.array([0, 1]), np.array([2, 3])]
    assert nearest_window(gmap, windows, [0.05, 0, 0], direction=np.array([-1.0, 0, 0])) == 1
    assert nearest_window(gmap, windows, [0.25, 0, 0], direction=np.array([1.0, 0, 0])) == 0
