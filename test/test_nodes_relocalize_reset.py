"""relocalize's ``~/reset`` as a real process: it clears the correction (the reply says so),
stops sending map->odom, and the status says NOT_LOCALIZED, also once the cameras are quiet."""

import pathlib

import pytest

rclpy = pytest.importorskip("rclpy")
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from g2g_msgs.msg import EstimatorStatus  # noqa: E402
from g2g_msgs.srv import Localize  # noqa: E402
from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.estimation.pipeline import G2GPipeline  # noqa: E402
from g2g_model.maps.building import build_map_from_trajectory  # noqa: E402
from g2g_model.maps.format import save_map  # noqa: E402
from g2g_ros.conversions import matrix_to_pose  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def test_reset_clears_the_correction_and_says_not_localized(tmp_path):
    map_traj, query_traj = tiny_trajectories(tmp_path, seed=20002, frames=12, traversals=2)
    gmap = build_map_from_trajectory(map_traj, G2GPipeline.default("relocalization"), ["cam0"],
                                     progress=False)
    map_path = save_map(gmap, tmp_path / "scene.g2gmap")
    listener = Listener()
    statuses = listener.collect(EstimatorStatus, "relocalize/status")
    tfs = listener.collect(TFMessage, "/tf", qos=100)
    # Gates wide open: the fix of ~/localize is accepted whatever the model says (this test is
    # about what ~/reset does with it).
    params = {"use_sim_time": True, "cameras": ["cam0"], "map_path": str(map_path),
              "verify": False, "consistency_count": 1, "max_fusion_spread_m": 1000.0,
              "max_jump_translation_m": 1000.0, "max_jump_rotation_deg": 180.0,
              "localize_period_s": 0.0, "min_translation_m": 0.0, "min_rotation_deg": 0.0,
              "stale_after_s": 1.0, "status_period_s": 0.2,
              "sensor_qos_reliability": "reliable"}
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "node.log")
    player = None

    def map_odom_count():
        return sum(t.child_frame_id == "odom" for m in tfs for t in m.transforms)

    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam0/image_raw") > 0, 90), node.output()
        player = Proc(player_cmd(query_traj, "--clock", "--rate", "10", "--count", "8",
                                 "--cameras", "cam0", "--exit-when-done"),
                      tmp_path / "player.log")
        request = Localize.Request(use_hint=True)
        matrix_to_pose(TrajectoryReader(query_traj).world_T_body[6], request.hint)
        reply = listener.call(Localize, "/relocalize/localize", request, timeout=120)
        for _ in range(20):  # until the query window is full
            if reply.success or "query window not full" not in reply.message:
                break
            listener.spin_until(lambda: False, 0.5)
            reply = listener.call(Localize, "/relocalize/localize", request, timeout=120)
        assert reply.success, reply.message + node.output()[-2000:]
        assert listener.spin_until(lambda: map_odom_count() > 0, 10)
        # The bag ends: the correction is still sent, nothing confirms it (DEGRADED).
        player.proc.wait(timeout=60)
        assert listener.spin_until(
            lambda: statuses[-1].state == EstimatorStatus.STATE_DEGRADED
            and "no images from cam0" in statuses[-1].message, 20), statuses[-1].message

        reply = listener.call(Trigger, "/relocalize/reset", Trigger.Request())
        assert reply.success, reply.message
        assert "correction cleared" in reply.message, reply.message
        assert "map->odom is no longer sent" in reply.message, reply.message
        # Statuses sent before the reset may still be delivered after its reply (the executor
        # hands ready messages over in no time order): from the first one the reset made on,
        # every status says NOT_LOCALIZED.

        def first_after_reset():
            return next((i for i, s in enumerate(statuses)
                         if "not localized since ~/reset" in s.message), None)

        assert listener.spin_until(lambda: first_after_reset() is not None
                                   and len(statuses) >= first_after_reset() + 4, 10), \
            [(s.state, s.message) for s in statuses[-5:]]
        after = statuses[first_after_reset():]
        assert all(s.state == EstimatorStatus.STATE_NOT_LOCALIZED for s in after), \
            [(s.state, s.message) for s in after]
        assert "not localized since ~/reset" in statuses[-1].message, statuses[-1].message
        assert "no images from cam0" in statuses[-1].message, statuses[-1].message
        # No map->odom any more (the TF timer sends it at 20 Hz while there is a correction).
        sent = map_odom_count()
        listener.spin_until(lambda: False, 1.0)
        assert map_odom_count() == sent
        assert node.alive()
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]
