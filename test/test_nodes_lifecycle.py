"""The nodes as managed (lifecycle) nodes, driven from outside like `ros2 lifecycle set` does.

Real node processes over real DDS, started with ``autostart:=false``; the test process calls the
standard ``~/get_state`` / ``~/change_state`` services and ``~/set_parameters``. Checks: nothing
is advertised, subscribed or published before activation; a configure with a bad parameter or a
missing map fails, says why in the status, leaves the node up and unconfigured, and succeeds after
the parameter is fixed; an active node publishes; a deactivated one stops publishing and keeps its
state (the odometry continues from the kept pose); cleanup and shutdown.
"""

import pathlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from lifecycle_msgs.msg import Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from g2g_msgs.msg import EstimatorStatus  # noqa: E402
from g2g_msgs.srv import LoadMap, Localize  # noqa: E402
from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.estimation.pipeline import G2GPipeline  # noqa: E402
from g2g_model.maps.building import build_map_from_trajectory  # noqa: E402
from g2g_model.maps.format import save_map  # noqa: E402
from g2g_ros.conversions import header_ns  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIM_PARAMS = str(ROOT / "config" / "sim.yaml")
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sim_traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20003, frames=30)[0]


def get_state(listener: Listener, node: str) -> str:
    return listener.call(GetState, f"{node}/get_state", GetState.Request()).current_state.label


def change_state(listener: Listener, node: str, transition: int) -> bool:
    request = ChangeState.Request()
    request.transition.id = transition
    return listener.call(ChangeState, f"{node}/change_state", request, timeout=60).success


def set_parameter(listener: Listener, node: str, name: str, value):
    request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
    return listener.call(SetParameters, f"{node}/set_parameters", request).results[0]


def _pose(msg) -> np.ndarray:
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    return np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w])


def test_rig_odometry_managed_from_outside(sim_traj, tmp_path):
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    statuses = listener.collect(EstimatorStatus, "rig_odometry/status")
    params = {"use_sim_time": True, "autostart": False, "min_cameras": 9,
              "sensor_qos_reliability": "reliable"}
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", params, SIM_PARAMS), tmp_path / "node.log")
    graph = listener.node
    player = None
    try:
        # Unconfigured: reports its health, advertises no output, subscribes no camera. (The
        # node is ready once its status arrives: discovery has matched by then.)
        assert listener.spin_until(lambda: statuses, 90), node.output()
        assert "unconfigured" in statuses[-1].message
        assert get_state(listener, "/rig_odometry") == "unconfigured"
        assert graph.count_publishers("/odometry") == 0
        assert graph.count_subscribers("/cam0/image_raw") == 0

        # A bad parameter: configure fails with the reason, the node stays up, unconfigured.
        assert not change_state(listener, "/rig_odometry", Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, "/rig_odometry") == "unconfigured"
        assert node.alive()
        assert listener.spin_until(
            lambda: "min_cameras must be in [0, 5], got 9" in statuses[-1].message, 10), \
            statuses[-1].message

        # Fixed while unconfigured, configure succeeds; now the parameter is locked.
        assert set_parameter(listener, "/rig_odometry", "min_cameras", 4).successful
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, "/rig_odometry") == "inactive"
        refused = set_parameter(listener, "/rig_odometry", "min_cameras", 3)
        assert not refused.successful and "read at configure" in refused.reason
        assert set_parameter(listener, "/rig_odometry", "keyframe_stride", 1).successful
        # Inactive: the (lifecycle) output publisher exists, the cameras are not subscribed.
        assert listener.spin_until(lambda: graph.count_publishers("/odometry") == 1, 10)
        assert graph.count_subscribers("/cam0/image_raw") == 0
        assert not odoms

        # Active: subscribes and publishes.
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_ACTIVATE)
        assert get_state(listener, "/rig_odometry") == "active"
        # --loop: the images keep coming (stamps keep increasing) until the player is stopped.
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--count", "20", "--loop"),
                      tmp_path / "player1.log")
        assert listener.spin_until(lambda: len(odoms) >= 3, 90), node.output()[-3000:]

        # Deactivated while images keep coming: no more output.
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_DEACTIVATE)
        assert get_state(listener, "/rig_odometry") == "inactive"
        listener.spin_until(lambda: False, 0.5)  # messages already on the wire
        n_stopped, last = len(odoms), odoms[-1]
        listener.spin_until(lambda: False, 2.0)
        assert player.alive()
        assert len(odoms) == n_stopped, "a deactivated node must not publish"
        assert graph.count_subscribers("/cam0/image_raw") == 0
        # The next status says so (one computed just before the transition may still arrive
        # first on a loaded machine).
        assert listener.spin_until(lambda: "inactive" in statuses[-1].message, 10), \
            statuses[-1].message
        player.stop()

        # Re-activated: the odometry continues from the kept pose (no reset to the identity).
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_ACTIVATE)
        player = Proc(player_cmd(sim_traj, "--clock", "--rate", "4", "--start", "20",
                                 "--count", "10"), tmp_path / "player2.log")
        assert listener.spin_until(lambda: len(odoms) >= n_stopped + 2, 90), node.output()[-3000:]
        resumed = odoms[n_stopped]
        second_run = set(int(t) for t in TrajectoryReader(sim_traj).timestamps_ns[20:30])
        assert header_ns(resumed.header) in second_run
        np.testing.assert_allclose(_pose(resumed), _pose(last), atol=1e-9)
        assert not np.allclose(_pose(last), [0, 0, 0, 0, 0, 0, 1])
        player.stop()

        # Back down: cleanup removes the outputs, shutdown finalizes; the process stays up.
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_DEACTIVATE)
        assert change_state(listener, "/rig_odometry", Transition.TRANSITION_CLEANUP)
        assert get_state(listener, "/rig_odometry") == "unconfigured"
        assert listener.spin_until(lambda: graph.count_publishers("/odometry") == 0, 10)
        assert change_state(listener, "/rig_odometry",
                            Transition.TRANSITION_UNCONFIGURED_SHUTDOWN)
        assert get_state(listener, "/rig_odometry") == "finalized"
        assert node.alive()
        # A transition the state machine does not allow is refused, not crashed on.
        assert not change_state(listener, "/rig_odometry", Transition.TRANSITION_CONFIGURE)
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]


