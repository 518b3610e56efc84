"""``g2g-eval-bag BAG --graph rig_odometry|relocalize [--map MAP] --out DIR``.

Starts the node graph (:mod:`g2g_ros.bringup`, ``use_sim_time:=true``, reliable sensor QoS),
replays the bag in evaluation mode -- each image group waits until the node is done with it:
rig odometry's ``odometry`` output; relocalize's ``relocalize/processed`` (the node runs with
``localize_pacing: stamps``, so its periodic localization is triggered by image stamps and
finishes before the node answers) -- so the results do not depend on the machine's speed; a
group without an answer within ``--wait-timeout`` is counted in the report (``wait_timeouts``)
and logged. With :class:`ReplaySetup` (the demo's) the relocalize graph also runs rig odometry,
evaluated on its own ``odometry`` output, and an operator's initial pose is sent before the
replay. It records the nodes' outputs to ``DIR/outputs`` (MCAP) and writes
``DIR/report.json``, ``DIR/report.md`` and ``DIR/trajectories.png`` (metrics in
:mod:`g2g_ros.bags.evaluation`). With ``--pairs-index`` it also writes the pairs the nodes
evaluated as a ``g2g-eval`` pair index (:mod:`g2g_ros.bags.eval_pairs`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from g2g_model.geometry import invert_pose
from g2g_ros.bags.bag_reader import BagError, open_bag, read_metadata, require_topics
from g2g_ros.launch_graphs import params_key
from g2g_ros.bags.evaluation import (
    SHORT_SEGMENTS_M, corrected_trajectory, evaluate_latency, evaluate_odometry,
    evaluate_relocalization, load_ground_truth, load_outputs, odometry_trajectories,
    untrained_flags,
)
from g2g_ros.bags.report import markdown, plot_trajectories, write_json

LOG = logging.getLogger(__name__)
EVAL_GRAPHS = ("rig_odometry", "relocalize")


def _bag_cameras(bag: str | Path) -> Tuple[List[str], bool]:
    """Camera names (metadata, else the camera_info topics) and whether images are compressed."""
    with open_bag(bag) as reader:
        meta = read_metadata(reader, str(bag))
        cams = list(meta.get("cameras") or sorted(
            t.split("/")[0] for t in reader.topics if t.endswith("/camera_info")))
        if not cams:
            raise BagError(f"bag {bag} has no <cam>/camera_info topics: nothing to evaluate")
        needed = [f"{c}/camera_info" for c in cams]
        require_topics(reader, needed, str(bag), "by the nodes (camera_info per camera)")
        images = [c for c in cams if f"{c}/image_raw" in reader.topics
                  or f"{c}/image_raw/compressed" in reader.topics]
        if len(images) != len(cams):
            raise BagError(f"bag {bag} lacks image topics for cameras "
                           f"{sorted(set(cams) - set(images))}")
        compressed = any(t.endswith("/compressed") for t in reader.topics)
    return cams, compressed


@dataclass
class ReplaySetup:
    """What differs between evaluation replays (g2g-eval-bag's defaults; ``make demo`` sets
    more).

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


def _params_file(path: Path, cams: Sequence[str], compressed: bool,
                 setup: ReplaySetup) -> Path:
    def common():  # fresh objects per node: rcl's YAML parser rejects aliases
        # fp32 as g2g-eval: on bf16-capable CPUs "auto" would give other numbers.
        return {"cameras": list(cams), "sensor_qos_reliability": "reliable",
                "use_compressed": bool(compressed), "precision": "fp32"}

    params = {"rig_odometry": common(),
              # Stamp-paced localization, and a generous wait for the odometry (TF) at an image
              # stamp: on a loaded machine it can lag the image by more than the live 0.5 s,
              # and a frame dropped for that would change the results.
              "relocalize": dict(common(), reloc_camera=cams[0], localize_period_s=1.0,
                                 localize_pacing="stamps", tf_wait_s=5.0)}
    if setup.with_odometry:
        params["rig_odometry"]["publish_tf"] = False
    for node, extra in setup.node_params.items():
        params[node].update(extra)
    path.write_text(yaml.safe_dump({params_key(node): {"ros__parameters": values}
                                    for node, values in params.items()}))
    return path


