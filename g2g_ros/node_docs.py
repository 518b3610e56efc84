"""Write ``docs/PARAMETERS.md``: every node's parameters, topics and services, read from the nodes.

``python -m g2g_ros.node_docs`` (``make docs``) starts each node in this process (autostart
off), reads its declared parameters (``describe_parameter``: description, range, read-only,
read at configure), configures and activates it with its default parameters, and lists the
topics and services it then has in the ROS graph. So the page is the code's own account and
cannot drift from it: ``test/test_node_docs.py`` regenerates it and compares.

``--check`` writes nothing and exits 1 when the file differs from what the nodes say.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pathlib
import sys
from typing import Dict, Iterable, List, Tuple

NODES = {"rig_odometry": "RigOdometryNode", "relocalize": "RelocalizeNode",
         "map_builder": "MapBuilderNode"}
NAMESPACE = "g2g_node_docs"
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "PARAMETERS.md"

# What every rclpy lifecycle node has; listed once in the page's header, not per node.
STANDARD_TOPICS = {"/rosout", "/parameter_events", "~/transition_event"}
STANDARD_SERVICES = {"~/" + s for s in (
    "change_state", "get_state", "get_available_states", "get_available_transitions",
    "get_transition_graph", "describe_parameters", "get_parameter_types", "get_parameters",
    "list_parameters", "set_parameters", "set_parameters_atomically", "get_type_description")}

HEADER = """\
# Nodes: parameters, topics, services

Written by `make docs` (`python -m g2g_ros.node_docs`) from the nodes themselves: each is
started with its default parameters, configured and activated, and what it declares and has
in the ROS graph is listed here. `test/test_node_docs.py` fails when this page is not current.
Do not edit by hand.

Names: `~/x` is private to the node (`/<namespace>/<node>/x`), `x` is relative to the node's
namespace, `/x` is absolute. `<cam>` stands for each name in the `cameras` parameter. Every
node also has the standard lifecycle services (`~/change_state`, `~/get_state`,
`~/get_available_states`, `~/get_available_transitions`, `~/get_transition_graph`), the
parameter services and `~/transition_event`, `/rosout`, `/parameter_events`.

Parameters: "configure" = read at configure, refused while the node is configured (`cleanup`
first); "at once" = applies when set; "read-only" = from the command line or a parameter file
only. A range is enforced by rclpy on every set (`ros2 param describe` shows it); "finite":
any finite double. Per-rig values: `config/<rig>.yaml`, keyed `/**/<node>:`.
"""


def short_type(ros_type: str) -> str:
    """``sensor_msgs/msg/Image`` -> ``sensor_msgs/Image``."""
    return ros_type.replace("/msg/", "/").replace("/srv/", "/")


def relative_name(name: str, node: str, cameras: Iterable[str]) -> str:
    """A graph name as the node's code writes it (``~/status``, ``odometry``, ``/tf``), with
    each camera name replaced by ``<cam>``."""
    private, ns = f"/{NAMESPACE}/{node}/", f"/{NAMESPACE}/"
    if name.startswith(private):
        name = "~/" + name[len(private):]
    elif name.startswith(ns):
        name = name[len(ns):]
    head, _, tail = name.partition("/")
    return f"<cam>/{tail}" if head in set(cameras) and tail else name


def names(entries: List[Tuple[str, List[str]]], node: str, cameras: Iterable[str],
          standard: set) -> List[str]:
    """``name (type)`` lines of one kind of graph entity, without the standard ones."""
    out = {}
    for name, types in entries:
        rel = relative_name(name, node, cameras)
        if rel not in standard:
            out[rel] = f"`{rel}` ({', '.join(short_type(t) for t in types)})"
    return [out[k] for k in sorted(out)]


def type_text(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (list, tuple)):
        return "string array"
    return {int: "int", float: "double", str: "string"}[type(value)]


def cell(text: str) -> str:
    """Table-cell text: no column breaks, no HTML tags (``<cam>`` stays visible)."""
    return (str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def describe_node(name: str, context) -> Dict:
    """The parameters, topics and services of node ``name`` (started, configured, activated)."""
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    from g2g_ros.parameters import range_text

    cls = getattr(importlib.import_module(f"g2g_ros.nodes.{name}"), NODES[name])
    node = cls(context=context, namespace=NAMESPACE,
               parameter_overrides=[Parameter("autostart", value=False)])
    try:
        params = []
        for pname in sorted(node._defaults):
            desc = node.describe_parameter(pname)
            default = node._defaults[pname]
            when = ("read-only" if desc.read_only else
                    "configure" if pname in node._at_configure else "at once")
            params.append((pname, type_text(default), json.dumps(default), range_text(desc),
                           when, desc.description))
        for step in (node.trigger_configure, node.trigger_activate):
            if step() != TransitionCallbackReturn.SUCCESS:
                raise RuntimeError(f"{name}: {node.last_failure or 'transition failed'}")
        cameras = node.p.get("cameras", [])
        ns = node.get_namespace()
        return {
            "doc": (sys.modules[cls.__module__].__doc__ or "").strip().split("\n")[0],
            "params": params,
            "publishes": names(node.get_publisher_names_and_types_by_node(name, ns), name,
                               cameras, STANDARD_TOPICS),
            "subscribes": names(node.get_subscriber_names_and_types_by_node(name, ns), name,
                                cameras, STANDARD_TOPICS),
            "services": names(node.get_service_names_and_types_by_node(name, ns), name,
                              cameras, STANDARD_SERVICES)}
    finally:
        node.destroy_node()


def render() -> str:
    """The page, from the nodes as the code declares them."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=["--ros-args", "--log-level", "warn"])
    try:
        described = {name: describe_node(name, ctx) for name in NODES}
    finally:
        rclpy.shutdown(context=ctx)
    lines = [HEADER]
    for name, d in described.items():
        lines += [f"## `{name}`", "", d["doc"], ""]
        for title in ("subscribes", "publishes", "services"):
            lines.append(f"* {title}: " + (", ".join(d[title]) or "nothing"))
        lines += ["", "| parameter | type | default | range | set | description |",
                  "|---|---|---|---|---|---|"]
        for pname, ptype, default, rng, when, desc in d["params"]:
            lines.append(f"| `{pname}` | {ptype} | `{cell(default)}` | {cell(rng)} | {when} "
                         f"| {cell(desc)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the page is not current")
    ap.add_argument("--out", type=pathlib.Path, default=DOC)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: {'current' if current else 'NOT current: run make docs'}")
        return 0 if current else 1
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
