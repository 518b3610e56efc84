"""Managed (lifecycle) node base shared by the G2G nodes.

The standard ROS 2 state machine (``unconfigured -> inactive -> active``, ``finalized``) with its
services ``~/change_state``, ``~/get_state``, ``~/get_available_transitions`` comes from
:class:`rclpy.lifecycle.LifecycleNode`. This base maps the transitions onto four plain hooks a
node implements, and makes every transition safe:

* ``configure()``: read and validate parameters, load the model / map, create what lives while
  the node is configured (lifecycle publishers, services, TF listener, worker). Any exception
  makes the transition return FAILURE: the reason is logged and reported in the node's
  diagnostics (problem ``configuration``), what was half-created is released, and the node stays
  up in ``unconfigured`` so that it can be configured again, e.g. after ``ros2 param set``.
* ``activate()``: subscribe the inputs, start the timers. Lifecycle publishers are enabled by
  the base before the hook runs.
* ``deactivate()``: drain queued work; the node keeps its state (pose, map, buffers). The base
  then disables the lifecycle publishers, so nothing is published while inactive.
* ``cleanup()``: forget the state.

The hooks destroy nothing themselves: what ``configure()`` / ``activate()`` create goes through
:meth:`ManagedNode.owned` (:mod:`g2g_ros.owned_resources`), and the base destroys it, newest
first, before the ``deactivate()`` hook (made by ``activate()``) or the ``cleanup()`` hook (made
by ``configure()``), and on a failed configure / activate and at shutdown.

``on_shutdown`` runs ``deactivate`` / ``cleanup`` as needed. Status and ``/diagnostics`` are
ordinary publishers: a node reports its health (and why it is not configured) in every state.

Parameters declared with ``at_configure=True`` are read by ``configure()``; changing one is
refused while the node is configured (the change would silently not apply) and accepted while it
is unconfigured. ``autostart`` (default true) configures and activates the node at start-up, so
``ros2 launch``, ``g2g-bringup`` and scripts that expect a running node need no manager; with
``autostart:=false`` an external manager (``ros2 lifecycle set``, nav2's lifecycle manager)
drives it.
"""

from __future__ import annotations

import traceback
from typing import Any, Dict, List, Optional, Tuple

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from g2g_ros.diagnostics import NodeLogBridge, ProblemLog
from g2g_ros.owned_resources import OwnedResources
from g2g_ros.parameters import (declare_checked, declare_fields, descriptor, floor_problem,
                                floor_text, ints_as_doubles, read_fields, type_problem)
from g2g_ros.spinning import shutting_down
from g2g_ros.worker import Worker

AT_CONFIGURE_NOTE = ("read at configure; refused while the node is configured "
                     "(transition 'cleanup' first, then change it and 'configure')")


