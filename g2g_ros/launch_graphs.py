"""The node graphs that the launch files start, described once in plain Python.

`launch/*.launch.py` (for `ros2 launch` on a full ROS 2 install) and `g2g-bringup` (the runner
used here, where the launch packages cannot be installed) both read these descriptions, so the
two always start the same nodes with the same parameter files and arguments.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

PACKAGE = "g2g_ros"


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str


@dataclass(frozen=True)
class NodeSpec:
    """One node of a graph.

    Attributes:
        executable: console-script name installed in ``lib/g2g_ros``.
        name: node name.
        params_files: parameter files under ``config/`` (before the launch-argument overrides).
        arg_parameters: ``(parameter, launch argument)`` pairs: parameters taken from arguments.
        condition: name of a boolean launch argument that must be true to start this node.
    """

    executable: str
    name: str
    params_files: Tuple[str, ...] = ()
    arg_parameters: Tuple[Tuple[str, str], ...] = ()
    condition: str = ""


COMMON_ARGUMENTS = (
    LaunchArgument("params_file", "", "extra YAML parameter file applied after the rig file"),
    LaunchArgument("rig", "sim", "rig preset: a file config/<rig>.yaml (sim, nclt, zjh)"),
    LaunchArgument("use_sim_time", "false", "use /clock (bag replay)"),
    LaunchArgument("autostart", "true", "configure and activate the (lifecycle) nodes at "
                   "start-up; false: they wait unconfigured for a lifecycle manager"),
    LaunchArgument("namespace", "", "namespace for all nodes"),
    LaunchArgument("device", "cpu", "torch device for the model (cpu, cuda, cuda:1)"),
    LaunchArgument("log_level", "info", "ROS log level"),
    LaunchArgument("checkpoint", "", "G2G checkpoint; empty = the embedded default"),
    LaunchArgument("backbone_weights", "", "local backbone weights that the checkpoint needs "
                   "(the MapAnything V1 folder of the paper's model); empty = none"),
    LaunchArgument("sensor_qos", "", "camera subscription reliability: best_effort (live "
                   "cameras, the rig files' default) or reliable (bag replays: a best-effort "
                   "subscriber loses most large images of a replay's bursts); empty = reliable "
                   "with use_sim_time:=true (a replay), else the rig file's value"),
    LaunchArgument("rviz", "false", "also start rviz2 with config/g2g.rviz fitted to the rig's "
                   "cameras and the namespace (fails if rviz2 is not installed)"),
)


@dataclass(frozen=True)
class Graph:
    name: str
    description: str
    arguments: Tuple[LaunchArgument, ...]
    nodes: Tuple[NodeSpec, ...] = field(default_factory=tuple)

    def argument_defaults(self) -> Dict[str, str]:
        return {a.name: a.default for a in self.arguments}


_MODEL_PARAMS = (("device", "device"), ("checkpoint", "checkpoint"),
                 ("backbone_weights", "backbone_weights"),
                 ("sensor_qos_reliability", "sensor_qos"))

GRAPHS: Dict[str, Graph] = {
    "rig_odometry": Graph(
        name="rig_odometry",
        description="Multi-camera rig odometry: publishes odom->base_link and nav_msgs/Odometry.",
        arguments=COMMON_ARGUMENTS,
        nodes=(NodeSpec("rig_odometry", "rig_odometry", arg_parameters=_MODEL_PARAMS),),
    ),
    "relocalize": Graph(
        name="relocalize",
        description="Relocalization against a stored map: publishes map->odom.",
        arguments=COMMON_ARGUMENTS + (
            LaunchArgument("map", "", "map artefact to load at start-up (g2g-map build ...)"),
            LaunchArgument("with_odometry", "false",
                           "also start rig_odometry as the odom->base_link source"),
        ),
        nodes=(
            NodeSpec("relocalize", "relocalize",
                     arg_parameters=_MODEL_PARAMS + (("map_path", "map"),)),
            NodeSpec("rig_odometry", "rig_odometry", arg_parameters=_MODEL_PARAMS,
                     condition="with_odometry"),
        ),
    ),
    "map_builder": Graph(
        name="map_builder",
        description="Record keyframes into a map; ~/save_map writes it.",
        arguments=COMMON_ARGUMENTS,
        nodes=(NodeSpec("map_builder", "map_builder", arg_parameters=_MODEL_PARAMS),),
    ),
}


def node_parameter_overrides(node: NodeSpec, args: Dict[str, str]) -> List[Tuple[str, str]]:
    """``(parameter, value)`` pairs a node gets from launch arguments (empty values skipped)."""
    out = []
    for param, arg in node.arg_parameters:
        value = args.get(arg, "")
        if value != "":
            out.append((param, value))
        elif arg == "sensor_qos" and is_true(args.get("use_sim_time", "false")):
            # A replay (/clock) gets reliable camera subscriptions unless sensor_qos says
            # otherwise: a best-effort subscriber loses most images of a bag's bursts. Live
            # cameras (no sim time) keep the rig file's best_effort, the sensor-data convention.
            out.append((param, "reliable"))
    return out


def params_key(node_name: str) -> str:
    """The key of a node's section in a parameter file: ``/**/<name>``, which rcl matches in
    every namespace (a plain ``<name>:`` matches only ``/<name>``, so ``namespace:=robot1``
    would silently drop the section)."""
    return f"/**/{node_name}"


def section_matches(key: str, node_fqn: str) -> bool:
    """Whether a parameter-file key applies to the node ``/ns/name`` under rcl's rules: a
    plain key is the fully qualified name (a leading ``/`` optional), ``*`` matches one
    token and ``**`` any number of tokens (none included)."""
    pattern = [t for t in key.strip("/").split("/") if t]
    tokens = [t for t in node_fqn.strip("/").split("/") if t]

    def match(p: int, t: int) -> bool:
        if p == len(pattern):
            return t == len(tokens)
        if pattern[p] == "**":
            return any(match(p + 1, k) for k in range(t, len(tokens) + 1))
        return (t < len(tokens) and fnmatch.fnmatchcase(tokens[t], pattern[p])
                and match(p + 1, t + 1))

    return match(0, 0)


def node_fqn(namespace: str, name: str) -> str:
    ns = namespace.strip("/")
    return f"/{ns}/{name}" if ns else f"/{name}"


def file_parameters(data: Dict, fqn: str) -> Dict[str, object]:
    """What a parameter file (parsed YAML) gives the node ``fqn``: the ``ros__parameters`` of
    every section that matches it (:func:`section_matches`), a later section overriding an
    earlier one."""
    merged: Dict[str, object] = {}
    for key, section in (data or {}).items():
        if section_matches(str(key), fqn) and isinstance(section, dict):
            merged.update(section.get("ros__parameters") or {})
    return merged


def node_parameters(paths, node_name: str, namespace: str = "") -> Dict[str, object]:
    """The parameters the node ``node_name`` gets from the parameter files ``paths`` given in
    this order (``--params-file`` after ``--params-file``: a later file overrides)."""
    import yaml

    merged: Dict[str, object] = {}
    for path in paths:
        with open(path) as fh:
            merged.update(file_parameters(yaml.safe_load(fh), node_fqn(namespace, node_name)))
    return merged


def unmatched_sections(data: Dict, graph: "Graph", namespace: str) -> List[str]:
    """Keys of a parameter file (parsed YAML) that match no node of ``graph`` in
    ``namespace``: their parameters would be silently ignored."""
    fqns = [node_fqn(namespace, n.name) for n in graph.nodes]
    return [str(key) for key in (data or {})
            if not any(section_matches(str(key), fqn) for fqn in fqns)]


def params_file_warnings(path, graph: "Graph", namespace: str) -> List[str]:
    """Warnings for a user parameter file: sections that no node of the graph would get."""
    import yaml

    with open(path) as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        return [f"params_file {path} holds no node sections"]
    return [f"params_file {path}: section {key!r} matches no node of graph {graph.name!r} "
            f"in namespace {namespace or '/'!r} (nodes: "
            f"{[node_fqn(namespace, n.name) for n in graph.nodes]}); its parameters are "
            f"ignored. Use {params_key('<node>')!r} keys to match every namespace"
            for key in unmatched_sections(data, graph, namespace)]


def is_true(value: str) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")
