"""`g2g-bringup GRAPH [arg:=value ...]`: start a node graph without `ros2 launch`.

The launch packages (`launch`, `launch_ros`) are not installable from PyPI, so this runner starts
the graphs of :mod:`g2g_ros.launch_graphs` -- the same nodes, parameter files and launch
arguments as `launch/*.launch.py` -- as child processes, forwards Ctrl-C / SIGTERM to them, and
stops the whole graph when one node exits. Used by `make demo` and by the integration tests.
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

from g2g_ros.launch_graphs import (
    GRAPHS, PACKAGE, Graph, is_true, node_parameter_overrides, params_file_warnings,
)
from g2g_ros.rviz_config import RvizMissing, rviz2_executable, write_fitted_config

LOG = logging.getLogger("g2g-bringup")

NODE_MODULES = {
    "rig_odometry": "g2g_ros.nodes.rig_odometry",
    "relocalize": "g2g_ros.nodes.relocalize",
    "map_builder": "g2g_ros.nodes.map_builder",
}


def config_dir() -> pathlib.Path:
    """Installed ``share/g2g_ros/config`` when available, else the source tree's ``config/``."""
    source = pathlib.Path(__file__).resolve().parents[1] / "config"
    if source.is_dir():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        return pathlib.Path(get_package_share_directory(PACKAGE)) / "config"
    except Exception:  # pragma: no cover - only without any install
        return source


def parse_launch_args(graph: Graph, items: List[str]) -> Dict[str, str]:
    """Parse ``name:=value`` items against the graph's declared arguments."""
    args = graph.argument_defaults()
    for item in items:
        if ":=" not in item:
            raise ValueError(f"launch arguments are name:=value, got {item!r}")
        name, value = item.split(":=", 1)
        if name not in args:
            raise ValueError(
                f"unknown launch argument {name!r} for graph {graph.name!r}; "
                f"declared: {sorted(args)}"
            )
        args[name] = value
    return args


def rig_params_file(rig: str) -> pathlib.Path:
    """The parameter preset ``config/<rig>.yaml`` (ValueError naming the known ones)."""
    rig_file = config_dir() / f"{rig}.yaml"
    if not rig_file.is_file():
        known = sorted(p.stem for p in config_dir().glob("*.yaml"))
        raise ValueError(f"no parameter file for rig {rig!r} ({rig_file}); known: {known}")
    return rig_file


def node_commands(graph: Graph, args: Dict[str, str]) -> List[List[str]]:
    """The command line of every node the graph starts with these arguments (and of rviz2
    with ``rviz:=true``; :class:`~g2g_ros.rviz_config.RvizMissing` without rviz2)."""
    params = [str(rig_params_file(args["rig"]))]
    if args.get("params_file"):
        if not pathlib.Path(args["params_file"]).is_file():
            raise ValueError(f"params_file {args['params_file']!r} does not exist")
        for warning in params_file_warnings(args["params_file"], graph, args["namespace"]):
            LOG.warning(warning)
        params.append(args["params_file"])
    commands = []
    for spec in graph.nodes:
        if spec.condition and not is_true(args[spec.condition]):
            continue
        cmd = [sys.executable, "-m", NODE_MODULES[spec.executable], "--ros-args",
               "-r", f"__node:={spec.name}", "--log-level", args["log_level"]]
        if args.get("namespace"):
            cmd += ["-r", f"__ns:=/{args['namespace'].strip('/')}"]
        for p in params:
            cmd += ["--params-file", p]
        overrides = node_parameter_overrides(spec, args)
        overrides.append(("use_sim_time", "true" if is_true(args["use_sim_time"]) else "false"))
        overrides.append(("autostart", "true" if is_true(args["autostart"]) else "false"))
        for name, value in overrides:
            cmd += ["-p", f"{name}:={value}"]
        commands.append(cmd)
    if is_true(args.get("rviz", "false")):
        exe = rviz2_executable()  # raises saying rviz2 is missing
        view = write_fitted_config(config_dir(), graph, params, args["namespace"])
        sim = "true" if is_true(args["use_sim_time"]) else "false"
        commands.append([exe, "-d", view, "--ros-args", "-p", f"use_sim_time:={sim}"])
    return commands


class GraphRunner:
    """Start the node processes of a graph and stop them together."""

    def __init__(self, commands: List[List[str]], env: Optional[dict] = None):
        self.commands = commands
        self.env = env
        self.procs: List[subprocess.Popen] = []

    def start(self) -> "GraphRunner":
        for cmd in self.commands:
            LOG.info("starting %s", " ".join(cmd[2:4]))
            self.procs.append(subprocess.Popen(cmd, env=self.env))
        return self

    def poll(self) -> Optional[int]:
        """Exit code of the first node that stopped, or None while all run."""
        for proc in self.procs:
            code = proc.poll()
            if code is not None:
                return code
        return None

    def stop(self, timeout: float = 10.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> "GraphRunner":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="g2g-bringup", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("graph", choices=sorted(GRAPHS))
    parser.add_argument("launch_args", nargs="*", help="name:=value launch arguments")
    parser.add_argument("--print", action="store_true", help="print the commands and exit")
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    graph = GRAPHS[opts.graph]
    try:
        commands = node_commands(graph, parse_launch_args(graph, opts.launch_args))
    except (ValueError, RvizMissing) as exc:
        parser.error(str(exc))
    if opts.print:
        for cmd in commands:
            print(" ".join(cmd))
        return 0
    runner = GraphRunner(commands, env=dict(os.environ)).start()
    stop = {"requested": False}

    def _on_signal(signum, _frame):
        stop["requested"] = True

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    code = None
    while not stop["requested"]:
        code = runner.poll()
        if code is not None:
            LOG.error("a node exited with code %s; stopping the graph", code)
            break
        time.sleep(0.2)
    runner.stop()
    return 0 if stop["requested"] else (code or 1)


if __name__ == "__main__":
    sys.exit(main())
