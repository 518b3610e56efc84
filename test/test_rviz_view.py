"""config/g2g.rviz shows what the nodes really publish: the relocalize graph (with rig_odometry)
runs as real processes over real DDS, and every display's topic of the shipped view must be one
of theirs, with the message type the display reads (camera images: a topic the nodes
subscribe). A renamed topic in a node fails here."""

import pathlib

import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from rclpy.qos import DurabilityPolicy  # noqa: E402

from g2g_ros import bringup  # noqa: E402
from g2g_ros.launch_graphs import GRAPHS  # noqa: E402
from g2g_ros.rviz_config import fitted_config, rig_cameras  # noqa: E402
from ros_helpers import Listener, Proc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

# The message type each RViz display class subscribes (rviz_default_plugins).
DISPLAY_TYPES = {
    "rviz_default_plugins/Odometry": "nav_msgs/msg/Odometry",
    "rviz_default_plugins/PoseWithCovariance": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "rviz_default_plugins/Path": "nav_msgs/msg/Path",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
}
DURABILITY = {"Volatile": DurabilityPolicy.VOLATILE,
              "Transient Local": DurabilityPolicy.TRANSIENT_LOCAL}


def _view():
    return yaml.safe_load((ROOT / "config" / "g2g.rviz").read_text())


def _topic_displays(view):
    return [d for d in view["Visualization Manager"]["Displays"]
            if isinstance(d.get("Topic"), dict)]


def test_the_shipped_view_is_the_default_launch_fit():
    # rviz:=true with the defaults (rig sim, root namespace, relocalize) opens this very view.
    view, graph = _view(), GRAPHS["relocalize"]
    cams = rig_cameras([str(ROOT / "config" / "sim.yaml")], graph, "")
    assert fitted_config(view, cams, "", "map") == view
    classes = {d["Class"] for d in view["Visualization Manager"]["Displays"]}
    assert {"rviz_default_plugins/TF", *DISPLAY_TYPES} <= classes


def test_every_display_topic_is_one_the_nodes_publish(tmp_path):
    graph = GRAPHS["relocalize"]
    args = bringup.parse_launch_args(graph, ["rig:=sim", "with_odometry:=true"])
    procs = [Proc(cmd, tmp_path / f"node{i}.log")
             for i, cmd in enumerate(bringup.node_commands(graph, args))]
    listener = Listener()
    node = listener.node
    displays = _topic_displays(_view())
    assert {d["Class"] for d in displays} == set(DISPLAY_TYPES)

    def endpoints(display):
        topic = display["Topic"]["Value"]
        if display["Class"].endswith("/Image"):  # images come from the cameras
            return node.get_subscriptions_info_by_topic(topic)
        return node.get_publishers_info_by_topic(topic)

    try:
        listener.spin_until(lambda: all(endpoints(d) for d in displays), timeout=150.0)
        for d in displays:
            found = endpoints(d)
            logs = "".join(p.output()[-1500:] for p in procs)
            assert found, f"{d['Name']}: nothing on {d['Topic']['Value']}\n{logs}"
            assert {e.topic_type for e in found} == {DISPLAY_TYPES[d["Class"]]}, d["Name"]
            if not d["Class"].endswith("/Image"):
                want = DURABILITY[d["Topic"]["Durability Policy"]]
                # A transient-local display needs a transient-local publisher to get the
                # latched message; a volatile one matches any publisher.
                if want == DurabilityPolicy.TRANSIENT_LOCAL:
                    assert all(e.qos_profile.durability == want for e in found), d["Name"]
        assert all(p.alive() for p in procs)
    finally:
        listener.close()
        logs = [p.stop() for p in procs]
    failures = [_exception_first(log) for log in logs if "Traceback" in log]
    assert not failures, "\n---\n".join(failures)


def _exception_first(log):
    """A log's first traceback, its exception line first and then its innermost frames: pytest
    cuts a long message to its first lines."""
    lines = log[log.index("Traceback"):].splitlines()
    end = next((k for k, line in enumerate(lines[1:], 1) if not line.startswith(" ")),
               len(lines) - 1)
    return "\n".join([lines[end], *lines[max(1, end - 6):end]])
