"""`ros2 launch g2g_ros rig_odometry.launch.py` -- the graph is described in g2g_ros.launch_graphs.

Where the launch packages cannot be installed, `g2g-bringup rig_odometry` starts the same
graph from the same parameter files.
"""

from g2g_ros.launch_description import generate


def generate_launch_description():
    return generate("rig_odometry")
