"""What an evaluation replay runs with, from ``g2g-eval-bag``'s flags (the demo's too).

:class:`ReplaySetup` is what differs between replays of one bag: node parameters, rig
odometry beside relocalize, an operator's initial pose, the nodes' log level. ``g2g-eval-bag``
builds it from its flags with :func:`setup_from_args`, and ``make demo`` passes its own flags
(:data:`g2g_ros.demo.DEMO_EVAL_FLAGS`) through the same parser, so the demo's evaluation is a
command line a user can run. :func:`checked_parameters` writes the parameter file the nodes get
after the rig preset and checks the merged result against the bag's cameras.

* ``--params-file FILE`` (repeatable): a ROS 2 parameter file keyed like ``config/sim.yaml``
  (``/**/relocalize: {ros__parameters: {...}}``), applied after the rig preset and the
  evaluation's own parameters; ``-p NODE.PARAM:=VALUE`` (repeatable) after the files, the
  value read as YAML as ``ros2 param set`` does (``0.5`` a double, ``[cam0]`` a list,
  ``true`` a boolean). Unknown nodes and parameters are refused with the known ones.
* ``--initial-pose X Y Z YAW_DEG``: ``map_T_base_link`` (z-up map frame, roll = pitch = 0)
  at the bag's first image; ``--initial-pose-from-bag OFFSET_M YAW_DEG``: the bag's ground
  truth at the first image moved ``OFFSET_M`` along the body's x axis and turned ``YAW_DEG``
  about its z axis (the map frame taken to be the ground truth's world, as for a map built
  from the same dataset); sent on ``/initialpose`` once the nodes are up.
* ``--domain-id N``: the DDS domain of the replay's own graph (player, nodes, recorder); by
  default a private one no other replay holds, not the inherited ``ROS_DOMAIN_ID``
  (:mod:`g2g_ros.bags.domains`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from g2g_ros.bags.bag_reader import BagError, iter_messages, open_bag
from g2g_ros.bags.domains import PRIVATE_DOMAINS
from g2g_ros.bags.rig_check import bag_cameras, check_rig
from g2g_ros.launch_graphs import (GRAPHS, file_parameters, node_fqn, node_parameters,
                                   params_key, section_matches)

LOG = logging.getLogger(__name__)

# Each node's parameter dataclass (g2g_ros.parameters), and what every node declares besides.
PARAMETER_CLASSES = {"relocalize": "g2g_ros.nodes.relocalize_params:RelocalizeParams",
                     "rig_odometry": "g2g_ros.nodes.rig_odometry_params:RigOdometryParams"}
COMMON_PARAMETERS = ("use_sim_time", "autostart")


@dataclass
class ReplaySetup:
    """What differs between evaluation replays (module docstring).

    ``node_params``: node name -> parameters applied last (after the rig preset and the
    evaluation's own). ``with_odometry``: the relocalize graph also runs rig_odometry, which is
    evaluated on its ``odometry`` output; its TF is off, so the bag's ``odom -> base_link``
    stays relocalize's odometry input, and each group waits for both nodes.
    ``initial_pose``: ``(stamp ns, map_T_base)`` sent on ``/initialpose`` once the nodes are up,
    before the replay, as an operator does in RViz. ``log_level``: the nodes' (launch
    argument).
    """

    node_params: Dict[str, Dict[str, object]] = field(default_factory=dict)
    with_odometry: bool = False
    initial_pose: Optional[Tuple[int, np.ndarray]] = None
    log_level: str = ""
    domain_id: Optional[int] = None


def graph_nodes(graph: str, with_odometry: bool) -> List[str]:
    """The nodes an evaluation replay of ``graph`` starts."""
    return [n.name for n in GRAPHS[graph].nodes
            if not n.condition or (n.condition == "with_odometry" and with_odometry)]


def _check_names(node: str, names, nodes: Sequence[str], where: str) -> None:
    if node not in nodes:
        raise ValueError(f"{where}: no node {node!r} runs in this replay (nodes: {list(nodes)}"
                         f"; rig_odometry beside relocalize needs --with-odometry)")
    module, cls = PARAMETER_CLASSES[node].split(":")
    known = {f.name for f in dataclasses.fields(getattr(importlib.import_module(module), cls))}
    unknown = sorted(set(names) - known - set(COMMON_PARAMETERS))
    if unknown:
        raise ValueError(f"{where}: {node} has no parameters {unknown} (see docs/PARAMETERS.md "
                         f"or ros2 param list)")


def parse_param(item: str) -> Tuple[str, str, object]:
    """``NODE.PARAM:=VALUE`` -> ``(node, param, value)``; the value read as YAML."""
    target, sep, text = item.partition(":=")
    node, dot, name = target.partition(".")
    if not sep or not dot or not node or not name:
        raise ValueError(f"-p takes NODE.PARAM:=VALUE (e.g. relocalize.localize_period_s:=0.5),"
                         f" got {item!r}")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError as exc:
        raise ValueError(f"-p {item!r}: the value is not YAML: {exc}") from None
    return node, name, value


def params_file_values(path: str, nodes: Sequence[str]) -> Dict[str, Dict[str, object]]:
    """Node -> the parameters the ROS 2 parameter file ``path`` gives it (root namespace);
    sections that match no node of the replay are logged and ignored."""
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--params-file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--params-file {path}: no node sections (expected e.g. "
                         f"'/**/relocalize: {{ros__parameters: {{...}}}}')")
    unmatched = [str(key) for key in data
                 if not any(section_matches(str(key), node_fqn("", n)) for n in nodes)]
    for key in unmatched:
        LOG.warning("--params-file %s: section %r matches no node of this replay %s; ignored",
                    path, key, list(nodes))
    out = {node: file_parameters(data, node_fqn("", node)) for node in nodes}
    return {node: values for node, values in out.items() if values}


def node_params_from(params_files: Sequence[str], params: Sequence[str],
                     nodes: Sequence[str]) -> Dict[str, Dict[str, object]]:
    """Node -> parameters from ``--params-file`` files (in order) and then ``-p`` items,
    checked against the nodes' declared parameters."""
    merged: Dict[str, Dict[str, object]] = {}
    for path in params_files:
        for node, values in params_file_values(path, nodes).items():
            _check_names(node, values, nodes, f"--params-file {path}")
            merged.setdefault(node, {}).update(values)
    for item in params:
        node, name, value = parse_param(item)
        _check_names(node, [name], nodes, f"-p {item}")
        merged.setdefault(node, {})[name] = value
    return merged


