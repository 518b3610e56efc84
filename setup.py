"""ament_python package g2g_ros; also installs the ROS-free library g2g_model.

`pip install -e .` works for development; `colcon build --base-paths . g2g_msgs` builds both
packages in a full ROS 2 workspace (colcon stops descending at the root package.xml).
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "g2g_ros"

CONSOLE_SCRIPTS = [
    # nodes (ros2 run g2g_ros <name>)
    "rig_odometry = g2g_ros.nodes.rig_odometry:main",
    "relocalize = g2g_ros.nodes.relocalize:main",
    "map_builder = g2g_ros.nodes.map_builder:main",
    # tools
    "g2g-bringup = g2g_ros.bringup:main",
    "g2g-model = g2g_model.model.cli:main",
    "g2g-convert = g2g_model.model.cli:convert_main",
    "g2g-weights = g2g_model.release.cli:main",
    "g2g-sim = g2g_model.data.sim.cli:main",
    "g2g-data = g2g_model.data.cli:main",
    "g2g-play-dataset = g2g_ros.dataset_publisher:main",
    "g2g-map = g2g_model.maps.cli:main",
    "g2g-covis = g2g_model.covisibility.cli:main",
    "g2g-bag = g2g_ros.bags.cli:main",
    "g2g-eval-bag = g2g_ros.bags.eval_bag:main",
    "g2g-train = g2g_model.training.cli:main",
    "g2g-eval = g2g_model.training.eval_cli:main",
]

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=["g2g_ros", "g2g_ros.*", "g2g_model", "g2g_model.*"]),
    package_data={"g2g_model": ["assets/*", "assets/**/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        ("share/" + PACKAGE + "/config", glob("config/*.yaml") + glob("config/*.xml")
         + glob("config/*.rviz")),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="G2G ROS maintainers",
    maintainer_email="maintainers@g2g-ros.org",
    description="G2G group-to-group pose estimation for ROS 2 (relocalization, rig odometry).",
    license="Apache-2.0",
    python_requires=">=3.10",
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
