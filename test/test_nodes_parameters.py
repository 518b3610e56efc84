"""Declared ranges and checks of the node parameters, on a real rig_odometry
process over real DDS: harmful values from the command line do not kill the node (configure
fails, saying which parameter and why); ``~/set_parameters`` refuses NaN, inf, out-of-range and
wrong-type values with reasons that name the range or the types; ``ros2 param describe`` shows
the ranges; an integer for a double parameter is taken as that double."""

import math
import pathlib

import pytest

rclpy = pytest.importorskip("rclpy")
from lifecycle_msgs.msg import Transition  # noqa: E402
from rcl_interfaces.srv import DescribeParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from g2g_msgs.msg import EstimatorStatus  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd  # noqa: E402
from test_nodes_lifecycle import change_state, get_state, set_parameter  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(200)]


def test_rig_odometry_refuses_harmful_parameters_and_stays_up(tmp_path):
    listener = Listener()
    statuses = listener.collect(EstimatorStatus, "rig_odometry/status")
    params = {"keyframe_stride": 10**15, "sync_max_wait_ms": ".nan", "lost_after_s": ".inf",
              "max_spread_m": 2}
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "node.log")
    try:
        assert listener.spin_until(lambda: statuses, 90), node.output()
        assert listener.spin_until(lambda: "configure failed" in statuses[-1].message, 20), \
            statuses[-1].message
        text = statuses[-1].message
        assert "parameter keyframe_stride must be in [1, 1000], got 1000000000000000" in text
        assert "parameter sync_max_wait_ms must be in [0, 60000], got nan" in text
        assert "parameter lost_after_s must be in [0.1, 3600], got inf" in text
        assert get_state(listener, "/rig_odometry") == "unconfigured" and node.alive()

        node_name = "/rig_odometry"
        for name, value in (("tf_rate_hz", 1.0),):  # not a parameter of this node
            assert not set_parameter(listener, node_name, name, value).successful
        refused = set_parameter(listener, node_name, "max_spread_m", math.inf)
        assert not refused.successful and "out of range" in refused.reason, refused.reason
        refused = set_parameter(listener, node_name, "max_spread_m", math.nan)
        assert not refused.successful and "out of range" in refused.reason, refused.reason
        refused = set_parameter(listener, node_name, "keyframe_stride", 2.5)
        assert not refused.successful, refused.reason
        assert refused.reason == ("parameter keyframe_stride must be an integer, got 2.5 "
                                  "(a double)"), refused.reason
        refused = set_parameter(listener, node_name, "queue_size", 0)
        assert not refused.successful and "out of range" in refused.reason, refused.reason
        # An integer for a double is that double.
        assert set_parameter(listener, node_name, "sync_slop_ms", 7).successful

        described = listener.call(DescribeParameters, f"{node_name}/describe_parameters",
                                  DescribeParameters.Request(names=[
                                      "keyframe_stride", "max_spread_m", "verify_max_image_px",
                                      "verify_max_features", "verify_max_turn_deg",
                                      "verify_max_deferred"]))
        stride, spread, image_px, features, turn, deferred = described.descriptors
        assert (stride.integer_range[0].from_value, stride.integer_range[0].to_value) == (1, 1000)
        assert spread.floating_point_range[0].to_value == 100.0
        assert image_px.integer_range[0].to_value == 16384
        assert features.integer_range[0].from_value == 16
        assert turn.floating_point_range[0].to_value == 180.0
        assert deferred.integer_range[0].to_value == 1000
        refused = set_parameter(listener, node_name, "verify_max_turn_deg", 181.0)
        assert not refused.successful and "out of range" in refused.reason, refused.reason

        # Fixed: configure succeeds, with the integer command-line value taken as 2.0; a
        # downscale below 64 px is in the declared range but refused by configure.
        for name, value in (("keyframe_stride", 2), ("sync_max_wait_ms", 300.0),
                            ("lost_after_s", 3.0), ("verify_max_image_px", 32)):
            assert set_parameter(listener, node_name, name, value).successful
        assert not change_state(listener, node_name, Transition.TRANSITION_CONFIGURE)
        assert listener.spin_until(lambda: "max_image_px must be 0 (full size) or >= 64, got "
                                   "32" in statuses[-1].message, 20), statuses[-1].message
        assert set_parameter(listener, node_name, "verify_max_image_px", 0).successful
        # More cameras than the model takes per group: configure says so (every group would
        # fail at predict otherwise).
        six = [f"cam{i}" for i in range(6)]
        assert set_parameter(listener, node_name, "cameras", six).successful
        assert not change_state(listener, node_name, Transition.TRANSITION_CONFIGURE)
        assert listener.spin_until(lambda: "6 cameras, but" in statuses[-1].message
                                   and "at most 5 frames" in statuses[-1].message, 20), \
            statuses[-1].message
        assert set_parameter(listener, node_name, "cameras", six[:5]).successful
        assert change_state(listener, node_name, Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, node_name) == "inactive"
        from rcl_interfaces.srv import GetParameters

        got = listener.call(GetParameters, f"{node_name}/get_parameters",
                            GetParameters.Request(names=["max_spread_m", "sync_slop_ms"]))
        assert [v.double_value for v in got.values] == [2.0, 7.0]
        assert node.alive()
    finally:
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]


