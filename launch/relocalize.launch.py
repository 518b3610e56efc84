"""`ros2 launch g2g_ros relocalize.launch.py` -- the graph is described in g2g_ros.graphs.

Where the launch packages cannot be installed, `g2g-bringup relocalize`
starts the same graph from the same parameter files.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from g2g_ros.graphs import GRAPHS, PACKAGE, is_true, node_parameter_overrides

GRAPH = GRAPHS["relocalize"]


def _nodes(context):
    args = {a.name: LaunchConfiguration(a.name).perform(context) for a in GRAPH.arguments}
    share = get_package_share_directory(PACKAGE)
    params = [os.path.join(share, "config", args["rig"] + ".yaml")]
    if args["params_file"]:
        params.append(args["params_file"])
    actions = []
    for spec in GRAPH.nodes:
        if spec.condition and not is_true(args[spec.condition]):
            continue
        overrides = dict(node_parameter_overrides(spec, args))
        overrides["use_sim_time"] = is_true(args["use_sim_time"])
        actions.append(
            Node(
                package=PACKAGE,
                executable=spec.executable,
                name=spec.name,
                namespace=args["namespace"],
                parameters=params + [overrides],
                arguments=["--ros-args", "--log-level", args["log_level"]],
                output="screen",
            )
        )
    return actions


def generate_launch_description():
    declared = [
        DeclareLaunchArgument(a.name, default_value=a.default, description=a.description)
        for a in GRAPH.arguments
    ]
    return LaunchDescription(declared + [OpaqueFunction(function=_nodes)])
