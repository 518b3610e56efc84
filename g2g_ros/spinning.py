"""Running a node: the standard entry point (init, spin, clean shutdown) and the shutdown check."""

from __future__ import annotations

from rclpy.node import Node


def spin_node(node_class, args=None, threads: int = 2) -> None:
    """The standard node entry point: init, spin a multi-threaded executor, clean shutdown.

    Ctrl-C ends the node quietly with exit status 0. Under ``ros2 launch`` a node gets SIGINT
    twice (from the terminal's process group and forwarded by launch); the second one used to
    interrupt the teardown (exit -2), so further SIGINTs are ignored once shutdown began.
    """
    import signal

    import rclpy
    from rclpy._rclpy_pybind11 import RCLError
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    from g2g_ros.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before the executor's and the worker's threads allocate
    rclpy.init(args=args)
    node = None
    try:
        node = node_class()
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RCLError:
        # SIGINT shuts the context down from rclpy's signal handler; an executor that is
        # building its next wait set at that moment raises instead of returning. Only then is
        # it a clean shutdown.
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
