"""Map files in a shared map store (issue 22, items 3 and 13): a map truncated by someone else
while it is loaded gives a clear MapError (never SIGBUS), a save path that is a directory is
refused, leftovers of killed saves are removed, saved maps get the usual file mode."""

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from g2g_model.geometry import make_pose
from g2g_model.maps import G2GMap, MapError, MapFrame, encode_image, load_map, save_map

RACE = r"""
import os, shutil, sys, threading, time
from g2g_model.maps import MapError, load_map
src, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
refused = 0
for i in range(rounds):
    shutil.copyfile(src, work)
    def truncate(delay=0.002 * (i % 15)):
        time.sleep(delay)
        os.truncate(work, 4096)
    thread = threading.Thread(target=truncate)
    thread.start()
    try:
        load_map(work)
    except MapError as exc:
        assert "corrupt or truncated" in str(exc), exc
        refused += 1
    thread.join()
print("refused", refused, "of", rounds)
"""


def _map(n=4, feature_shape=(4, 8)):
    rng = np.random.default_rng(0)
    frames = [MapFrame(camera="cam0", stamp_ns=i, world_T_cam=make_pose(np.eye(3), [i, 0, 0]),
                       intrinsics=np.array([[50.0, 0, 20], [0, 50, 16], [0, 0, 1]]),
                       image=encode_image(rng.integers(0, 255, (32, 40, 3), dtype=np.uint8)),
                       size_hw=(32, 40)) for i in range(n)]
    return G2GMap(frames=frames, features=torch.randn(n, *feature_shape),
                  backbone={"name": "compact", "config_hash": "abc"})


@pytest.mark.timeout(240)
def test_map_truncated_while_loading_is_a_clear_error_not_sigbus(tmp_path):
    # A 64 MB map, truncated to 4 kB by another process 0-30 ms into each load. Reading through
    # a memory map died with SIGBUS (exit -7) within a few rounds.
    src = save_map(_map(n=8, feature_shape=(4000, 1000)), tmp_path / "big.g2gmap")
    assert src.stat().st_size > 60e6
    proc = subprocess.run([sys.executable, "-c", RACE, str(src), str(tmp_path / "work.g2gmap"),
                           "30"], capture_output=True, text=True, timeout=220)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "refused" in proc.stdout
    # Truncated before the load: the same clear error.
    os.truncate(tmp_path / "work.g2gmap", 10_000)
    with pytest.raises(MapError, match="corrupt or truncated"):
        load_map(tmp_path / "work.g2gmap")


def test_save_path_that_is_a_directory_is_refused(tmp_path):
    (tmp_path / "maps").mkdir()
    with pytest.raises(IsADirectoryError, match="is an existing directory"):
        save_map(_map(), tmp_path / "maps")
    (tmp_path / "office.g2gmap").mkdir()
    with pytest.raises(IsADirectoryError, match="is an existing directory"):
        save_map(_map(), tmp_path / "office")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["maps", "office.g2gmap"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_save_removes_leftovers_of_killed_saves_and_uses_the_usual_mode(tmp_path):
    host = socket.gethostname().replace(".", "-")
    dead = tmp_path / f"m.g2gmap.{host}.{_dead_pid()}.0a1b2c3d.tmp"
    live = tmp_path / f"m.g2gmap.{host}.{os.getpid()}.0a1b2c3d.tmp"
    old = tmp_path / "m.g2gmap.x8Yk2pQz.tmp"  # older naming (mkstemp): removed once a day old
    young = tmp_path / "m.g2gmap.a7Hk2pQz.tmp"
    other = tmp_path / "other.g2gmap.x8Yk2pQz.tmp"
    for p in (dead, live, old, young, other):
        p.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    os.utime(other, (time.time() - 2 * 86400,) * 2)
    umask = os.umask(0o022)
    try:
        path = save_map(_map(), tmp_path / "m.g2gmap")
    finally:
        os.umask(umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["m.g2gmap", live.name, young.name, other.name])
    assert path.stat().st_mode & 0o777 == 0o644
    assert len(load_map(path)) == 4