def _wait_specs(graph: str, cams: Sequence[str], compressed: bool, wait_timeout: float,
                startup_timeout: float, with_odometry: bool = False):
    """What says that the graph's nodes are done with an image group (evaluation replay)."""
    from g2g_ros.bags.player import WaitSpec

    specs = []
    if graph == "rig_odometry" or with_odometry:
        specs.append(WaitSpec("odometry", "nav_msgs/msg/Odometry", wait_timeout,
                              startup_timeout))
    if graph == "relocalize":
        image = f"{cams[0]}/image_raw" + ("/compressed" if compressed else "")
        specs.append(WaitSpec("relocalize/processed", "std_msgs/msg/Header", wait_timeout,
                              startup_timeout, (image,)))
    return specs


def _send_initial_pose(node, spin, stamp: int, map_T_base: np.ndarray) -> None:
    """Publish ``map_T_base`` at ``stamp`` on ``/initialpose`` (a few times, as RViz's tool)."""
    from geometry_msgs.msg import PoseWithCovarianceStamped

    from g2g_ros.conversions import matrix_to_pose, to_stamp

    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = "map"
    msg.header.stamp = to_stamp(int(stamp))
    matrix_to_pose(map_T_base, msg.pose.pose)
    pub = node.create_publisher(PoseWithCovarianceStamped, "/initialpose", 10)
    for _ in range(5):
        pub.publish(msg)
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            spin(0.05)


