"""rig_odometry as a real process fed by the dataset player over real DDS.

The model is the embedded default when it exists, else random weights (the node then says so in
its diagnostics); accuracy against ground truth is checked in test_nodes_accuracy.py only for a
trained default. Here: wiring, stamps, frames, status/diagnostics, bad input while running
(a camera with a wrong encoding, a camera that stops, bad service calls) and recovery.
"""

import pathlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from g2g_msgs.msg import EstimatorStatus  # noqa: E402
from g2g_msgs.srv import SetPose  # noqa: E402
from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_ros.conversions import header_ns  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def sim_traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20001, frames=30)[0]


def _status_text(statuses):
    return " | ".join(s.message for s in statuses[-3:])


def test_rig_odometry_end_to_end_with_faults(sim_traj, tmp_path):
    reader = TrajectoryReader(sim_traj)
    stamps = set(int(t) for t in reader.timestamps_ns)
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    statuses = listener.collect(EstimatorStatus, "rig_odometry/status")
    diags = listener.collect(DiagnosticArray, "/diagnostics")
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry",
                         {"use_sim_time": True, "min_cameras": 4, "sensor_qos_reliability":
                          "reliable", "lost_after_s": 4.0},
                         str(ROOT / "config" / "sim.yaml")), tmp_path / "node.log")
    player = None
    try:
        # The node is ready once it publishes its status (subscriptions exist by then).
        assert listener.spin_until(lambda: len(statuses) > 0, timeout=90), node.output()
        # Phase 1: all five cameras, simulated time.
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--count", "10"),
                      tmp_path / "player1.log")
        ok = listener.spin_until(lambda: len(odoms) >= 4, timeout=120)
        assert ok, f"no odometry.\nnode:\n{node.output()[-3000:]}\nplayer:\n{player.output()}"
        for msg in odoms:
            assert header_ns(msg.header) in stamps, \
                "odometry must carry the stamp of its image group"
            assert (msg.header.frame_id, msg.child_frame_id) == ("odom", "base_link")
            p = msg.pose.pose.position
            assert np.all(np.isfinite([p.x, p.y, p.z]))
        first = odoms[0].pose.pose
        assert (first.position.x, first.position.y, first.orientation.w) == (0.0, 0.0, 1.0)
        assert listener.spin_until(lambda: any(s.groups_processed >= 3 for s in statuses), 10)
        s = statuses[-1]
        assert sorted(s.cameras_used) == ["cam0", "cam1", "cam2", "cam3", "cam4"]
        assert "g2g" in s.stage_names
        assert listener.spin_until(lambda: any(
            d.status and d.status[0].name.startswith("rig_odometry") for d in diags), 10)
        keys = {kv.key for kv in diags[-1].status[0].values}
        assert {"cam0 rate_hz", "sync groups_emitted", "latency g2g_ms",
                "untrained_model"} <= keys

        # Every verified or refined step is counted by the geometry that made it. The player
        # runs at 4x: the node defers the verification of steps while a newer group waits
        # (at most verify_max_deferred in a row), so the first geometric step may come late.
        def counts():
            if not (diags and diags[-1].status
                    and diags[-1].status[0].name.startswith("rig_odometry")):
                return 0, 0, {}
            values = {kv.key: kv.value for kv in diags[-1].status[0].values}
            return (sum(int(values.get(f"steps {p}", 0)) for p in ("verified", "refined")),
                    sum(int(v) for k, v in values.items() if k.startswith("geometry ")), values)

        assert listener.spin_until(lambda: counts()[0] >= 1, 30), counts()[2]
        geometric, by_geometry, values = counts()
        assert geometric == by_geometry, values
        player.stop()

        # Phase 2: cam2 sends a wrong encoding -> degraded groups of 4 cameras, reported.
        n_before = len(odoms)
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--start", "10",
                                 "--count", "10", "--corrupt-encoding", "cam2"),
                      tmp_path / "player2.log")
        ok = listener.spin_until(lambda: len(odoms) >= n_before + 2 and any(
            "yuv422_yuy2" in s.message for s in statuses), timeout=120)
        assert ok, f"{_status_text(statuses)}\nnode:\n{node.output()[-3000:]}"
        bad = [s for s in statuses if "yuv422_yuy2" in s.message][-1]
        assert bad.state == EstimatorStatus.STATE_DEGRADED
        assert "camera cam2" in bad.message
        player.stop()

        # Phase 3: bad service calls are answered, state kept.
        bad_pose = SetPose.Request()
        bad_pose.pose.pose.orientation.w = float("nan")
        reply = listener.call(SetPose, "/rig_odometry/reset_to_pose", bad_pose)
        assert not reply.success and "finite" in reply.message
        reply = listener.call(Trigger, "/rig_odometry/reset", Trigger.Request())
        assert reply.success

        # Phase 4: the input recovers (all cameras, later stamps) -> odometry flows again.
        n_before = len(odoms)
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--start", "20",
                                 "--count", "10"), tmp_path / "player3.log")
        assert listener.spin_until(lambda: len(odoms) >= n_before + 3, timeout=120)
        assert node.alive(), node.output()[-3000:]
        assert listener.spin_until(lambda: statuses[-1].state == EstimatorStatus.STATE_OK
                                   or "cam" not in statuses[-1].message, timeout=20)
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]


