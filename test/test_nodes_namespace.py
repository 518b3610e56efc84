"""A namespaced graph keeps the rig's parameters: the graph ``g2g-bringup``
starts with ``namespace:=robot1 rig:=nclt``, real node processes over real DDS, asked for their
parameters through the standard ``~/get_parameters`` service."""

import pytest

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import GetParameters  # noqa: E402

from g2g_ros import bringup  # noqa: E402
from g2g_ros.launch_graphs import GRAPHS  # noqa: E402
from ros_helpers import Listener, Proc  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(200)]


def _get(listener, node, names):
    reply = listener.call(GetParameters, f"{node}/get_parameters", GetParameters.Request(
        names=names), timeout=30)
    out = {}
    for name, value in zip(names, reply.values):
        out[name] = (list(value.string_array_value) if value.type == 9 else value.string_value)
    return out


def test_namespaced_graph_gets_the_rig_parameters(tmp_path):
    graph = GRAPHS["relocalize"]
    args = bringup.parse_launch_args(graph, ["namespace:=robot1", "rig:=nclt",
                                             "with_odometry:=true", "autostart:=false"])
    commands = bringup.node_commands(graph, args)
    # The same keys still apply in the root namespace.
    odometry = GRAPHS["rig_odometry"]
    commands += bringup.node_commands(odometry, bringup.parse_launch_args(
        odometry, ["rig:=nclt", "autostart:=false"]))
    listener = Listener()
    procs = [Proc(cmd, tmp_path / f"node{i}.log") for i, cmd in enumerate(commands)]
    try:
        got = _get(listener, "/robot1/rig_odometry", ["cameras", "sensor_qos_reliability"])
        assert got["cameras"] == ["cam1", "cam2", "cam3", "cam4", "cam5"], got
        got = _get(listener, "/robot1/relocalize", ["cameras", "reloc_camera"])
        assert got == {"cameras": ["cam1", "cam2", "cam3", "cam4", "cam5"],
                       "reloc_camera": "cam5"}, got
        got = _get(listener, "/rig_odometry", ["cameras"])
        assert got["cameras"] == ["cam1", "cam2", "cam3", "cam4", "cam5"], got
        assert all(p.alive() for p in procs)
    finally:
        logs = [p.stop() for p in procs]
        listener.close()
    assert not any("Traceback" in log for log in logs), logs
