"""Builds a ROS 2 LaunchDescription for a graph of :mod:`g2g_ros.launch_graphs`.

Imported only by ``launch/*.launch.py`` on a full ROS 2 install (the launch packages are not
installable here; ``g2g-bringup`` starts the same graphs).

The nodes are managed (lifecycle) nodes, started with ``launch_ros.actions.LifecycleNode`` so
that their state transitions are visible to launch event handlers. With the launch argument
``autostart:=true`` (default) each node configures and activates itself (its ``autostart``
parameter); with ``autostart:=false`` they wait, unconfigured, for a lifecycle manager.
With ``rviz:=true`` rviz2 starts too, with ``config/g2g.rviz`` fitted to the launch
(:mod:`g2g_ros.rviz_config`); the launch fails saying so if rviz2 is not installed.

The parameter files key their sections ``/**/<node>``
(:func:`g2g_ros.launch_graphs.params_key`), so they apply under any ``namespace``; a user
``params_file`` section that matches no node of the graph is warned about.
"""

from __future__ import annotations

import logging
import os
import pathlib

from g2g_ros.launch_graphs import (
    GRAPHS, PACKAGE, is_true, node_parameter_overrides, params_file_warnings,
)

LOG = logging.getLogger("g2g_ros.launch")


def generate(graph_name: str):
    from ament_index_python.packages import get_package_share_directory
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import LifecycleNode, Node

    from g2g_ros.rviz_config import RVIZ_PACKAGE, rviz2_executable, write_fitted_config

    graph = GRAPHS[graph_name]

    def nodes(context):
        args = {a.name: LaunchConfiguration(a.name).perform(context) for a in graph.arguments}
        share = get_package_share_directory(PACKAGE)
        params = [os.path.join(share, "config", args["rig"] + ".yaml")]
        if args["params_file"]:
            for warning in params_file_warnings(args["params_file"], graph, args["namespace"]):
                LOG.warning(warning)
            params.append(args["params_file"])
        actions = []
        for spec in graph.nodes:
            if spec.condition and not is_true(args[spec.condition]):
                continue
            overrides = dict(node_parameter_overrides(spec, args))
            overrides["use_sim_time"] = is_true(args["use_sim_time"])
            overrides["autostart"] = is_true(args["autostart"])
            actions.append(LifecycleNode(
                package=PACKAGE, executable=spec.executable, name=spec.name,
                namespace=args["namespace"], parameters=params + [overrides],
                arguments=["--ros-args", "--log-level", args["log_level"]], output="screen",
            ))
        if is_true(args["rviz"]):
            rviz2_executable()  # raises saying rviz2 is missing
            view = write_fitted_config(pathlib.Path(share) / "config", graph, params,
                                       args["namespace"])
            actions.append(Node(package=RVIZ_PACKAGE, executable=RVIZ_PACKAGE, name="rviz2",
                                arguments=["-d", view], output="screen",
                                parameters=[{"use_sim_time": is_true(args["use_sim_time"])}]))
        return actions

    declared = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
                for a in graph.arguments]
    return LaunchDescription(declared + [OpaqueFunction(function=nodes)])
