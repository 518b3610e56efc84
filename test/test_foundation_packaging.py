"""Both packages are well-formed ROS 2 packages and the tree is lint-clean."""

import pathlib
import subprocess
import sys

import pytest
from catkin_pkg.package import parse_package

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_BIN = pathlib.Path(sys.executable).parent


def test_package_xml_of_g2g_ros_parses():
    pkg = parse_package(ROOT / "package.xml")
    assert pkg.name == "g2g_ros" and pkg.package_format == 3
    assert pkg.get_build_type() == "ament_python"
    exec_deps = {d.name for d in pkg.exec_depends}
    assert {"rclpy", "g2g_msgs", "sensor_msgs", "tf2_msgs", "nav_msgs"} <= exec_deps


def test_package_xml_of_g2g_msgs_parses():
    pkg = parse_package(ROOT / "g2g_msgs" / "package.xml")
    assert pkg.name == "g2g_msgs" and pkg.package_format == 3
    assert pkg.get_build_type() == "ament_cmake"
    assert "rosidl_interface_packages" in {g.name for g in pkg.member_of_groups}
    interfaces = sorted(p.name for p in (ROOT / "g2g_msgs").glob("*/*.*"))
    cmake = (ROOT / "g2g_msgs" / "CMakeLists.txt").read_text()
    for name in interfaces:  # every interface file is actually generated
        assert name in cmake, f"{name} is not listed in g2g_msgs/CMakeLists.txt"


def test_colcon_lists_both_packages():
    out = subprocess.run(
        [str(VENV_BIN / "colcon"), "list", "--base-paths", ".", "g2g_msgs"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line.strip()}
    assert rows.get("g2g_ros") == "(ros.ament_python)", out
    assert rows.get("g2g_msgs") == "(ros.ament_cmake)", out


def test_setup_installs_launch_config_and_entry_points():
    setup_py = (ROOT / "setup.py").read_text()
    assert '"share/" + PACKAGE + "/launch"' in setup_py
    cfg = (ROOT / "setup.cfg").read_text()
    assert "script_dir=$base/lib/g2g_ros" in cfg and "install_scripts=$base/lib/g2g_ros" in cfg
    assert (ROOT / "resource" / "g2g_ros").exists()


def test_g2g_model_imports_without_ros():
    # A fresh interpreter in which importing rclpy would fail: g2g_model must not need it.
    code = (
        "import sys; sys.modules['rclpy'] = None\n"
        "import importlib, pkgutil, g2g_model\n"
        "for m in pkgutil.walk_packages(g2g_model.__path__, 'g2g_model.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr


@pytest.mark.timeout(300)
def test_flake8_clean():
    res = subprocess.run([sys.executable, "-m", "flake8"], cwd=ROOT, capture_output=True,
                         text=True, timeout=280)
    assert res.returncode == 0, "flake8 found problems:\n" + res.stdout + res.stderr


# Every dependency key of the package.xml files, checked against ros/rosdistro at 8468e88
# (2026-08-22): ROS packages released in kilted/distribution.yaml, system keys defined in
# rosdep/base.yaml or rosdep/python.yaml. A key that is not here must be checked there first
# (`rosdep resolve KEY`); a Python package without a key goes to
# requirements/no_rosdep_key.txt instead.
ROSDISTRO_KILTED_PACKAGES = {
    "rclpy", "lifecycle_msgs", "builtin_interfaces", "std_msgs", "std_srvs", "sensor_msgs",
    "geometry_msgs", "nav_msgs", "diagnostic_msgs", "rosgraph_msgs", "tf2_msgs",
    "visualization_msgs", "launch", "launch_ros", "ament_flake8", "ament_cmake",
    "rosidl_default_generators", "rosidl_default_runtime"}
ROSDEP_SYSTEM_KEYS = {
    "python3-numpy", "python3-scipy", "python3-yaml", "python3-opencv", "python3-tqdm",
    "python3-matplotlib", "python3-torch", "python3-rosbags-pip", "python3-skimage",
    "python3-pytest", "python3-pytest-timeout", "python3-catkin-pkg"}


def test_every_package_xml_dependency_is_a_resolvable_rosdep_key():
    workspace = {"g2g_ros", "g2g_msgs"}
    for path in (ROOT / "package.xml", ROOT / "g2g_msgs" / "package.xml"):
        pkg = parse_package(path)
        deps = {d.name for d in pkg.build_depends + pkg.buildtool_depends + pkg.exec_depends
                + pkg.test_depends + pkg.build_export_depends}
        unknown = deps - workspace - ROSDISTRO_KILTED_PACKAGES - ROSDEP_SYSTEM_KEYS
        assert not unknown, f"{path.name}: not rosdep keys {sorted(unknown)}"


def test_pip_only_dependencies_are_documented():
    lines = (ROOT / "requirements" / "no_rosdep_key.txt").read_text().splitlines()
    names = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(("#", "-"))]
    pinned = (ROOT / "requirements" / "python.txt").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "requirements/no_rosdep_key.txt" in readme
    for name in names:
        assert f"\n{name}==" in "\n" + pinned, f"{name} is not pinned in python.txt"
