"""relocalize as a real process under bad TF: a stray ``/tf`` edge that closes a loop or gives a
frame a second parent is refused and counted, and images keep being processed without a reset.
"""

import pathlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from std_msgs.msg import Header  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from g2g_ros.conversions import header_ns, matrix_to_transform_stamped  # noqa: E402
from g2g_ros.qos import tf_qos  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
S = 10**9
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def _diag_values(diags):
    for d in reversed(diags):
        for st in d.status:
            if st.name.startswith("relocalize"):
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_stray_tf_edges_are_refused_and_images_keep_being_processed(tmp_path):
    traj = tiny_trajectories(tmp_path, seed=20002, frames=12)[0]
    listener = Listener()
    processed = listener.collect(Header, "relocalize/processed", qos=50)
    diags = listener.collect(DiagnosticArray, "/diagnostics")
    tf_pub = listener.node.create_publisher(TFMessage, "/tf", tf_qos(static=False))
    # No map and no periodic localization: every image of cam0 is only buffered (or dropped,
    # with the reason on ~/processed), which is cheap.
    params = {"use_sim_time": True, "cameras": ["cam0"], "verify": False,
              "localize_period_s": 0.0, "min_translation_m": 0.0, "min_rotation_deg": 0.0,
              "sensor_qos_reliability": "reliable"}
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "node.log")
    player = None

    def outcomes_after(stamp):
        return [(header_ns(h), h.frame_id) for h in processed if header_ns(h) > stamp]

    try:
        assert listener.spin_until(
            lambda: listener.node.count_subscribers("/cam0/image_raw") > 0, 90), node.output()
        player = Proc(player_cmd(traj, "--clock", "--loop", "--rate", "10", "--cameras", "cam0"),
                      tmp_path / "player.log")
        assert listener.spin_until(
            lambda: any(h.frame_id == "buffered" for h in processed), 60), \
            f"{[h.frame_id for h in processed][-5:]}\n{node.output()[-3000:]}"
        # While odom -> base_link streams: one edge back (a loop), one second parent.
        stamp = header_ns(processed[-1])
        tf_pub.publish(TFMessage(transforms=[
            matrix_to_transform_stamped(np.eye(4), "base_link", "odom", stamp)]))
        tf_pub.publish(TFMessage(transforms=[
            matrix_to_transform_stamped(np.eye(4), "map", "base_link", stamp)]))
        # Images stamped from 1 s (ROS time) after the stray edges on are all processed.
        settled = stamp + S
        assert listener.spin_until(lambda: len(outcomes_after(settled)) >= 10, 60), \
            f"{outcomes_after(stamp)}\n{node.output()[-3000:]}"
        dropped = [o for o in outcomes_after(settled) if o[1].startswith("dropped")]
        assert not dropped, f"{dropped[:3]}\n{node.output()[-3000:]}"
        # Both are counted in the diagnostics, and the offending edges are named in the log.
        assert listener.spin_until(lambda: "loop 1" in _diag_values(diags).get(
            "tf_rejected", ""), 10), _diag_values(diags)
        values = _diag_values(diags)
        assert "second_parent 1" in values["tf_rejected"], values
        assert values["tf_last_rejected"] in ("map -> base_link: second_parent",
                                              "base_link -> odom: loop"), values
        assert "would close the loop odom -> base_link -> odom" in node.output()
        assert node.alive()
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]
