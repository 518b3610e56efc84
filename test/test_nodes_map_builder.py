"""map_builder as a real process fed by the dataset player over real DDS: ``~/save_map`` after
a failed save, a directory as save path, leftovers of killed saves, the saved file's mode.
The node must answer every call and stay up."""

import os
import pathlib
import socket
import subprocess
import sys

import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402

from g2g_msgs.srv import SaveMap  # noqa: E402
from g2g_model.maps.format import load_map  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def _keyframes(diags) -> int:
    for arr in reversed(diags):
        for status in arr.status:
            if status.name.startswith("map_builder"):
                return int({kv.key: kv.value for kv in status.values}["keyframes"])
    return 0


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_map_builder_save_failures_then_success(tmp_path):
    traj = tiny_trajectories(tmp_path / "sim", seed=20004, frames=12)[0]
    listener = Listener()
    diags = listener.collect(DiagnosticArray, "/diagnostics")
    params = {"use_sim_time": True, "map_frame": "odom", "cameras": ["cam0"],
              "min_translation_m": 0.01, "min_rotation_deg": 1.0,
              "sensor_qos_reliability": "reliable"}
    umask = os.umask(0o022)  # the node inherits it
    try:
        node = Proc(node_cmd("g2g_ros.nodes.map_builder", params), tmp_path / "node.log")
    finally:
        os.umask(umask)
    player = None
    try:
        assert listener.spin_until(lambda: diags, 90), node.output()
        player = Proc(player_cmd(traj, "--clock", "--rate", "4", "--cameras", "cam0"),
                      tmp_path / "player.log")
        assert listener.spin_until(lambda: _keyframes(diags) >= 3, 90), node.output()[-3000:]

        def save(path):
            return listener.call(SaveMap, "/map_builder/save_map", SaveMap.Request(path=str(path)),
                                 timeout=60)

        # A failed save (its folder cannot be created: a file is in the way), then a good one:
        # two severities logged for one service; the node used to die on the second call.
        (tmp_path / "blocker").write_text("a file, not a folder")
        reply = save(tmp_path / "blocker" / "map.g2gmap")
        assert not reply.success and "map not saved" in reply.message, reply.message
        maps = tmp_path / "maps"
        maps.mkdir()
        host = socket.gethostname().replace(".", "-")
        leftover = maps / f"office.g2gmap.{host}.{_dead_pid()}.0a1b2c3d.tmp"
        leftover.write_bytes(b"partial map of a killed save")
        reply = save(maps / "office")
        assert reply.success and reply.num_keyframes >= 3, reply.message
        assert node.alive(), node.output()[-3000:]
        saved = maps / "office.g2gmap"
        assert str(saved) in reply.message
        assert sorted(p.name for p in maps.iterdir()) == ["office.g2gmap"], \
            "the leftover of a killed save is removed"
        assert saved.stat().st_mode & 0o777 == 0o644, oct(saved.stat().st_mode)
        assert len(load_map(saved)) == reply.num_keyframes

        # A directory as save path: refused, saying so; nothing written beside it.
        reply = save(maps)
        assert not reply.success and "is an existing directory" in reply.message, reply.message
        assert not (tmp_path / "maps.g2gmap").exists()
        reply = save(maps / "office2.g2gmap")
        assert reply.success, reply.message
        assert node.alive(), node.output()[-3000:]
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]
    assert "cannot be changed between calls" not in log
