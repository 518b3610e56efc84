"""`ros2 launch g2g_ros relocalize.launch.py` -- the graph is described in g2g_ros.launch_graphs.

Where the launch packages cannot be installed, `g2g-bringup relocalize` starts the same graph from
the same parameter files.
"""

from g2g_ros.launch_description import generate


def generate_launch_description():
    return generate("relocalize")
