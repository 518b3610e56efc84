"""Time going backwards and stamps from the future, on a real rig_odometry
process over real DDS fed by the dataset player: a bag played a second time (stamps and /clock
jump back) and a few frames stamped a day ahead must not leave the node rejecting every later
image; ``~/reset`` clears the time-keyed buffers too."""

import pathlib

import pytest

rclpy = pytest.importorskip("rclpy")
from nav_msgs.msg import Odometry  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_ros.conversions import header_ns  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIM = str(ROOT / "config" / "sim.yaml")
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sim_traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20005, frames=10)[0]


def _settle(listener, box, quiet_s=2.0, timeout=60.0):
    """Spin until nothing new arrived in ``box`` for ``quiet_s`` (the node caught up)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = len(box)
        listener.spin_until(lambda: False, quiet_s)
        if len(box) == n:
            return


def _play(sim_traj, log, *args):
    return Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--exit-when-done", *args), log)


def test_replayed_bag_and_future_stamps_do_not_stall_rig_odometry(sim_traj, tmp_path):
    stamps = [int(t) for t in TrajectoryReader(sim_traj).timestamps_ns]
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", {
        "use_sim_time": True, "sensor_qos_reliability": "reliable"}, SIM), tmp_path / "node.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam4/image_raw") > 0, 90), node.output()
        # The first three frames are stamped a day ahead of /clock: dropped, counted, logged;
        # the later frames still make odometry.
        player = _play(sim_traj, tmp_path / "p1.log", "--count", "8", "--future-frames", "3")
        assert listener.spin_until(lambda: len(odoms) >= 3, 120), node.output()[-3000:]
        assert {header_ns(m.header) for m in odoms} <= set(stamps[3:8])
        player.proc.wait(timeout=60)
        _settle(listener, odoms)
        # The same bag again: stamps and /clock jump back.
        n = len(odoms)
        player = _play(sim_traj, tmp_path / "p2.log", "--count", "6")
        assert listener.spin_until(lambda: len(odoms) >= n + 3, 120), node.output()[-3000:]
        assert {header_ns(m.header) for m in odoms[n:]} <= set(stamps[:6])
        assert node.alive()
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]
    assert "ahead of the ROS time dropped" in log  # bad input is logged by the node
    assert "ROS time jumped back" in log


def test_reset_clears_the_stamp_checks(sim_traj, tmp_path):
    # Wall-clock node, replayed stamps (the ROS time does not jump): the second replay is "out
    # of order" until ~/reset, which used to reset the pose only.
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", {"sensor_qos_reliability": "reliable"},
                         SIM), tmp_path / "node.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam4/image_raw") > 0, 90), node.output()
        player = _play(sim_traj, tmp_path / "p1.log", "--count", "4")
        assert listener.spin_until(lambda: len(odoms) >= 3, 120), node.output()[-3000:]
        player.proc.wait(timeout=60)
        _settle(listener, odoms)
        n = len(odoms)
        player = _play(sim_traj, tmp_path / "p2.log", "--count", "3")
        player.proc.wait(timeout=60)
        listener.spin_until(lambda: False, 2.0)
        assert len(odoms) == n, "replayed (older) stamps are rejected as out of order"
        reply = listener.call(Trigger, "/rig_odometry/reset", Trigger.Request())
        assert reply.success and "stamp checks cleared" in reply.message, reply.message
        player = _play(sim_traj, tmp_path / "p3.log", "--count", "4")
        assert listener.spin_until(lambda: len(odoms) >= n + 3, 120), node.output()[-3000:]
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]
    # The synchronizer's rejections go through the node's logger (time, severity, node name).
    assert "[WARN]" in log and "[rig_odometry]: g2g_ros.rig_sync: camera cam0: out_of_order" \
        in log, log[-3000:]


def _map_builder_values(diags) -> dict:
    for arr in reversed(diags):
        for status in arr.status:
            if status.name.startswith("map_builder"):
                return {kv.key: kv.value for kv in status.values}
    return {}


def test_map_builder_keeps_recording_after_future_stamps_and_a_replay(sim_traj, tmp_path):
    # map_builder looks poses up in /tf: a day-ahead /tf sample made every later one "old
    # data", and a replay (ROS time jumping back) did the same; both stopped the recording.
    from diagnostic_msgs.msg import DiagnosticArray

    from test_nodes_map_builder import _keyframes

    listener = Listener()
    diags = listener.collect(DiagnosticArray, "/diagnostics")
    node = Proc(node_cmd("g2g_ros.nodes.map_builder", {
        "use_sim_time": True, "map_frame": "odom", "cameras": ["cam0"],
        "min_translation_m": 0.0, "min_rotation_deg": 0.0,
        "sensor_qos_reliability": "reliable"}), tmp_path / "node.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam0/image_raw") > 0, 90), node.output()
        player = _play(sim_traj, tmp_path / "p1.log", "--count", "8", "--future-frames", "3",
                       "--cameras", "cam0")
        player.proc.wait(timeout=60)
        assert listener.spin_until(lambda: _keyframes(diags) >= 4, 30), node.output()[-3000:]
        # The day-ahead /tf samples are in its diagnostics: refused as "future", or stored
        # before the first /clock and then forgotten.
        tf = _map_builder_values(diags)
        assert "future" in tf["tf_rejected"] or int(tf["tf_forgotten"]) > 0, tf
        n = _keyframes(diags)
        player = _play(sim_traj, tmp_path / "p2.log", "--count", "6", "--cameras", "cam0")
        player.proc.wait(timeout=60)
        assert listener.spin_until(lambda: _keyframes(diags) >= n + 4, 30), \
            node.output()[-3000:]
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]


def test_relocalize_takes_a_replayed_bag_and_reset_clears_its_stamps(sim_traj, tmp_path):
    """A bag played again (/clock jumps back): relocalize forgets its query window, stamp
    checks and dynamic TF, and buffers the replayed images instead of rejecting every one as
    out of order; without a time jump, ~/reset does the same."""
    from std_msgs.msg import Header

    listener = Listener()
    processed = listener.collect(Header, "relocalize/processed", qos=100)
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", {
        "use_sim_time": True, "sensor_qos_reliability": "reliable", "localize_period_s": 0.0,
        "min_translation_m": 0.0, "min_rotation_deg": 0.0, "verify": False}, SIM),
        tmp_path / "node.log")
    player = None

    def outcomes(first):
        return [m.frame_id for m in processed[first:]]

    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam0/image_raw") > 0, 90), node.output()
        for k in range(2):  # the second play jumps /clock back
            n = len(processed)
            player = _play(sim_traj, tmp_path / f"p{k}.log", "--count", "5")
            player.proc.wait(timeout=60)
            _settle(listener, processed)
            got = outcomes(n)
            assert len(got) >= 4, (got, node.output()[-3000:])
            assert all(o == "buffered" for o in got), (k, got, node.output()[-3000:])
        assert "ROS time jumped back" in node.output()
        reply = listener.call(Trigger, "/relocalize/reset", Trigger.Request())
        assert reply.success and "time-keyed buffers cleared" in reply.message, reply.message
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]