def test_relocalize_refuses_costly_periods_and_windows_the_model_cannot_take(tmp_path):
    """Periods and rates bounded by what they cost; window_size by what the model takes (its
    max_frames W, 5 for the embedded default): refused when set, with the reason, and a
    start-up value fails configure with it."""
    listener = Listener()
    statuses = listener.collect(EstimatorStatus, "relocalize/status")
    params = {"localize_period_s": 1e-9, "window_size": 64, "cameras": ["cam0"]}
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params), tmp_path / "node.log")
    name = "/relocalize"
    try:
        assert listener.spin_until(lambda: "configure failed" in (
            statuses[-1].message if statuses else ""), 90), node.output()
        assert ("parameter localize_period_s must be 0 (off) or at least 0.05, got 1e-09: a "
                "shorter period wakes the node") in statuses[-1].message, statuses[-1].message
        assert get_state(listener, name) == "unconfigured" and node.alive()

        for value in (0.01, 1e-9):
            refused = set_parameter(listener, name, "localize_period_s", value)
            assert not refused.successful and "costing CPU while idle" in refused.reason, \
                refused.reason
        for value in (0.0, 0.05):  # off, and the fastest allowed
            assert set_parameter(listener, name, "localize_period_s", value).successful
        refused = set_parameter(listener, name, "tf_rate_hz", 1000.0)
        assert not refused.successful and "out of range" in refused.reason, refused.reason
        assert set_parameter(listener, name, "tf_rate_hz", 100.0).successful
        described = listener.call(DescribeParameters, f"{name}/describe_parameters",
                                  DescribeParameters.Request(names=["tf_rate_hz",
                                                                    "localize_period_s"]))
        rate, period = described.descriptors
        assert rate.floating_point_range[0].to_value == 100.0
        assert "faster re-sending only costs CPU" in rate.description
        assert period.additional_constraints.startswith("0 (off) or at least 0.05")

        # window_size 64 came from the command line: configure refuses it before loading the
        # model; set now, it is refused at once.
        assert not change_state(listener, name, Transition.TRANSITION_CONFIGURE)
        reason = ("window_size 64 exceeds what the embedded default g2g_reloc_mnv2.safetensors "
                  "takes: groups of at most 5 frames (its max_frames W)")
        assert listener.spin_until(lambda: reason in statuses[-1].message, 20), \
            statuses[-1].message
        refused = set_parameter(listener, name, "window_size", 6)
        assert not refused.successful and refused.reason == reason.replace("64", "6"), \
            refused.reason
        assert set_parameter(listener, name, "window_size", 5).successful
        # A fallback feature that does not exist is named when configure refuses it.
        assert set_parameter(listener, name, "verify_fallback_feature", "orb").successful
        assert not change_state(listener, name, Transition.TRANSITION_CONFIGURE)
        assert listener.spin_until(lambda: "fallback_feature must be empty (none) or one of "
                                   "('sift', 'aliked')" in statuses[-1].message
                                   and "got 'orb'" in statuses[-1].message, 30), \
            statuses[-1].message
        assert set_parameter(listener, name, "verify_fallback_feature", "").successful
        assert change_state(listener, name, Transition.TRANSITION_CONFIGURE)
        assert get_state(listener, name) == "inactive" and node.alive()
    finally:
        log = node.stop()
        listener.close()
    assert "Traceback" not in log, log[-3000:]


def test_parameter_value_helpers():
    from g2g_ros.parameters import descriptor, range_text, type_name

    assert type_name(3) == "an integer" and type_name(2.5) == "a double"
    assert type_name(["a"]) == "a string array" and type_name(True) == "a boolean"
    assert range_text(descriptor(1.0, "x")) == "finite"
    assert range_text(descriptor(5, "x", value_range=(1, 10))) == "[1, 10]"
    with pytest.raises(ValueError, match="outside its range"):
        descriptor(0, "x", value_range=(1, 10))
    assert Parameter  # the module imports rclpy's parameter API


def test_type_names_of_arrays():
    from g2g_ros.parameters import type_name, type_problem

    assert type_name([1]) == "an integer array" and type_name([]) == "an empty array"
    assert type_problem("cameras", [], ["cam0"]) is None  # the node checks emptiness itself
    assert type_problem("cameras", [1], ["cam0"]) == (
        "parameter cameras must be a string array, got [1] (an integer array)")


def test_relocalize_gate_needs_geometry_only_when_it_verifies():
    import dataclasses

    from g2g_ros.nodes.relocalize_params import RelocalizeParams, gate_config

    p = dataclasses.asdict(RelocalizeParams())
    assert p["verify"] and p["fix_needs_geometry"] and gate_config(p).geometric_fix
    # Without verification every candidate is G2G's: the rule would forbid every fix.
    assert not gate_config({**p, "verify": False}).geometric_fix
    assert not gate_config({**p, "fix_needs_geometry": False}).geometric_fix


def test_period_floor_and_model_window_checks(tmp_path):
    from g2g_ros.model_loading import model_max_frames, window_size_problem
    from g2g_ros.parameters import floor_problem

    assert "must be 0 (off) or at least 0.05, got 0.01" in floor_problem("p", 0.01, 0.05)
    assert floor_problem("p", 0.0, 0.05) is None and floor_problem("p", 0.05, 0.05) is None
    assert floor_problem("p", 1e-9, None) is None  # no floor declared
    assert model_max_frames("", "relocalization") == (
        5, "the embedded default g2g_reloc_mnv2.safetensors")
    # Not known before loading: configure says what is wrong with the file.
    assert model_max_frames(str(tmp_path / "missing.safetensors"), "relocalization")[0] is None
    assert window_size_problem(5, 5, "m") is None and window_size_problem(9, None, "m") is None
    assert window_size_problem(6, 5, "m") == ("window_size 6 exceeds what m takes: groups of "
                                              "at most 5 frames (its max_frames W)")