def first_image_stamp(bag) -> int:
    """The header stamp (ns) of the bag's first image."""
    from g2g_ros.bags.player import IMAGE_TYPES
    from g2g_ros.conversions import header_ns

    with open_bag(bag) as reader:
        topics = [c.topic for c in reader.connections if c.msgtype in IMAGE_TYPES]
        for _, msgtype, _, raw in iter_messages(reader, topics, str(bag)):
            return header_ns(reader.deserialize(raw, msgtype).header)
    raise BagError(f"bag {bag} has no images")


def yaw_pose(x: float, y: float, z: float, yaw_deg: float) -> np.ndarray:
    """The pose at ``(x, y, z)`` turned ``yaw_deg`` about z."""
    from g2g_model.geometry import axis_angle_to_matrix, make_pose

    return make_pose(axis_angle_to_matrix([0.0, 0.0, np.radians(yaw_deg)]), [x, y, z])


def initial_pose_from_bag(bag, offset_m: float, yaw_deg: float) -> Tuple[int, np.ndarray]:
    """``(stamp, map_T_base)``: the ground truth at the first image, moved ``offset_m`` along
    its x axis and turned ``yaw_deg`` about its z axis (what an operator clicks in RViz)."""
    from g2g_ros.bags.evaluation import load_ground_truth

    stamp = first_image_stamp(bag)
    truth = load_ground_truth(bag).at(stamp)
    if truth is None:
        raise BagError(f"bag {bag}: no ground truth at the first image ({stamp} ns) for "
                       f"--initial-pose-from-bag; give --initial-pose X Y Z YAW_DEG")
    return stamp, truth @ yaw_pose(offset_m, 0.0, 0.0, yaw_deg)


