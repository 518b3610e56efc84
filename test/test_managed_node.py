"""The lifecycle of each G2G node, in-process (no peers): transitions through the public
``trigger_*`` API, as ``~/change_state`` does. The node processes and their services over DDS
are tested in test_nodes_lifecycle.py.
"""

import importlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.lifecycle import TransitionCallbackReturn as R  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]

NODES = {"rig_odometry": "RigOdometryNode", "relocalize": "RelocalizeNode",
         "map_builder": "MapBuilderNode"}


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
        K = np.array([[50.0, 0, 32], [0, 50.0, 32], [0, 0, 1]])
        node.builder.add("cam0", 1, np.eye(4), np.zeros((64, 64, 3), np.uint8), K)  # a keyframe
        assert node.trigger_deactivate() == R.SUCCESS
        assert len(node.builder) == 1, "deactivation keeps the recorded keyframes"
        assert node.trigger_activate() == R.SUCCESS and len(node.builder) == 1
        assert node.trigger_deactivate() == R.SUCCESS and node.trigger_cleanup() == R.SUCCESS
        assert node.builder is None, "cleanup forgets them"
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name", sorted(NODES))
def test_harmful_start_up_values_fail_configure_with_the_reason(name, context):
    # NaN / inf / out-of-range / wrong-type values given at start-up used to
    # be accepted (or to raise in the constructor); now the node comes up, refuses them and
    # says which and why, and configures once they are fixed.
    bad = {"status_period_s": float("nan"), "autostart": False, "image_topic": 5}
    if name == "map_builder":
        bad.update(min_rotation_deg=-1.0, max_keyframes=0)
    node = _make(name, context, **bad)
    try:
        # A read-only parameter keeps its default (it could not be fixed later), reported.
        assert node.p["status_period_s"] == 1.0
        assert "got nan" in dict(node.problems.recent())["parameter status_period_s"]
        assert node.trigger_configure() == R.FAILURE
        text = node.lifecycle_text()
        assert node.lifecycle_state == "unconfigured"
        assert "parameter image_topic must be a string, got 5 (an integer)" in text, text
        fixes = [("image_topic", "image_raw")]
        if name == "map_builder":
            assert "parameter min_rotation_deg must be in [0, 180], got -1.0" in text
            assert "parameter max_keyframes must be in [1, 1e+07], got 0" in text
            fixes += [("min_rotation_deg", 5.0), ("max_keyframes", 10)]
            refused = node.set_parameters([Parameter("min_translation_m", value=float("inf"))])
            assert not refused[0].successful
        assert node.trigger_configure() == R.FAILURE, "still not fixed"
        for key, value in fixes:
            assert node.set_parameters([Parameter(key, value=value)])[0].successful
        assert node.trigger_configure() == R.SUCCESS, node.lifecycle_text()
    finally:
        node.destroy_node()
