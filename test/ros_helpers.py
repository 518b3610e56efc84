"""Helpers for tests that run real nodes in real processes over real DDS."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Callable, List, Optional

import rclpy


class Listener:
    """An rclpy node in the test process with its own context and executor."""

    def __init__(self, name: str = "g2g_test_listener"):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._clients: dict = {}

    def collect(self, msg_type, topic: str, qos=10) -> List:
        box: List = []
        self.node.create_subscription(msg_type, topic, box.append, qos)
        return box

    def spin_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.05)
            if predicate():
                return True
        return False

    #: How long a new client spins after its service appeared, before its first request.
    #: ``service_is_ready`` means the server's request reader matched our request writer;
    #: the server's response writer may not yet know our response reader, and Fast DDS then
    #: drops the response after 100 ms ("failed to send response (timeout)" in the server's
    #: log: ros2/rmw_fastrtps#467). On a loaded 2-core machine discovery can take longer.
    SETTLE_S = 1.0

    def client(self, srv_type, name: str, timeout: float = 30.0):
        """A client of ``name``, created once per service and ready to be called (its service
        discovered both ways, :attr:`SETTLE_S`)."""
        key = (srv_type, name)
        if key not in self._clients:
            client = self.node.create_client(srv_type, name)
            if not self.spin_until(client.service_is_ready, timeout=timeout):
                self.node.destroy_client(client)
                raise AssertionError(f"service {name} never appeared")
            self.spin_until(lambda: False, timeout=self.SETTLE_S)
            self._clients[key] = client
        return self._clients[key]

    def call(self, srv_type, name: str, request, timeout: float = 60.0):
        future = self.client(srv_type, name).call_async(request)
        if not self.spin_until(future.done, timeout=timeout):
            raise AssertionError(f"no reply from {name} within {timeout} s")
        return future.result()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


class Proc:
    """A child process whose output is kept in a log file (shown when a test fails)."""

    def __init__(self, cmd: List[str], log_path, env: Optional[dict] = None):
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env or dict(os.environ))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: the nodes shut down cleanly
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
        return self.output()

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as fh:
            return fh.read()


def stop_all(listener: Listener, node: Proc, player: Optional[Proc] = None) -> str:
    """End of a node test: stop the player (if started) and the node, close the listener; the
    node's log."""
    if player is not None:
        player.stop()
    log = node.stop()
    listener.close()
    return log


def node_cmd(module: str, params: dict, params_file: Optional[str] = None) -> List[str]:
    cmd = [sys.executable, "-m", module, "--ros-args"]
    if params_file:
        cmd += ["--params-file", params_file]
    for key, value in params.items():
        if isinstance(value, (list, tuple)):
            value = "[" + ",".join(str(v) for v in value) + "]"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        cmd += ["-p", f"{key}:={value}"]
    return cmd


def player_cmd(path, *args: str) -> List[str]:
    return [sys.executable, "-m", "g2g_ros.dataset_publisher", str(path), *args]