class ManagedNode(LifecycleNode):
    """A lifecycle node whose transitions call ``configure / activate / deactivate / cleanup``.

    Subclasses call :meth:`declare_params` with their parameter dataclass and
    :meth:`start_lifecycle` at the end of their constructor. ``self.p`` holds the parameter
    values by name, ``self.params`` as the dataclass (both re-read before every configure).
    """

    def __init__(self, node_name: str, **kwargs):
        super().__init__(node_name, **kwargs)
        # Module log lines (synchronizer, TF buffer, ...) go through this node's logger.
        self._log_bridge = NodeLogBridge(self).install()
        self.problems = ProblemLog()
        self.configured = False
        self.active = False
        self.lifecycle_state = "unconfigured"
        self.last_failure = ""  # why the last configure/activate failed, until one succeeds
        self.worker: Optional[Worker] = None
        self.resources = OwnedResources(self, lambda text: self.get_logger().error(text))
        self._until = "cleanup"  # what owned() defaults to: "deactivate" while activate() runs
        self.p: Dict[str, Any] = {}
        self._params_type = None  # the parameter dataclass of declare_params
        self.params: Any = None
        self._at_configure: List[str] = []
        self._doubles: List[str] = []
        self._defaults: Dict[str, Any] = {}
        self._floors: Dict[str, float] = {}  # name -> floor of a "0 = off" period
        #: Parameters whose command-line / file value was refused at start-up (the default
        #: was declared instead), with the reason; configure fails while any is left.
        self.param_problems: Dict[str, str] = {}
        self.add_pre_set_parameters_callback(ints_as_doubles(lambda: self._doubles))
        self._jump_handle = self._watch_time_jumps()
        self.autostart = self.declare("autostart", True,
                                      "configure and activate at start-up (false: wait for a "
                                      "lifecycle manager / ros2 lifecycle set)", fixed=True)
        self.add_on_set_parameters_callback(self._refuse_configure_time_changes)
        self.add_on_set_parameters_callback(self._check_types)
        self.add_post_set_parameters_callback(self._keep_values)

    # ------------------------------------------------------------------ parameters
    def declare(self, name: str, default: Any, description: str, at_configure: bool = False,
                fixed: bool = False, value_range: Optional[Tuple[Any, Any]] = None,
                zero_or_at_least: Optional[float] = None) -> Any:
        """Declare a parameter with a description and default; return its value.

        ``at_configure``: read by ``configure()``, settable only while unconfigured.
        ``fixed``: read-only after start-up (values from the command line / files only).
        ``value_range``: inclusive ``(low, high)`` of a number, declared in the descriptor and
        enforced on every set; doubles without one must still be finite (see
        :mod:`g2g_ros.parameters`). ``zero_or_at_least``: a floor for a period whose 0 means
        "off" (values in ``(0, floor)`` are refused with the reason). A refused start-up value
        is reported, not raised.
        """
        constraints = [AT_CONFIGURE_NOTE] if at_configure else []
        if zero_or_at_least is not None:
            self._floors[name] = zero_or_at_least
            constraints.insert(0, floor_text(zero_or_at_least))
        desc = descriptor(default, description, read_only=fixed,
                          constraints="; ".join(constraints), value_range=value_range)
        value, problem = declare_checked(self, name, default, desc, zero_or_at_least)
        if problem and fixed:  # cannot be set later: the default stays
            self.problems.report(f"parameter {name}", problem)
            self.get_logger().error(f"{problem}; using the default {default!r}")
        elif problem:
            self.param_problems[name] = problem
            self.problems.report("parameters", "; ".join(self.param_problems.values()))
            self.get_logger().error(f"{problem}; configure fails until it is set to a valid "
                                    f"value (the default is {default!r})")
        if isinstance(default, float):
            self._doubles.append(name)
        self._defaults[name] = default
        if at_configure:
            self._at_configure.append(name)
        self.p[name] = value
        return value

    def declare_params(self, params_type) -> None:
        """Declare every field of the node's parameter dataclass (:func:`g2g_ros.parameters.
        param` fields); ``self.params`` is then an instance of it, re-read at every configure
        (``self.p`` holds the same values by name)."""
        declare_fields(self, params_type)
        self._params_type = params_type
        self.params = read_fields(self.p, params_type)

    def _refuse_configure_time_changes(self, params) -> SetParametersResult:
        if self.configured:
            for p in params:
                if p.name in self._at_configure:
                    return SetParametersResult(
                        successful=False,
                        reason=f"parameter {p.name} is {AT_CONFIGURE_NOTE}; the node is "
                               f"{self.lifecycle_state}")
        return SetParametersResult(successful=True)

    def _check_types(self, params) -> SetParametersResult:
        """Refuse another type than the default's, and a period below its floor."""
        for p in params:
            if p.name in self._defaults:
                problem = (type_problem(p.name, p.value, self._defaults[p.name])
                           or floor_problem(p.name, p.value, self._floors.get(p.name)))
                if problem:
                    return SetParametersResult(successful=False, reason=problem)
        return SetParametersResult(successful=True)

    def _keep_values(self, params) -> None:
        # After a successful set (validation callbacks run before, in any order).
        for p in params:
            if p.name in self.p:
                self.p[p.name] = p.value
            if self.param_problems.pop(p.name, None) is not None and not self.param_problems:
                self.problems.clear("parameters")

    def _read_parameters(self) -> None:
        if self.param_problems:
            raise ValueError("; ".join(self.param_problems.values()))
        for name in list(self.p):
            self.p[name] = self.get_parameter(name).value
        if self._params_type is not None:
            self.params = read_fields(self.p, self._params_type)

    # ------------------------------------------------------------------ resources
    def owned(self, resource: Any, until: Optional[str] = None, destroy=None) -> Any:
        """Record ``resource`` (returned) for the base to destroy at ``until``: ``"cleanup"``
        (the default in ``configure()``) or ``"deactivate"`` (the default in ``activate()``).
        ``destroy``: a callable doing it, else it goes by the resource's kind
        (:func:`g2g_ros.owned_resources.destroyer`)."""
        return self.resources.add(resource, until or self._until, destroy)

    def _end(self, until: str, hook) -> None:
        self.resources.release(until)  # each destroy guarded and logged
        self._release(hook)

    # ------------------------------------------------------------------ hooks
    def configure(self) -> None:
        """Read/validate parameters and load resources; raise with the reason on failure."""

    def activate(self) -> None:
        """Subscribe inputs and start timers."""

    def deactivate(self) -> None:
        """After the base destroyed what activate() owned: drain work, keep the state."""

    def cleanup(self) -> None:
        """After the base destroyed what configure() owned: forget the state (must tolerate a
        half-done configure)."""

    # ------------------------------------------------------------------ start-up
    def start_lifecycle(self) -> None:
        """Configure and activate now when ``autostart`` is true (end of the constructor)."""
        if not self.autostart:
            self.get_logger().info("autostart is false: unconfigured, waiting for "
                                   "~/change_state (e.g. ros2 lifecycle set)")
            return
        if self.trigger_configure() == TransitionCallbackReturn.SUCCESS:
            self.trigger_activate()

    # ------------------------------------------------------------------ transitions
    def _failed(self, what: str, exc: BaseException) -> None:
        message = str(exc) or repr(exc)
        self.last_failure = f"{what} failed: {message}"
        self.problems.report("configuration" if what == "configure" else what,
                             f"{what} failed: {message}")
        if isinstance(exc, (ValueError, OSError, KeyError)):
            self.get_logger().error(f"{what} failed: {message}")
        else:  # a programming error: keep the traceback
            self.get_logger().error(f"{what} failed: {exc!r}\n{traceback.format_exc()}")

    def _release(self, hook) -> None:
        try:
            hook()
        except Exception as exc:  # releasing must not hide the original failure
            self.get_logger().error(f"{hook.__name__} failed: {exc!r}")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._read_parameters()
            self.configure()
        except Exception as exc:
            self._failed("configure", exc)
            self._end("cleanup", self.cleanup)
            return TransitionCallbackReturn.FAILURE
        self.configured = True
        self.lifecycle_state = "inactive"
        self.last_failure = ""
        self.problems.clear("configuration")
        self.get_logger().info("configured (inactive)")
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        super().on_activate(state)  # enables the lifecycle publishers
        try:
            self._until = "deactivate"
            self.activate()
        except Exception as exc:
            self._failed("activate", exc)
            self._end("deactivate", self.deactivate)
            super().on_deactivate(state)
            return TransitionCallbackReturn.FAILURE
        finally:
            self._until = "cleanup"

        self.active = True
        self.lifecycle_state = "active"
        self.last_failure = ""
        self.problems.clear("activate")
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = False
        self._end("deactivate", self.deactivate)
        self.lifecycle_state = "inactive"
        self.get_logger().info("deactivated (inactive): outputs stopped, state kept")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._end("cleanup", self.cleanup)
        self.configured = False
        self.lifecycle_state = "unconfigured"
        self.get_logger().info("cleaned up (unconfigured)")
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._shut_down()
        self.get_logger().info("shut down (finalized)")
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        # Reached only when a transition callback raised past the guards above: release
        # everything and go back to unconfigured (the node stays up).
        self._shut_down()
        self.lifecycle_state = "unconfigured"
        self.problems.report("lifecycle", f"error during a transition from {state.label}")
        return TransitionCallbackReturn.SUCCESS

    def _shut_down(self) -> None:
        if self.active:
            self.active = False
            self._end("deactivate", self.deactivate)
            super().on_deactivate(None)
        if self.configured:
            self.configured = False
            self._end("cleanup", self.cleanup)
        self.lifecycle_state = "finalized"

    # ------------------------------------------------------------------ time and bad input
    def _watch_time_jumps(self):
        """Call :meth:`reset_time_buffers` when the ROS time jumps back (a bag played again,
        ``/clock`` restarted): stamps older than those already seen would otherwise be
        rejected as out of order for ever."""
        from rclpy.clock import JumpThreshold
        from rclpy.duration import Duration

        threshold = JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1),
                                  on_clock_change=False)
        return self.get_clock().create_jump_callback(threshold, post_callback=self._on_time_jump)

    def _on_time_jump(self, jump) -> None:
        back_s = -jump.delta.nanoseconds * 1e-9
        if back_s <= 0 or not self.configured:
            return
        self.get_logger().warning(f"ROS time jumped back by {back_s:.3f} s (bag played again?): "
                                  "time-keyed buffers cleared, state kept")
        try:
            self.reset_time_buffers()
        except Exception as exc:  # runs in the /clock callback: never raise into rclpy
            self.get_logger().error(f"reset after the time jump failed: {exc!r}")

    def reset_time_buffers(self) -> None:
        """Forget what is keyed by time (synchronizer, TF, stamp checks, queued work), keep the
        state (pose, map, keyframes). Called on a jump back of the ROS time and by
        ``~/reset``; nodes override it."""

    def report_quiet_cameras(self, seconds: float) -> None:
        """Report (:meth:`report_input`) every camera of ``self.inputs`` that sent no image for
        ``seconds`` (one that never sent any: once the node has been active that long);
        nothing while inactive."""
        if self.active and getattr(self, "inputs", None) is not None:
            for cam, age in self.inputs.silent(seconds).items():
                self.report_input(f"camera {cam}", f"no images received in {seconds:.1f} s"
                                  if age is None else f"no images for {age:.1f} s")

    def report_input(self, key: str, message: str) -> None:
        """Bad input: shown in ``~/status`` / ``/diagnostics`` (problem ``key``) and logged
        through the node's logger as a warning, at most once per key every
        ``ProblemLog.log_every_s`` (with the count since the last line)."""
        repeats = self.problems.report(key, message)
        if repeats is not None:
            more = f" ({repeats} more since the last report)" if repeats else ""
            self.get_logger().warning(f"{key}: {message}{more}")

    # ------------------------------------------------------------------ helpers
    def lifecycle_text(self) -> str:
        """The lifecycle state for status messages, with the reason of the last failure."""
        text = self.lifecycle_state
        if self.lifecycle_state == "inactive":
            text += " (lifecycle: outputs stopped, state kept)"
        if self.last_failure:
            text += f" ({self.last_failure})"
        return text

    def lifecycle_level(self, level: int) -> int:
        """Diagnostics level: an active node keeps ``level``; one that is not active is WARN
        when a manager keeps it so, ERROR when its configure/activate failed."""
        from diagnostic_msgs.msg import DiagnosticStatus

        if self.active:
            return level
        return DiagnosticStatus.ERROR if self.last_failure else DiagnosticStatus.WARN

    def jobs_dropped(self, kinds=None) -> int:
        """Jobs the worker dropped (queue full, discarded), of ``kinds`` (all when None)."""
        if self.worker is None:
            return 0
        return sum(n for kind, n in self.worker.dropped.items()
                   if kinds is None or kind in kinds)

    def start_worker(self, name: str, maxlen: int, on_error) -> None:
        """The inference worker lives while the node is configured (services use it too)."""
        if self.worker is None:
            def report(exc: BaseException) -> None:
                if not shutting_down(self):  # Ctrl-C: a failed publish is no input error
                    on_error(exc)

            self.worker = self.owned(Worker(name, maxlen=maxlen, on_error=report),
                                     destroy=self.stop_worker)

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def destroy_node(self):
        # Process exit (Ctrl-C): stop the worker thread; the entities go with the node.
        self.stop_worker()
        self._log_bridge.remove()
        self._jump_handle.unregister()
        return super().destroy_node()