def test_relocalize_missing_map_fails_configure_then_recovers(sim_traj, tmp_path):
    gmap = build_map_from_trajectory(sim_traj, G2GPipeline.default("relocalization"), ["cam0"],
                                     min_translation_m=1.0, min_rotation_deg=45.0,
                                     progress=False)
    map_path = save_map(gmap, tmp_path / "scene.g2gmap")
    missing = tmp_path / "missing.g2gmap"
    listener = Listener()
    statuses = listener.collect(EstimatorStatus, "relocalize/status")
    params = {"use_sim_time": True, "autostart": False, "map_path": str(missing),
              "localize_period_s": 0.0}
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params, SIM_PARAMS), tmp_path / "node.log")
    try:
        assert listener.spin_until(lambda: statuses, 90), node.output()
        assert get_state(listener, "/relocalize") == "unconfigured"
        assert not change_state(listener, "/relocalize", Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, "/relocalize") == "unconfigured"
        assert node.alive()
        assert listener.spin_until(lambda: "does not exist" in statuses[-1].message, 10), \
            statuses[-1].message
        assert statuses[-1].state == EstimatorStatus.STATE_LOST
        assert listener.node.count_publishers("/relocalize/pose") == 0

        assert set_parameter(listener, "/relocalize", "map_path", str(map_path)).successful
        # A corrupt pair verifier fails configure, saying which file and why.
        bad_verifier = tmp_path / "verifier.safetensors"
        bad_verifier.write_bytes(b"truncated")
        assert set_parameter(listener, "/relocalize", "covis_pair_verifier",
                             str(bad_verifier)).successful
        assert not change_state(listener, "/relocalize", Transition.TRANSITION_CONFIGURE)
        assert listener.spin_until(lambda: f"pair verifier {bad_verifier} is corrupt" in
                                   statuses[-1].message, 10), statuses[-1].message
        assert set_parameter(listener, "/relocalize", "covis_pair_verifier", "").successful
        # A bad choice fails configure with the allowed values; the decoder scorer configures.
        assert set_parameter(listener, "/relocalize", "window_scorer", "bogus").successful
        assert not change_state(listener, "/relocalize", Transition.TRANSITION_CONFIGURE)
        assert listener.spin_until(lambda: "window_scorer must be one of" in
                                   statuses[-1].message, 10), statuses[-1].message
        assert set_parameter(listener, "/relocalize", "window_scorer", "covisibility").successful
        assert change_state(listener, "/relocalize", Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, "/relocalize") == "inactive"
        # Inactive: maps can be (re)loaded, localization is refused with the reason.
        reply = listener.call(LoadMap, "/relocalize/load_map", LoadMap.Request(path=str(map_path)))
        assert reply.success and reply.num_keyframes == len(gmap), reply.message
        reply = listener.call(Localize, "/relocalize/localize", Localize.Request())
        assert not reply.success and "inactive" in reply.message
        assert listener.node.count_subscribers("/cam0/image_raw") == 0

        assert change_state(listener, "/relocalize", Transition.TRANSITION_ACTIVATE)
        assert get_state(listener, "/relocalize") == "active"
        assert listener.spin_until(lambda: listener.node.count_subscribers("/cam0/image_raw"), 10)
        reply = listener.call(Localize, "/relocalize/localize", Localize.Request())
        assert not reply.success and "query window not full" in reply.message
        assert listener.spin_until(
            lambda: statuses[-1].state == EstimatorStatus.STATE_NOT_LOCALIZED, 10)
        assert change_state(listener, "/relocalize", Transition.TRANSITION_ACTIVE_SHUTDOWN)
        assert get_state(listener, "/relocalize") == "finalized"
        assert node.alive()
    finally:
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]
    assert "configure failed: map file" in log and "does not exist" in log
    assert "covisibility front-end:" in log
