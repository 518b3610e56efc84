"""The parameters every node declares (name, default, type, range, description, read-only,
read-at-configure) are exactly those recorded in ``fixtures/node_parameters.json``, which was
written from the nodes before their parameters became one dataclass per node.

Regenerate only on purpose: ``python test/test_node_parameters_unchanged.py --write``. Last
regenerated for map_builder's ``keyframe_max_px`` (keyframes stored at the verifier's size) and
``fix_needs_geometry``'s description (G2G-only candidates are reported, never published).
"""

import importlib
import json
import pathlib
import sys

import pytest

rclpy = pytest.importorskip("rclpy")

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "node_parameters.json"
NODES = {"rig_odometry": "RigOdometryNode", "relocalize": "RelocalizeNode",
         "map_builder": "MapBuilderNode"}

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


def declared(name: str, context) -> dict:
    """``{parameter: what describes it}`` of node ``name`` as declared with no overrides."""
    from rclpy.parameter import Parameter

    cls = getattr(importlib.import_module(f"g2g_ros.nodes.{name}"), NODES[name])
    node = cls(context=context, namespace="g2g_param_dump",
               parameter_overrides=[Parameter("autostart", value=False)])
    try:
        out = {}
        for pname in sorted(node._defaults):
            desc = node.describe_parameter(pname)
            value = node._defaults[pname] if pname == "autostart" else \
                node.get_parameter(pname).value
            out[pname] = {
                "default": list(value) if isinstance(value, (list, tuple)) else value,
                "type": type(value).__name__, "description": desc.description,
                "read_only": desc.read_only, "constraints": desc.additional_constraints,
                "dynamic_typing": desc.dynamic_typing,
                "float_range": [[r.from_value, r.to_value, r.step]
                                for r in desc.floating_point_range],
                "integer_range": [[r.from_value, r.to_value, r.step]
                                  for r in desc.integer_range],
                "at_configure": pname in node._at_configure, "double": pname in node._doubles}
        return out
    finally:
        node.destroy_node()


def declared_by_every_node() -> dict:
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        return {name: declared(name, ctx) for name in sorted(NODES)}
    finally:
        rclpy.shutdown(context=ctx)


def test_node_parameters_are_unchanged():
    expected = json.loads(FIXTURE.read_text())
    got = json.loads(json.dumps(declared_by_every_node()))  # same JSON round trip
    for name in sorted(NODES):
        assert sorted(got[name]) == sorted(expected[name]), name
        for pname, desc in expected[name].items():
            assert got[name][pname] == desc, (name, pname)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    FIXTURE.write_text(json.dumps(declared_by_every_node(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")


def test_params_dataclass_is_read_back_at_configure():
    from rclpy.lifecycle import TransitionCallbackReturn as R
    from rclpy.parameter import Parameter

    from g2g_ros.nodes.map_builder import MapBuilderNode, MapBuilderParams

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node = MapBuilderNode(context=ctx, namespace="g2g_param_read", parameter_overrides=[
            Parameter("autostart", value=False), Parameter("max_keyframes", value=7)])
        try:
            assert isinstance(node.params, MapBuilderParams)
            assert node.params.max_keyframes == 7 and node.params.cameras == ["cam0"]
            assert node.set_parameters([Parameter("map_frame", value="world")])[0].successful
            assert node.trigger_configure() == R.SUCCESS  # the parameters are re-read
            assert node.params.map_frame == "world" and node.params.max_keyframes == 7
            assert {k: v for k, v in node.p.items() if k != "autostart"} == {
                f: getattr(node.params, f) for f in vars(node.params)}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)
