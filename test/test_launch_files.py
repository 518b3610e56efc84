"""The launch files, imported with stand-ins for the launch API (not installable here).

Checks the declared arguments, that every node executable is a real console-script entry point,
and that every parameter file exists and parses with a section for its node. The runner that
starts the same graph here (g2g-bringup) is checked against the same descriptions.
"""

import importlib.util
import pathlib
import re
import sys
import types

import pytest
import yaml

from g2g_ros import bringup
from g2g_ros.launch_graphs import GRAPHS, node_fqn, section_matches, unmatched_sections

ROOT = pathlib.Path(__file__).resolve().parents[1]
REQUIRED_ARGS = {"params_file", "use_sim_time", "namespace", "device", "log_level", "autostart",
                 "checkpoint", "backbone_weights", "sensor_qos"}


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LifecycleNode(_Recorder):
    """Stands in for launch_ros.actions.LifecycleNode (name and namespace are required)."""

    def __init__(self, *args, **kwargs):
        assert "name" in kwargs and "namespace" in kwargs, kwargs
        super().__init__(*args, **kwargs)


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.launch_configurations[self.name]


class _OpaqueFunction:
    def __init__(self, function):
        self.function = function


@pytest.fixture
def launch_api(monkeypatch):
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = _Recorder
    actions.OpaqueFunction = _OpaqueFunction
    subs = types.ModuleType("launch.substitutions")
    subs.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = _Recorder
    ros_actions.LifecycleNode = _LifecycleNode
    import ament_index_python.packages as ament

    # The source tree stands in for share/g2g_ros (it holds config/ and launch/).
    monkeypatch.setattr(ament, "get_package_share_directory",
                        lambda pkg: str(ROOT) if pkg == "g2g_ros" else None)
    for name, mod in {"launch": launch, "launch.actions": actions,
                      "launch.substitutions": subs, "launch_ros": launch_ros,
                      "launch_ros.actions": ros_actions}.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _console_scripts():
    text = (ROOT / "setup.py").read_text()
    return dict(re.findall(r'"([\w-]+) = ([\w.]+:\w+)"', text))


@pytest.mark.parametrize("graph", ["rig_odometry", "relocalize"])
def test_launch_file_declares_arguments_and_real_nodes(launch_api, graph):
    module = _load(ROOT / "launch" / f"{graph}.launch.py")
    entities = module.generate_launch_description()
    declared = {e.args[0]: e.kwargs for e in entities
                if isinstance(e, _Recorder) and not isinstance(e, _LifecycleNode)}
    assert REQUIRED_ARGS <= set(declared)
    assert all(kw["description"] for kw in declared.values())
    if graph == "relocalize":
        assert "map" in declared
    opaque = [e for e in entities if isinstance(e, _OpaqueFunction)]
    assert len(opaque) == 1
    values = {name: kw["default_value"] for name, kw in declared.items()}
    if graph == "relocalize":
        values.update(map="/maps/office.g2gmap", with_odometry="true")
    # The paper's model: a converted checkpoint and the backbone folder it needs.
    values.update(checkpoint="/w/g2g.safetensors", backbone_weights="/w/map-anything-model")
    context = types.SimpleNamespace(launch_configurations=values)
    nodes = opaque[0].function(context)
    assert nodes, "the graph starts no node"
    scripts = _console_scripts()
    for node in nodes:
        assert isinstance(node, _LifecycleNode), "the nodes are managed (lifecycle) nodes"
        kw = node.kwargs
        assert kw["package"] == "g2g_ros"
        target = scripts.get(kw["executable"])
        assert target, f"{kw['executable']} is not a console script in setup.py"
        module_name, func = target.split(":")
        assert callable(getattr(importlib.import_module(module_name), func))
        files = [p for p in kw["parameters"] if isinstance(p, str)]
        overrides = [p for p in kw["parameters"] if isinstance(p, dict)]
        for f in files:
            data = yaml.safe_load(pathlib.Path(f).read_text())
            sections = [v for k, v in data.items()
                        if section_matches(k, node_fqn(kw["namespace"], kw["name"]))]
            assert sections and "ros__parameters" in sections[0], f
        assert overrides[-1]["use_sim_time"] is False
        assert overrides[-1]["autostart"] is True  # the nodes configure + activate themselves
        assert overrides[-1]["checkpoint"] == "/w/g2g.safetensors"
        assert overrides[-1]["backbone_weights"] == "/w/map-anything-model"
        if kw["name"] == "relocalize":
            assert overrides[-1]["map_path"] == "/maps/office.g2gmap"
    if graph == "relocalize":
        assert {n.kwargs["name"] for n in nodes} == {"relocalize", "rig_odometry"}


