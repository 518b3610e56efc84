"""Bad input and dropped groups are accounted for, on a real rig_odometry
process over real DDS: a flood of groups with a camera whose encoding is wrong; every
synchronized group ends counted exactly once (processed, skipped by keyframe_stride, or
dropped with a reason), every received image is dropped, queued or in a group, and the bad
camera is logged through the node's logger, rate-limited."""

import pathlib

import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402

from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def _values(diags):
    for arr in reversed(diags):
        for status in arr.status:
            if status.name.startswith("rig_odometry") and any(
                    kv.key == "sync groups_emitted" for kv in status.values):
                return {kv.key: kv.value for kv in status.values}
    return None


def test_every_group_and_image_is_counted_once(tmp_path):
    traj = tiny_trajectories(tmp_path / "sim", seed=20008, frames=24)[0]
    listener = Listener()
    diags = listener.collect(DiagnosticArray, "/diagnostics")
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", {
        "use_sim_time": True, "sensor_qos_reliability": "reliable", "min_cameras": 4,
        "keyframe_stride": 2, "status_period_s": 0.5}, str(ROOT / "config" / "sim.yaml")),
        tmp_path / "node.log")
    player = None
    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam4/image_raw") > 0, 90), node.output()
        # 20 Hz: faster than the model on two cores, so the worker queue drops groups.
        player = Proc(player_cmd(traj, "--clock", "--rate", "20", "--exit-when-done",
                                 "--corrupt-encoding", "cam4"), tmp_path / "player.log")
        player.proc.wait(timeout=120)
        listener.spin_until(lambda: False, 6.0)  # the node works off its queue
        v = _values(diags)
        assert v is not None, node.output()[-3000:]
        emitted = int(v["sync groups_emitted"])
        processed, skipped = int(v["groups_processed"]), int(v["groups_skipped_stride"])
        node_drops = sum(int(val) for key, val in v.items()
                         if key.startswith("groups_dropped ") and key != "groups_dropped "
                         "sync_incomplete")
        assert emitted > 0 and processed > 0 and skipped > 0, v
        assert emitted == processed + skipped + node_drops, v
        assert int(v["groups_dropped"]) == node_drops + int(v["sync groups_dropped"]), v
        # A degraded group (min_cameras 4) lacks a camera: each camera counts its own images
        # in groups, a degraded group holds four of the five.
        in_groups = {cam: int(v[f"{cam} in_groups"])
                     for cam in ("cam0", "cam1", "cam2", "cam3", "cam4")}
        for cam, grouped in in_groups.items():
            assert int(v[f"{cam} received"]) == (int(v[f"{cam} dropped"]) + grouped
                                                 + int(v[f"{cam} queued"])), (cam, v)
            assert grouped <= emitted, (cam, v)
        degraded = int(v["sync groups_degraded"])
        assert sum(in_groups.values()) == 5 * (emitted - degraded) + 4 * degraded, v
        # The replay is over: the cameras are quiet, the diagnostics say STALE and how long.
        assert float(v["newest_image_age_s"]) > 3.0, v
        assert diags[-1].status[0].level == DiagnosticStatus.STALE, diags[-1].status[0]
    finally:
        if player is not None:
            player.stop()
        log = node.stop()
        listener.close()
    lines = [ln for ln in log.splitlines() if "camera cam4: image rejected" in ln]
    assert lines and all("[WARN]" in ln and "[rig_odometry]" in ln for ln in lines), log[-3000:]
    assert len(lines) <= 4, "rate-limited: at most one line per camera every 5 s"
