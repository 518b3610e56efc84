"""The lifecycle of each G2G node, in-process (no peers): transitions through the public
``trigger_*`` API, as ``~/change_state`` does. The node processes and their services over DDS
are tested in test_nodes_lifecycle.py.
"""

import importlib

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.lifecycle import TransitionCallbackReturn as R  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]

NODES = {"rig_odometry": "RigOdometryNode", "relocalize": "RelocalizeNode",
         "map_builder": "MapBuilderNode"}


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.shutdown(context=ctx)


def _make(name, context, **params):
    cls = getattr(importlib.import_module(f"g2g_ros.nodes.{name}"), NODES[name])
    # Own namespace: the node process tests use the plain names in the same ROS domain.
    return cls(context=context, namespace="g2g_in_process_test",
               parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])


def _publishers_enabled(node):
    return sorted(e.is_activated for e in node._managed_entities)


@pytest.mark.parametrize("name", sorted(NODES))
def test_failed_configure_keeps_node_unconfigured_until_fixed(name, context):
    node = _make(name, context, autostart=False, extrinsics_source="bogus")
    try:
        assert node.lifecycle_state == "unconfigured" and not node.configured
        assert node.trigger_configure() == R.FAILURE
        assert node.lifecycle_state == "unconfigured"
        assert "extrinsics_source must be 'tf_static' or 'yaml'" in node.lifecycle_text()
        assert node.srvs == [] and node.worker is None, "a failed configure releases everything"
        # Fixed while unconfigured: configure succeeds, the parameter is then locked.
        assert node.set_parameters([Parameter("extrinsics_source", value="tf_static")])[0] \
            .successful
        assert node.trigger_configure() == R.SUCCESS
        assert node.lifecycle_state == "inactive" and node.last_failure == ""
        refused = node.set_parameters([Parameter("extrinsics_source", value="yaml")])[0]
        assert not refused.successful and "read at configure" in refused.reason
        assert node.srvs and node.worker is not None
        # Lifecycle publishers (if the node has outputs) follow activate / deactivate.
        assert not any(_publishers_enabled(node))
        assert node.trigger_activate() == R.SUCCESS and node.active
        assert all(_publishers_enabled(node))
        assert node.inputs is not None and node.inputs._subs
        assert node.trigger_deactivate() == R.SUCCESS and not node.active
        assert not any(_publishers_enabled(node)) and not node.inputs._subs
        assert node.trigger_cleanup() == R.SUCCESS
        assert node.srvs == [] and node.worker is None and node.pipeline is None
        assert node.trigger_shutdown() == R.SUCCESS and node.lifecycle_state == "finalized"
    finally:
        node.destroy_node()


def test_autostart_default_is_active_and_state_survives_deactivation(context):
    node = _make("map_builder", context)
    try:
        assert node.lifecycle_state == "active" and node.active
        node.frames.append("kept")  # stands for a recorded keyframe
        assert node.trigger_deactivate() == R.SUCCESS
        assert node.frames == ["kept"], "deactivation keeps the recorded keyframes"
        assert node.trigger_activate() == R.SUCCESS and node.frames == ["kept"]
        assert node.trigger_deactivate() == R.SUCCESS and node.trigger_cleanup() == R.SUCCESS
        assert node.frames == [], "cleanup forgets them"
    finally:
        node.destroy_node()