def test_every_parameter_file_names_known_parameters():
    # Each YAML key must be a parameter the node declares (a typo would be silently ignored).
    import dataclasses

    pytest.importorskip("rclpy")
    # Every node declares the fields of its parameter dataclass (g2g_ros.parameters).
    from g2g_ros.nodes.map_builder import MapBuilderParams
    from g2g_ros.nodes.relocalize_params import RelocalizeParams
    from g2g_ros.nodes.rig_odometry_params import RigOdometryParams

    declared = {node: {f.name for f in dataclasses.fields(params)} | {"autostart"}
                for node, params in (("rig_odometry", RigOdometryParams),
                                     ("relocalize", RelocalizeParams),
                                     ("map_builder", MapBuilderParams))}
    for path in sorted((ROOT / "config").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for key, section in data.items():
            assert key.startswith("/**/"), f"{path.name}: {key} would not match a namespaced node"
            node = key[len("/**/"):]
            unknown = set(section["ros__parameters"]) - declared[node]
            assert not unknown, f"{path.name}: {node} has undeclared parameters {unknown}"


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_bringup_starts_the_same_graph(graph):
    args = bringup.parse_launch_args(GRAPHS[graph], ["rig:=nclt", "device:=cpu",
                                                     "backbone_weights:=/w/map-anything-model"])
    cmds = bringup.node_commands(GRAPHS[graph], args)
    for cmd in cmds:
        assert cmd[1] == "-m" and cmd[2] in bringup.NODE_MODULES.values()
        assert "backbone_weights:=/w/map-anything-model" in cmd
        assert str(ROOT / "config" / "nclt.yaml") in cmd
        assert "use_sim_time:=false" in cmd
        assert "autostart:=true" in cmd
    assert not any("sensor_qos_reliability:=" in " ".join(c) for c in cmds), "rig file's"
    replay = bringup.node_commands(GRAPHS[graph], bringup.parse_launch_args(
        GRAPHS[graph], ["sensor_qos:=reliable"]))
    assert all("sensor_qos_reliability:=reliable" in cmd for cmd in replay)
    with pytest.raises(ValueError, match="unknown launch argument"):
        bringup.parse_launch_args(GRAPHS[graph], ["bogus:=1"])
    with pytest.raises(ValueError, match="no parameter file for rig"):
        bringup.node_commands(GRAPHS[graph], dict(args, rig="mars"))


def test_parameter_file_sections_match_like_rcl():
    assert section_matches("/**/rig_odometry", "/rig_odometry")
    assert section_matches("/**/rig_odometry", "/robot1/rig_odometry")
    assert section_matches("/**/rig_odometry", "/a/b/rig_odometry")
    assert section_matches("rig_odometry", "/rig_odometry")
    assert not section_matches("rig_odometry", "/robot1/rig_odometry")
    assert section_matches("/*/rig_odometry", "/robot1/rig_odometry")
    assert not section_matches("/*/rig_odometry", "/rig_odometry")
    assert section_matches("/**", "/robot1/relocalize")
    data = {"rig_odometry": {}, "/**/relocalize": {}}
    assert unmatched_sections(data, GRAPHS["relocalize"], "robot1") == ["rig_odometry"]
    assert unmatched_sections(data, GRAPHS["relocalize"], "") == []


def test_bringup_warns_about_a_params_file_a_namespace_would_drop(tmp_path, caplog):
    user = tmp_path / "mine.yaml"
    user.write_text("rig_odometry:\n  ros__parameters:\n    keyframe_stride: 2\n")
    graph = GRAPHS["rig_odometry"]
    with caplog.at_level("WARNING", logger="g2g-bringup"):
        bringup.node_commands(graph, bringup.parse_launch_args(
            graph, ["namespace:=robot1", f"params_file:={user}"]))
    assert "section 'rig_odometry' matches no node" in caplog.text
    assert "/**/<node>" in caplog.text


def test_replays_get_reliable_cameras_live_cameras_keep_best_effort():
    from g2g_ros.launch_graphs import node_parameter_overrides

    spec = next(n for n in GRAPHS["relocalize"].nodes if n.name == "relocalize")
    qos = lambda args: dict(node_parameter_overrides(spec, args)).get(  # noqa: E731
        "sensor_qos_reliability")
    assert qos({"use_sim_time": "true"}) == "reliable"        # a bag replay
    assert qos({"use_sim_time": "false"}) is None             # live: the rig file's best_effort
    assert qos({"use_sim_time": "true", "sensor_qos": "best_effort"}) == "best_effort"
    assert qos({"sensor_qos": "reliable"}) == "reliable"
