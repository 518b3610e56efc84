"""The RViz2 view that ``rviz:=true`` opens: ``config/g2g.rviz`` fitted to a launch.

``config/g2g.rviz`` is written for ``rig:=sim`` in the root namespace. For a launch,
:func:`fitted_config` makes a copy with one image display per camera of the rig (the
``cameras`` of the parameter files, in the order they are given), the node topics under the
launch's namespace, and the fixed frame of the graph (``map`` where ``relocalize`` runs, else
``odom``). ``/initialpose`` stays absolute, as ``relocalize`` subscribes it.
"""

from __future__ import annotations

import copy
import pathlib
import tempfile
from typing import Dict, Iterable, List, Optional

import yaml

from g2g_ros.launch_graphs import Graph, file_parameters, node_fqn

CONFIG_NAME = "g2g.rviz"
IMAGE_CLASS = "rviz_default_plugins/Image"
RVIZ_PACKAGE = "rviz2"


class RvizMissing(RuntimeError):
    """``rviz:=true`` on a machine without rviz2."""


def rviz2_executable() -> str:
    """Path of the rviz2 executable (``<prefix>/lib/rviz2/rviz2``, as ``ros2 run`` finds it);
    :class:`RvizMissing` saying how to install it when ament does not know rviz2."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = get_package_prefix(RVIZ_PACKAGE)
    except (PackageNotFoundError, OSError) as exc:  # OSError: no AMENT_PREFIX_PATH at all
        raise RvizMissing(f"rviz:=true, but rviz2 is not installed in this ROS 2 environment "
                          f"({exc}); install ros-$ROS_DISTRO-rviz2, or launch with "
                          f"rviz:=false") from None
    exe = pathlib.Path(prefix) / "lib" / RVIZ_PACKAGE / RVIZ_PACKAGE
    if not exe.is_file():
        raise RvizMissing(f"rviz:=true, but the rviz2 package at {prefix} has no {exe}")
    return str(exe)


def rig_cameras(param_files: Iterable[str], graph: Graph, namespace: str) -> List[str]:
    """The ``cameras`` that the graph's nodes get from ``param_files``: the last file whose
    section for one of the graph's nodes sets them wins."""
    cameras: List[str] = []
    for path in param_files:
        data = yaml.safe_load(pathlib.Path(path).read_text()) or {}
        for spec in graph.nodes:
            params = file_parameters(data, node_fqn(namespace, spec.name))
            if params.get("cameras"):
                cameras = list(params["cameras"])
    return cameras


def _topic(display: Dict) -> Optional[Dict]:
    topic = display.get("Topic")
    return topic if isinstance(topic, dict) else None


def fitted_config(template: Dict, cameras: List[str], namespace: str, fixed_frame: str,
                  image_topic: str = "image_raw") -> Dict:
    """A copy of the parsed ``g2g.rviz`` for a launch (see the module docstring)."""
    config = copy.deepcopy(template)
    manager = config["Visualization Manager"]
    displays = manager["Displays"]
    images = [d for d in displays if d.get("Class") == IMAGE_CLASS]
    if not images:
        raise ValueError(f"{CONFIG_NAME} has no {IMAGE_CLASS} display to copy")
    prefix = "/" + namespace.strip("/") if namespace.strip("/") else ""
    out = []
    for display in displays:
        if display.get("Class") == IMAGE_CLASS:
            continue
        topic = _topic(display)
        if topic is not None:
            topic["Value"] = prefix + topic["Value"]
        out.append(display)
    for cam in cameras:
        image = copy.deepcopy(images[0])
        image["Name"] = cam
        image["Topic"]["Value"] = f"{prefix}/{cam}/{image_topic}"
        out.append(image)
    manager["Displays"] = out
    manager["Global Options"]["Fixed Frame"] = fixed_frame
    return config


def write_fitted_config(config_dir: pathlib.Path, graph: Graph, param_files: List[str],
                        namespace: str) -> str:
    """Write the fitted view of a launch to a temporary file; its path (for ``rviz2 -d``)."""
    template = yaml.safe_load((config_dir / CONFIG_NAME).read_text())
    fixed = "map" if any(n.name == "relocalize" for n in graph.nodes) else "odom"
    config = fitted_config(template, rig_cameras(param_files, graph, namespace), namespace,
                           fixed)
    with tempfile.NamedTemporaryFile("w", prefix="g2g_", suffix=".rviz", delete=False) as fh:
        yaml.safe_dump(config, fh, sort_keys=False)
    return fh.name
