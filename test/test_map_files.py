"""Map files in a shared map store: a map truncated by someone else
while it is loaded gives a clear MapError (never SIGBUS), a save path that is a directory is
refused, leftovers of killed saves are removed, saved maps get the usual file mode.

Hostile files: a FIFO, a device, a socket are refused before they are read; a file whose size
does not match what its header describes is refused before it is read whole; a header changed
after the map was written is refused by its checksum; a map written before header checksums
loads with a warning, and ``g2g-map reseal`` adds the checksum.
:func:`rewrite_map_header` (a copy of a map with an edited header) serves the other map tests.
"""

import json
import logging
import os
import socket
import subprocess
import sys
import time
from typing import Callable, Optional

import pathlib

import numpy as np
import pytest
import torch

from g2g_model.geometry import make_pose
from g2g_model.maps.cli import main as map_cli
from g2g_model.maps.seal import HEADER_DIGEST_KEY, seal
from g2g_model.maps.format import (
    G2GMap, MapError, MapFrame, encode_image, load_map, max_map_bytes, read_map_header, save_map,
)

RACE = r"""
import os, shutil, sys, threading, time
from g2g_model.maps.format import MapError, load_map
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


def rewrite_map_header(src, dst, edit: Callable[[dict], object],
                       reseal: Optional[bool] = False):
    """Copy the map ``src`` to ``dst`` with its ``g2g_map`` header edited in place by
    ``edit(header)`` (its return value is ignored), tensors untouched. ``reseal``: True, the
    header gets a valid checksum again; False, it keeps the one it had (now stale); None, it
    carries none (as a map written before header checksums)."""
    data = pathlib.Path(src).read_bytes()
    n = int.from_bytes(data[:8], "little")
    container = json.loads(data[8:8 + n])
    header = json.loads(container["__metadata__"]["g2g_map"])
    digest = header.pop(HEADER_DIGEST_KEY, None)
    edit(header)
    if reseal:
        header = seal(header)
    elif reseal is False:
        header[HEADER_DIGEST_KEY] = digest
    container["__metadata__"]["g2g_map"] = json.dumps(header)
    text = json.dumps(container).encode()
    text += b" " * (-len(text) % 8)
    pathlib.Path(dst).write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])
    return pathlib.Path(dst)


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


@pytest.mark.timeout(30)
def test_fifo_and_socket_are_refused_unread(tmp_path):
    # A FIFO blocked open() (and ~/load_map) for good: no writer ever comes.
    fifo = tmp_path / "fifo.g2gmap"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock.g2gmap"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        for path, kind in ((fifo, "a FIFO"), (sock_path, "a socket")):
            for read in (load_map, read_map_header):
                with pytest.raises(MapError, match=f"is {kind}.*, not a regular file"):
                    read(path)
    finally:
        sock.close()


DEV_ZERO = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from g2g_model.maps.format import MapError, load_map, read_map_header
for path in ("/dev/zero", "/dev/urandom"):
    for read in (load_map, read_map_header):
        try:
            read(path)
        except MapError as exc:
            print(exc)
"""


def test_devices_are_refused_unread():
    # /dev/zero was read until memory ran out. Under a 3 GiB address-space limit, so that a
    # regression fails with MemoryError instead of exhausting the machine.
    proc = subprocess.run([sys.executable, "-c", DEV_ZERO], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 4 and all("is a character device, not a regular file" in line
                                   for line in lines), proc.stdout


def test_size_is_checked_against_the_header_before_the_file_is_read(tmp_path):
    path = save_map(_map(), tmp_path / "m.g2gmap")
    size = path.stat().st_size
    # Junk after the tensors (here 256 MiB of holes): refused from the header alone.
    grown = tmp_path / "grown.g2gmap"
    grown.write_bytes(path.read_bytes())
    os.truncate(grown, size + 2**28)
    for read in (load_map, read_map_header):
        with pytest.raises(MapError, match=r"describes \d+ bytes of tensor data, the file holds "
                                           r"\d+"):
            read(grown)
    # A header that claims more tensor data than the file holds.
    liar = tmp_path / "liar.g2gmap"
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    container = json.loads(data[8:8 + n])
    container["features"]["data_offsets"][1] += 10**12
    text = json.dumps(container).encode()
    liar.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])
    with pytest.raises(MapError, match=r"describes \d{13} bytes"):
        load_map(liar)
    # Larger than the cap (a sparse file: nothing is written or read).
    huge = tmp_path / "huge.g2gmap"
    huge.write_bytes(data)
    os.truncate(huge, max_map_bytes() + 1)
    with pytest.raises(MapError, match="bytes allowed"):
        load_map(huge)


def test_changed_header_is_refused_and_old_maps_load_with_a_warning(tmp_path, caplog):
    path = save_map(_map(), tmp_path / "m.g2gmap")
    assert load_map(path).sealed

    def move(header):  # one keyframe 6 m away, a still valid pose: only the checksum tells
        header["frames"][1]["world_T_cam"][0][3] += 6.0

    tampered = rewrite_map_header(path, tmp_path / "tampered.g2gmap", move)
    for read in (load_map, read_map_header):
        with pytest.raises(MapError, match="header checksum mismatch"):
            read(tampered)
    assert map_cli(["reseal", str(tampered)]) == 2  # a changed header is never re-sealed

    old = rewrite_map_header(path, tmp_path / "old.g2gmap", lambda h: None, reseal=None)
    with caplog.at_level(logging.WARNING, logger="g2g_model.maps.format"):
        gmap = load_map(old)
    assert not gmap.sealed and len(gmap) == 4
    assert f"g2g-map reseal {old}" in caplog.text
    before = old.read_bytes()
    assert map_cli(["reseal", str(old)]) == 0
    assert old.read_bytes() != before
    resealed = load_map(old)
    assert resealed.sealed and resealed.map_id == gmap.map_id
    np.testing.assert_array_equal(resealed.frames[2].world_T_cam, gmap.frames[2].world_T_cam)
    assert map_cli(["reseal", str(old)]) == 0  # already sealed: left as it is