def add_setup_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of :func:`setup_from_args` (module docstring)."""
    parser.add_argument("--params-file", action="append", default=[], metavar="FILE",
                        help="ROS 2 parameter file keyed like config/sim.yaml, applied after "
                             "the rig preset and the evaluation's own parameters (repeatable)")
    parser.add_argument("-p", "--param", action="append", default=[],
                        metavar="NODE.PARAM:=VALUE",
                        help="a node parameter, applied last; the value is YAML as for ros2 "
                             "param (e.g. -p relocalize.localize_period_s:=0.5, "
                             "-p rig_odometry.cameras:=[cam0]); repeatable")
    parser.add_argument("--with-odometry", action="store_true",
                        help="--graph relocalize: also run rig_odometry (evaluated on its "
                             "odometry output; the bag's odom -> base_link stays the input)")
    pose = parser.add_mutually_exclusive_group()
    pose.add_argument("--initial-pose", type=float, nargs=4, metavar=("X", "Y", "Z", "YAW_DEG"),
                      help="operator's initial pose map_T_base_link (z-up map, roll = pitch "
                           "= 0) at the first image, sent on /initialpose before the replay")
    pose.add_argument("--initial-pose-from-bag", type=float, nargs=2,
                      metavar=("OFFSET_M", "YAW_DEG"),
                      help="initial pose: the bag's ground truth at the first image, moved "
                           "OFFSET_M along the body x axis and turned YAW_DEG about z (the "
                           "map frame being the ground truth's world)")
    parser.add_argument("--log-level", default="", help="the nodes' ROS log level")
    parser.add_argument("--domain-id", type=int, default=None, metavar="N",
                        help="DDS domain of the replay's graph (default: a private one, "
                             f"{PRIVATE_DOMAINS.start}-{PRIVATE_DOMAINS.stop - 1}, that no "
                             "other replay holds, discovery limited to this machine)")


def setup_from_args(opts: argparse.Namespace, bag, graph: str) -> ReplaySetup:
    """The :class:`ReplaySetup` that the flags of :func:`add_setup_arguments` describe."""
    if opts.with_odometry and graph != "relocalize":
        raise ValueError("--with-odometry is for --graph relocalize (rig_odometry runs anyway)")
    nodes = graph_nodes(graph, opts.with_odometry)
    pose = None
    if opts.initial_pose is not None:
        x, y, z, yaw = opts.initial_pose
        pose = (first_image_stamp(bag), yaw_pose(x, y, z, yaw))
    elif opts.initial_pose_from_bag is not None:
        pose = initial_pose_from_bag(bag, *opts.initial_pose_from_bag)
    domain = getattr(opts, "domain_id", None)
    if domain is not None and not 0 <= domain <= 232:
        raise ValueError(f"--domain-id must be in 0-232 (DDS), got {domain}")
    return ReplaySetup(node_params_from(opts.params_file, opts.param, nodes),
                       opts.with_odometry, pose, opts.log_level, domain)


def _params_file(path: Path, cams: Sequence[str], compressed: bool, setup: ReplaySetup,
                 preset: Path, quiet_s: Optional[float] = None) -> Path:
    """The evaluation's parameter file (after the rig ``preset``): the bag's cameras (all of
    them needed by rig odometry, ``min_cameras: 0``), the preset's ``reloc_camera`` when the
    bag has it (else the bag's first camera), then ``setup.node_params``. ``quiet_s`` (the
    replay's wait per group): how long the cameras may stay quiet before the nodes report them
    (``stale_after_s``, ``lost_after_s``): the player holds the next group until the nodes
    have answered, so images pause for as long as a node works on one, not because a camera
    stopped."""
    def common():  # fresh objects per node: rcl's YAML parser rejects aliases
        # fp32 as g2g-eval: on bf16-capable CPUs "auto" would give other numbers.
        return {"cameras": list(cams), "sensor_qos_reliability": "reliable",
                "use_compressed": bool(compressed), "precision": "fp32"}

    reloc = node_parameters([preset], "relocalize").get("reloc_camera")
    params = {"rig_odometry": dict(common(), min_cameras=0),
              # Stamp-paced localization, and a generous wait for the odometry (TF) at an image
              # stamp: on a loaded machine it can lag the image by more than the live 0.5 s,
              # and a frame dropped for that would change the results.
              "relocalize": dict(common(), reloc_camera=reloc if reloc in cams else cams[0],
                                 localize_period_s=1.0, localize_pacing="stamps",
                                 tf_wait_s=5.0)}
    if setup.with_odometry:
        params["rig_odometry"]["publish_tf"] = False
    if quiet_s is not None:   # raised to the wait, never lowered below the preset's
        from g2g_ros.nodes.relocalize_params import RelocalizeParams
        from g2g_ros.nodes.rig_odometry_params import RigOdometryParams

        for node, name, defaults in (("relocalize", "stale_after_s", RelocalizeParams),
                                     ("rig_odometry", "lost_after_s", RigOdometryParams)):
            floor = node_parameters([preset], node).get(name, getattr(defaults, name))
            params[node][name] = min(max(float(quiet_s), float(floor)), 3600.0)
    for node, extra in setup.node_params.items():
        params[node].update(extra)
    path.write_text(yaml.safe_dump({params_key(node): {"ros__parameters": values}
                                    for node, values in params.items()}))
    return path


def checked_parameters(bag: Path, graph: str, out_dir: Path, rig: str, setup: ReplaySetup,
                       wait_timeout: Optional[float] = None
                       ) -> Tuple[Path, Dict[str, Dict[str, object]]]:
    """Write the evaluation's parameter file; ``(its path, node -> the parameters the node
    will run with)``, after checking that the bag has every camera they use
    (:class:`~g2g_ros.bags.rig_check.RigMismatch` naming the missing ones). ``wait_timeout``:
    the replay's wait per group (``_params_file``'s ``quiet_s``)."""
    from g2g_ros.bringup import rig_params_file

    cams, compressed, topics = bag_cameras(bag)
    preset = rig_params_file(rig)
    params = _params_file(out_dir / "eval_params.yaml", cams, compressed, setup, preset,
                          wait_timeout)
    nodes = {node: node_parameters([preset, params], node)
             for node in graph_nodes(graph, setup.with_odometry)}
    check_rig(nodes, bag, topics, cams,
              f"g2g-eval-bag gives the nodes the bag's cameras; a --params-file "
              f"or -p that sets cameras / reloc_camera overrides that: drop it, or set e.g. "
              f"-p <node>.cameras:=[{','.join(cams)}].")
    return params, nodes
