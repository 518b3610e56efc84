"""Running a node: the standard entry point (init, spin, clean shutdown), the shutdown check,
and a player's wait for its last messages to be acknowledged before it exits."""

from __future__ import annotations

import time
from typing import Callable, Iterable

from rclpy.node import Node


def spin_node(node_class, args=None, threads: int = 2) -> None:
    """The standard node entry point: init, spin a multi-threaded executor, clean shutdown.

    Ctrl-C ends the node quietly with exit status 0. Under ``ros2 launch`` a node gets SIGINT
    twice (from the terminal's process group and forwarded by launch); the second one used to
    interrupt the teardown (exit -2), so further SIGINTs are ignored once shutdown began.
    """
    import signal

    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    from g2g_ros.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before the executor's and the worker's threads allocate
    rclpy.init(args=args)
    node = None
    try:
        # The executor first: SIGINT shuts the context down, and an executor built after that
        # (the node's construction takes seconds) fails half-made, its __del__ then printing a
        # traceback at exit (seen when a test stopped a graph right after it came up).
        executor = MultiThreadedExecutor(num_threads=threads)
        node = node_class()
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RuntimeError:
        # SIGINT shuts the context down from rclpy's signal handler; an executor that is
        # building its next wait set at that moment raises (RCLError, a RuntimeError) instead
        # of returning, and so does a node still being built ("Context must be initialized").
        # Only then is it a clean shutdown.
        if rclpy.ok():
            raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def shutting_down(node: Node) -> bool:
    """True once the node's context is shut down (Ctrl-C): publishing fails then, and that is
    not an error worth reporting."""
    return not node.context.ok()


def wait_for_all_acked(publishers: Iterable, spin: Callable[[float], None],
                       timeout_s: float = 10.0) -> bool:
    """Until every subscriber has acknowledged every message of the reliable ``publishers`` (as
    ``ros2 bag play --wait-for-all-acked``), spinning with ``spin(0.0)`` between checks; False
    after ``timeout_s``. A player that exits right after its last message loses what a loaded
    subscriber has not received yet: a replay then ended a few frames short, or lost them all
    when the first sends had to be repaired."""
    from rclpy.duration import Duration

    end = time.monotonic() + timeout_s
    for pub in publishers:
        while not pub.wait_for_all_acked(Duration(seconds=0.05)):
            if time.monotonic() > end:
                return False
            spin(0.0)
    return True
