"""The nodes' entry point (``g2g_ros.spinning.spin_node``) ends quietly when SIGINT comes while
the node is still being built: rclpy's signal handler shuts the context down, and an executor
made after that failed half-made and printed a traceback at exit."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

ROOT = Path(__file__).resolve().parents[1]


def test_context_shut_down_while_the_node_is_built_ends_quietly():
    script = textwrap.dedent("""
        from rclpy.node import Node
        from g2g_ros.spinning import spin_node

        class SlowStart(Node):
            def __init__(self):
                super().__init__("slow_start")
                self.context.shutdown()  # what SIGINT does from rclpy's handler

        spin_node(SlowStart)
        """)
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr, run.stderr[-2000:]