def run_replay(bag: Path, graph: str, out_dir: Path, map_path: Optional[str], rig: str,
               checkpoint: str, wait_timeout: float, startup_timeout: float,
               progress: bool, setup: Optional[ReplaySetup] = None):
    """Graph + evaluation replay + recording; returns ``(outputs bag, PlayStats)``."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from g2g_ros.bags.player import BagPlayer
    from g2g_ros.bags.recorder import OUTPUT_TOPICS, Recorder
    from g2g_ros.bringup import GraphRunner, node_commands, parse_launch_args
    from g2g_ros.launch_graphs import GRAPHS
    from g2g_ros.qos import prefer_large_shm_profile

    setup = setup or ReplaySetup()
    cams, compressed = _bag_cameras(bag)
    params = _params_file(out_dir / "eval_params.yaml", cams, compressed, setup)
    launch = [f"rig:={rig}", "use_sim_time:=true", f"params_file:={params}"]
    if checkpoint:
        launch.append(f"checkpoint:={checkpoint}")
    if graph == "relocalize":
        launch.append(f"map:={map_path}")
        if setup.with_odometry:
            launch.append("with_odometry:=true")
    if setup.log_level:
        launch.append(f"log_level:={setup.log_level}")
    commands = node_commands(GRAPHS[graph], parse_launch_args(GRAPHS[graph], launch))
    runs_odometry = graph == "rig_odometry"
    wait = _wait_specs(graph, cams, compressed, wait_timeout, startup_timeout,
                       setup.with_odometry)
    prefer_large_shm_profile()  # the player below and the nodes' processes
    context = rclpy.Context()
    rclpy.init(context=context)
    runner = GraphRunner(commands, env=dict(os.environ)).start()
    player = recorder = executor = None
    try:
        player = BagPlayer(bag, 1.0, wait, exclude_tf_children=["base_link"] if runs_odometry
                           else (), context=context)
        recorder = Recorder(OUTPUT_TOPICS, lambda: player.current_stamp_ns, context=context)
        executor = SingleThreadedExecutor(context=context)
        # The recorder first: of outputs delivered together with a node's answer, the
        # recorder's are handled first, at the clock of the group they belong to.
        executor.add_node(recorder)
        executor.add_node(player)

        def spin(timeout: float) -> None:
            code = runner.poll()
            if code is not None:
                raise RuntimeError(f"a node of graph {graph!r} exited with code {code} during "
                                   f"the replay (see its log above)")
            executor.spin_once(timeout_sec=timeout)

        if setup.initial_pose is not None:
            # Once the nodes are up; relocalize holds the pose until the odometry at its stamp
            # arrives, so it takes effect at the same image on every run.
            status = ["relocalize/status"] + (["rig_odometry/status"] if setup.with_odometry
                                              else [])
            deadline = time.monotonic() + startup_timeout
            while not all(recorder.counts()[t] for t in status):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no {status} within {startup_timeout} s")
                spin(0.1)
            _send_initial_pose(recorder, spin, *setup.initial_pose)
        stats = player.play(spin, progress=progress)
        # Let the last outputs and one more status / diagnostics round arrive.
        n_diag = recorder.counts()["/diagnostics"]
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and recorder.counts()["/diagnostics"] < n_diag + 2:
            spin(0.05)
        outputs = recorder.write(out_dir / "outputs")
    finally:
        runner.stop()
        for node in (player, recorder):
            if node is not None:
                node.destroy_node()
        if executor is not None:
            executor.shutdown()
        rclpy.try_shutdown(context=context)
    return outputs, stats


@dataclass
class PairsIndexSpec:
    """Where to write the evaluated pairs as a ``g2g-eval`` index (:mod:`.eval_pairs`).

    ``query_traj`` / ``map_traj``: the dataset trajectories of the bag and of the map (default:
    the bag's metadata ``source_path``, the map's ``source``); all under ``root``.
    ``rig_path``: where the rig odometry pairs go when the relocalize graph also ran rig
    odometry (:attr:`ReplaySetup.with_odometry`).
    """

    path: str
    root: str
    query_traj: Optional[str] = None
    map_traj: Optional[str] = None
    rig_path: Optional[str] = None


def build_report(bag: Path, outputs: Path, graph: str, stats, out_dir: Path,
                 map_path: Optional[str] = None,
                 segment_lengths_m: Sequence[float] = SHORT_SEGMENTS_M,
                 pairs_index: Optional[PairsIndexSpec] = None) -> Dict[str, object]:
    """Metrics, plots and report files from the input bag and the recorded outputs (and the
    ``g2g-eval`` pair index of the evaluated pairs, with ``pairs_index``)."""
    gt = load_ground_truth(bag)
    out = load_outputs(outputs)
    camera = (gt.metadata.get("cameras") or sorted(gt.base_T_cam))[0]
    report: Dict[str, object] = {
        "graph": graph, "bag": str(bag), "outputs_bag": str(outputs),
        "dataset": gt.metadata.get("dataset", "unknown"),
        "replay": {"mode": "evaluation (waits for each group)" if stats.waited_groups or
                   stats.wait_timeouts else "paced by wall time",
                   "groups": stats.groups, "messages": stats.messages,
                   "waited_groups": stats.waited_groups, "wait_timeouts": stats.wait_timeouts,
                   "timeouts_by_topic": dict(stats.timeouts_by_topic)},
        "untrained_model": untrained_flags(out),
        "latency": evaluate_latency(out, stats.latencies_s),
    }
    curves: Dict[str, np.ndarray] = {"ground truth": gt.world_T_base[:, :3, 3]}
    if graph == "rig_odometry" or out.odometry:   # relocalize with rig odometry: both
        report["rig_odometry"] = evaluate_odometry(gt, out, camera, segment_lengths_m)
        stamps, _, odo = odometry_trajectories(gt, out.odometry)
        if len(stamps):
            g0 = gt.at(int(stamps[0]))
            curves["rig odometry" if graph == "relocalize" else "odometry"] = np.stack(
                [g0 @ o for o in odo])[:, :3, 3]
    if graph == "relocalize":
        # The odometry input of relocalize is the bag's odom->base_link.
        report["relocalization"] = evaluate_relocalization(gt, out, gt.odom_input, map_path,
                                                           query_camera=camera)
        s, corr = corrected_trajectory(gt, out, gt.odom_input)
        curves["relocalized (map->odom)"] = corr[:, :3, 3]
        curves["relocalization fixes"] = np.array([p[:3, 3] for _, p in out.reloc_poses]
                                                  ).reshape(-1, 3)
        if gt.odom_input:
            s0 = min(gt.odom_input)
            g0 = gt.at(s0) if gt.at(s0) is not None else np.eye(4)
            curves["odometry"] = np.stack([g0 @ invert_pose(gt.odom_input[s0]) @ T for _, T in
                                           sorted(gt.odom_input.items())])[:, :3, 3]
    if pairs_index is not None:
        from g2g_ros.bags.eval_pairs import write_pairs_index

        indexes = [(graph, pairs_index.path)]
        if graph == "relocalize" and pairs_index.rig_path and "rig_odometry" in report:
            indexes.append(("rig_odometry", pairs_index.rig_path))
        for which, index in indexes:
            stamps = report["rig_odometry"]["pair_stamps"] if which == "rig_odometry" else ()
            path = write_pairs_index(index, pairs_index.root, which, bag, gt.metadata,
                                     out.alignments, stamps, camera, map_path,
                                     pairs_index.query_traj, pairs_index.map_traj)
            task = "reloc" if which == "relocalize" else "rig"
            report["pairs_index" if which == graph else "rig_pairs_index"] = {
                "path": str(path), "root": str(pairs_index.root), "task": task,
                "g2g_eval": f"g2g-eval --task {task} --root {pairs_index.root} --index "
                            f"{Path(path).resolve()} --checkpoint <the node's checkpoint> "
                            f"--out <dir>"}
    plot = plot_trajectories(out_dir / "trajectories.png", curves,
                             f"{graph} on {Path(bag).name}")
    report["plots"] = [str(plot)]
    write_json(report, out_dir / "report.json")
    (out_dir / "report.md").write_text(markdown(report))
    return report


def evaluate_bag(bag: str | Path, graph: str, out_dir: str | Path, map_path: Optional[str] = None,
                 rig: str = "sim", checkpoint: str = "",
                 wait_timeout: float = 30.0, startup_timeout: float = 120.0,
                 segment_lengths_m: Sequence[float] = SHORT_SEGMENTS_M,
                 progress: bool = True, pairs_index: Optional[PairsIndexSpec] = None,
                 node_params: Optional[Dict[str, object]] = None,
                 setup: Optional[ReplaySetup] = None) -> Dict[str, object]:
    """Replay ``bag`` through ``graph`` in evaluation mode and report (module docstring).

    ``node_params``: parameters of the graph's node applied after the rig preset (and after
    those of ``setup``).
    """
    if graph not in EVAL_GRAPHS:
        raise ValueError(f"graph must be one of {EVAL_GRAPHS}, got {graph!r}")
    if graph == "relocalize" and not map_path:
        raise ValueError("graph 'relocalize' needs --map (a map built with g2g-map build)")
    if map_path and not Path(map_path).is_file():
        raise ValueError(f"map {map_path} does not exist")
    bag = Path(bag)
    load_ground_truth(bag)  # fails early, naming what is missing
    out_dir = Path(out_dir)
    if (out_dir / "outputs").exists():
        raise ValueError(f"{out_dir / 'outputs'} already exists; choose a new --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    setup = setup or ReplaySetup()
    if node_params:
        setup = replace(setup, node_params={**setup.node_params, graph: {
            **setup.node_params.get(graph, {}), **node_params}})
    if setup.with_odometry and graph != "relocalize":
        raise ValueError("with_odometry is for graph 'relocalize' (rig_odometry runs anyway)")
    outputs, stats = run_replay(bag, graph, out_dir, map_path, rig, checkpoint, wait_timeout,
                                startup_timeout, progress, setup)
    return build_report(bag, outputs, graph, stats, out_dir, map_path, segment_lengths_m,
                        pairs_index)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="g2g-eval-bag", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", help="bag directory from g2g-bag convert")
    parser.add_argument("--graph", required=True, choices=EVAL_GRAPHS)
    parser.add_argument("--map", default=None, help="map for --graph relocalize")
    parser.add_argument("--out", required=True, help="output directory for outputs + report")
    parser.add_argument("--rig", default="sim", help="parameter preset config/<rig>.yaml")
    parser.add_argument("--checkpoint", default="", help="G2G checkpoint (default: embedded)")
    parser.add_argument("--wait-timeout", type=float, default=30.0,
                        help="seconds per image group; a group without an answer is counted "
                             "in the report (wait_timeouts) and the replay goes on")
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--segments", type=float, nargs="+", default=list(SHORT_SEGMENTS_M),
                        help="KITTI-style segment lengths in m (short for simulator runs)")
    parser.add_argument("--pairs-index", default=None, metavar="FILE.json|FILE.csv",
                        help="also write the evaluated pairs as a g2g-eval pair index")
    parser.add_argument("--dataset-root", default=None,
                        help="collection root of the dataset (with --pairs-index)")
    parser.add_argument("--query-trajectory", default=None,
                        help="the bag's dataset trajectory (default: the bag's metadata)")
    parser.add_argument("--map-trajectory", default=None,
                        help="the map's dataset trajectory (default: the map's source)")
    parser.add_argument("--quiet", action="store_true")
    opts = parser.parse_args(argv)
    if opts.pairs_index and not opts.dataset_root:
        parser.error("--pairs-index needs --dataset-root")
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    try:
        pairs = PairsIndexSpec(opts.pairs_index, opts.dataset_root, opts.query_trajectory,
                               opts.map_trajectory) if opts.pairs_index else None
        report = evaluate_bag(opts.bag, opts.graph, opts.out, opts.map, opts.rig,
                              opts.checkpoint, opts.wait_timeout, opts.startup_timeout,
                              opts.segments, progress=not opts.quiet, pairs_index=pairs)
    except (BagError, ValueError, TimeoutError, RuntimeError) as exc:
        print(f"g2g-eval-bag: {exc}", file=sys.stderr)
        return 2
    out = Path(opts.out)
    print((out / "report.md").read_text())
    print(f"report: {out / 'report.md'}, {out / 'report.json'}; plots: {report['plots']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
