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


def _rviz_nodes(entities, **values):
    declared = {e.args[0]: e.kwargs["default_value"] for e in entities
                if isinstance(e, _Recorder) and not isinstance(e, _LifecycleNode)}
    assert declared["rviz"] == "false"
    declared.update(values)
    opaque = next(e for e in entities if isinstance(e, _OpaqueFunction))
    actions = opaque.function(types.SimpleNamespace(launch_configurations=declared))
    return [a for a in actions if not isinstance(a, _LifecycleNode)]


@pytest.fixture
def rviz2_installed(monkeypatch, tmp_path):
    import ament_index_python.packages as ament

    exe = tmp_path / "lib" / "rviz2" / "rviz2"
    exe.parent.mkdir(parents=True)
    exe.write_text("")

    def prefix(pkg):
        if pkg != "rviz2":
            raise ament.PackageNotFoundError(pkg)
        return str(tmp_path)

    monkeypatch.setattr(ament, "get_package_prefix", prefix)


def test_launch_without_rviz_starts_no_viewer(launch_api):
    for graph in ("rig_odometry", "relocalize"):
        module = _load(ROOT / "launch" / f"{graph}.launch.py")
        assert _rviz_nodes(module.generate_launch_description()) == []


def test_rviz_true_without_rviz2_fails_saying_so(launch_api, monkeypatch):
    import ament_index_python.packages as ament

    from g2g_ros.rviz_config import RvizMissing

    def missing(pkg):
        raise ament.PackageNotFoundError(pkg)

    monkeypatch.setattr(ament, "get_package_prefix", missing)
    module = _load(ROOT / "launch" / "relocalize.launch.py")
    with pytest.raises(RvizMissing, match="rviz2 is not installed.*rviz:=false"):
        _rviz_nodes(module.generate_launch_description(), rviz="true")
    graph = GRAPHS["relocalize"]
    with pytest.raises(RvizMissing, match="rviz2 is not installed"):
        bringup.node_commands(graph, bringup.parse_launch_args(graph, ["rviz:=true"]))


@pytest.mark.parametrize("graph,fixed", [("relocalize", "map"), ("rig_odometry", "odom")])
def test_rviz_true_opens_the_view_fitted_to_rig_and_namespace(launch_api, rviz2_installed,
                                                              graph, fixed):
    module = _load(ROOT / "launch" / f"{graph}.launch.py")
    (viewer,) = _rviz_nodes(module.generate_launch_description(), rviz="true", rig="nclt",
                            namespace="robot1", use_sim_time="true")
    assert viewer.kwargs["package"] == "rviz2" and viewer.kwargs["executable"] == "rviz2"
    assert viewer.kwargs["parameters"] == [{"use_sim_time": True}]
    flag, path = viewer.kwargs["arguments"]
    assert flag == "-d"
    view = yaml.safe_load(pathlib.Path(path).read_text())
    displays = view["Visualization Manager"]["Displays"]
    images = [d["Topic"]["Value"] for d in displays if d["Class"].endswith("/Image")]
    nclt = yaml.safe_load((ROOT / "config" / "nclt.yaml").read_text())
    cams = nclt["/**/rig_odometry"]["ros__parameters"]["cameras"]
    assert images == [f"/robot1/{c}/image_raw" for c in cams]
    others = [d["Topic"]["Value"] for d in displays
              if isinstance(d.get("Topic"), dict) and not d["Class"].endswith("/Image")]
    assert others and all(t.startswith("/robot1/") for t in others), others
    assert view["Visualization Manager"]["Global Options"]["Fixed Frame"] == fixed
    # The same view from the runner used here.
    cmd = bringup.node_commands(GRAPHS[graph], bringup.parse_launch_args(
        GRAPHS[graph], ["rviz:=true", "rig:=nclt", "namespace:=robot1"]))[-1]
    assert cmd[0].endswith("lib/rviz2/rviz2") and cmd[1] == "-d"
    assert yaml.safe_load(pathlib.Path(cmd[2]).read_text()) == view
    assert cmd[-1] == "use_sim_time:=false"


def test_setup_installs_the_rviz_view(monkeypatch):
    from distutils.core import run_setup

    monkeypatch.chdir(ROOT)  # setup.py's globs are relative
    dist = run_setup(str(ROOT / "setup.py"), stop_after="init")
    installed = {f for target, files in dist.data_files if target == "share/g2g_ros/config"
                 for f in files}
    assert "config/g2g.rviz" in installed, installed