def test_group_before_calibration_is_held_not_lost(sim_traj, tmp_path):
    """Images and camera_info come first, /tf_static only seconds later (a late static
    publisher, or a loaded machine): the node says what it waits for, and once the extrinsics
    arrive it processes that first group instead of dropping it."""
    from sensor_msgs.msg import CameraInfo, Image

    from g2g_ros.calibration import camera_info_msg
    from g2g_ros.conversions import matrix_to_transform_stamped
    from g2g_ros.image_conversion import image_msg
    from g2g_ros.tf_broadcaster import TransformBroadcaster

    reader = TrajectoryReader(sim_traj)
    stamp = int(reader.timestamps_ns[0])
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    statuses = listener.collect(EstimatorStatus, "rig_odometry/status")
    qos = rclpy.qos.QoSProfile(depth=10, reliability=rclpy.qos.ReliabilityPolicy.RELIABLE)
    info_pubs = {c: listener.node.create_publisher(CameraInfo, f"{c}/camera_info", qos)
                 for c in reader.cameras}
    image_pubs = {c: listener.node.create_publisher(Image, f"{c}/image_raw", qos)
                  for c in reader.cameras}
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry",
                         {"sensor_qos_reliability": "reliable", "status_period_s": 0.5},
                         str(ROOT / "config" / "sim.yaml")), tmp_path / "node.log")
    try:
        assert listener.spin_until(lambda: all(
            p.get_subscription_count() > 0 for p in image_pubs.values()), timeout=90), \
            node.output()
        for cam in reader.cameras:
            spec, frame = reader.rig[cam], f"{cam}_optical_frame"
            info_pubs[cam].publish(camera_info_msg(spec.K, spec.width, spec.height, frame, stamp))
            image_pubs[cam].publish(image_msg(reader.image(cam, 0), frame, stamp))
        assert listener.spin_until(lambda: any("calibration" in s.message and "tf_static" in
                                               s.message for s in statuses), timeout=30), \
            f"{_status_text(statuses)}\n{node.output()[-3000:]}"
        # Well past the node's own short wait for the calibration (CalibrationWait.WAIT_S).
        listener.spin_until(lambda: False, timeout=3.0)
        assert not odoms, "no odometry can be computed without the extrinsics"
        TransformBroadcaster(listener.node, static=True).send([
            matrix_to_transform_stamped(reader.rig[c].T_body_cam, "base_link",
                                        f"{c}_optical_frame", stamp) for c in reader.cameras])
        assert listener.spin_until(lambda: odoms, timeout=30), node.output()[-3000:]
        assert header_ns(odoms[0].header) == stamp
        assert listener.spin_until(lambda: statuses[-1].groups_processed == 1
                                   and statuses[-1].groups_dropped == 0, timeout=10), \
            _status_text(statuses)
    finally:
        log = stop_all(listener, node)
    assert "Traceback" not in log, log[-3000:]
