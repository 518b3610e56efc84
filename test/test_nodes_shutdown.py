"""Ctrl-C ends the nodes quietly with exit status 0: real node processes
fed by the dataset player over real DDS, stopped with SIGINT twice in quick succession as under
``ros2 launch`` (the terminal's process group and launch both send it). The start-up log names
the model that was loaded."""

import pathlib
import signal
import time

import pytest

rclpy = pytest.importorskip("rclpy")
from nav_msgs.msg import Odometry  # noqa: E402

from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sim_traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20007, frames=10)[0]


def _interrupt_twice(node: Proc) -> int:
    node.proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    if node.proc.poll() is None:
        node.proc.send_signal(signal.SIGINT)
    return node.proc.wait(timeout=30)


@pytest.mark.parametrize("name", ["rig_odometry", "map_builder"])
def test_ctrl_c_under_load_exits_0_quietly(name, sim_traj, tmp_path):
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    params = {"use_sim_time": True, "sensor_qos_reliability": "reliable"}
    if name == "map_builder":
        params.update(map_frame="odom", min_translation_m=0.0, min_rotation_deg=0.0)
    node = Proc(node_cmd(f"g2g_ros.nodes.{name}", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "node.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam0/image_raw") > 0, 90), node.output()
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "10", "--loop"),
                      tmp_path / "player.log")
        if name == "rig_odometry":
            assert listener.spin_until(lambda: len(odoms) >= 3, 90), node.output()[-3000:]
        else:
            listener.spin_until(lambda: False, 5.0)
        code = _interrupt_twice(node)
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    assert code == 0, log[-3000:]
    assert "context is invalid" not in log and "Traceback" not in log, log[-3000:]
    assert "[ERROR]" not in log and "[WARN]" not in log, log[-3000:]
    model = "g2g_rig_mnv2" if name == "rig_odometry" else "g2g_reloc_mnv2"
    assert f"embedded default {model}.safetensors (backbone compact" in log, log[-3000:]
