"""Timers of the nodes' status, diagnostics and TF re-sending.

They run on the steady clock: with use_sim_time a ROS-time timer stops whenever /clock stops, and
a node must keep reporting its health then. Their callbacks can never take the node down.
"""

from __future__ import annotations

from typing import Callable

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from g2g_ros.spinning import shutting_down


def steady_timer(node: Node, period_s: float, fn: Callable[[], None], what: str):
    """A steady-clock timer whose callback can never take the node down (errors are logged)."""
    return node.create_timer(period_s, guarded(node, what, fn),
                             clock=Clock(clock_type=ClockType.STEADY_TIME))


def guarded(node: Node, what: str, fn: Callable[[], None]) -> Callable[[], None]:
    """Wrap a timer callback so an unexpected error is logged instead of killing the node."""

    def run() -> None:
        try:
            fn()
        except Exception as exc:  # a status or TF timer must never take the node down
            if shutting_down(node):  # Ctrl-C: publishing on a shut-down context fails
                return
            node.get_logger().error(f"{what} failed: {exc!r}", throttle_duration_sec=5.0)

    return run
