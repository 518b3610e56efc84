"""``g2g-eval-bag BAG --graph rig_odometry|relocalize [--map MAP] --out DIR``.

The nodes get the rig preset (``--rig``), then the evaluation's own parameters (the bag's
cameras, reliable sensor QoS, stamp pacing), then ``--params-file`` and ``-p NODE.PARAM:=V``
(:mod:`g2g_ros.bags.eval_setup`). Before anything starts, the bag is checked to carry every
camera the nodes will use with those parameters; when it does not, it stops (exit code 2)
naming the missing cameras (:mod:`g2g_ros.bags.rig_check`).

Starts the node graph (:mod:`g2g_ros.bringup`, ``use_sim_time:=true``), replays the bag in
evaluation mode -- each image group waits until the node is done with it:
rig odometry's ``odometry`` output; relocalize's ``relocalize/processed`` (the node runs with
``localize_pacing: stamps``, so its periodic localization is triggered by image stamps and
finishes before the node answers) -- so the results do not depend on the machine's speed, on
a DDS domain of its own (``--domain-id``; by default a private one, so that replays running at
once do not hear each other: :mod:`g2g_ros.bags.domains`); a
group without an answer within ``--wait-timeout`` is counted in the report (``wait_timeouts``)
and logged. With ``--with-odometry`` (the demo's) the relocalize graph also runs rig
odometry, evaluated on its own ``odometry`` output; ``--initial-pose`` /
``--initial-pose-from-bag`` send an operator's initial pose before the replay. It records
the nodes' outputs to ``DIR/outputs`` (MCAP) and writes
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_ros.bags.bag_reader import BagError
from g2g_ros.bags.domains import replay_domain
from g2g_ros.bags.eval_setup import (ReplaySetup, add_setup_arguments, checked_parameters,
                                     setup_from_args)
from g2g_ros.bags.rig_check import camera_topics, node_cameras
from g2g_ros.bags.evaluation import (
    SHORT_SEGMENTS_M, corrected_trajectory, evaluate_latency, evaluate_odometry,
    evaluate_relocalization, load_ground_truth, load_outputs, odometry_trajectories,
    untrained_flags,
)
from g2g_ros.bags.report import markdown, plot_trajectories, write_json

LOG = logging.getLogger(__name__)
EVAL_GRAPHS = ("rig_odometry", "relocalize")


def _wait_specs(graph: str, reloc_image: str, wait_timeout: float, startup_timeout: float,
                with_odometry: bool = False, rig_images: Tuple[str, ...] = ()):
    """What says that the graph's nodes are done with an image group (evaluation replay);
    ``reloc_image``: the image topic relocalize listens to; ``rig_images``: those rig
    odometry listens to (empty: every image topic of the bag), so that a bag with cameras the
    node does not use (``-p rig_odometry.cameras:=[...]``) waits for subscribers on its own."""
    from g2g_ros.bags.player import WaitSpec

    specs = []
    if graph == "rig_odometry" or with_odometry:
        # Every group rig odometry finishes with, also one that publishes no odometry
        # (keyframe_stride, a rejected step): waiting on odometry, each such group waited
        # the full wait_timeout.
        specs.append(WaitSpec("rig_odometry/processed", "std_msgs/msg/Header", wait_timeout,
                              startup_timeout, tuple(rig_images)))
    if graph == "relocalize":
        specs.append(WaitSpec("relocalize/processed", "std_msgs/msg/Header", wait_timeout,
                              startup_timeout, (reloc_image,)))
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
               progress: bool, setup: ReplaySetup,
               checked: Tuple[Path, Dict[str, Dict[str, object]]],
               domain: Tuple[int, Dict[str, str]]):
    """Graph + evaluation replay + recording; returns ``(outputs bag, PlayStats)``.
    ``checked``: what :func:`checked_parameters` returned for this replay; ``domain``: its DDS
    domain and environment (:func:`g2g_ros.bags.domains.replay_domain`)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from g2g_ros.bags.player import BagPlayer
    from g2g_ros.bags.recorder import OUTPUT_TOPICS, Recorder
    from g2g_ros.bringup import GraphRunner, node_commands, parse_launch_args
    from g2g_ros.launch_graphs import GRAPHS
    from g2g_ros.qos import prefer_large_shm_profile

    params, nodes = checked
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
    reloc = nodes.get("relocalize", {})
    reloc_image = camera_topics(str(reloc.get("reloc_camera") or node_cameras(reloc)[0]),
                                reloc)[0] if reloc else ""
    rig = nodes.get("rig_odometry", {})
    rig_images = tuple(camera_topics(c, rig)[0] for c in node_cameras(rig)) if rig else ()
    wait = _wait_specs(graph, reloc_image, wait_timeout, startup_timeout, setup.with_odometry,
                       rig_images)
    prefer_large_shm_profile()  # the player below and the nodes' processes
    domain_id, domain_env = domain  # the replay's own DDS domain (g2g_ros.bags.domains)
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    runner = GraphRunner(commands, env={**os.environ, **domain_env}).start()
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
    setup = setup or ReplaySetup()
    if node_params:
        setup = replace(setup, node_params={**setup.node_params, graph: {
            **setup.node_params.get(graph, {}), **node_params}})
    if setup.with_odometry and graph != "relocalize":
        raise ValueError("with_odometry is for graph 'relocalize' (rig_odometry runs anyway)")
    if setup.initial_pose is not None and graph != "relocalize":
        raise ValueError("an initial pose is for graph 'relocalize'")
    bag = Path(bag)
    out_dir = Path(out_dir)
    if (out_dir / "outputs").exists():
        raise ValueError(f"{out_dir / 'outputs'} already exists; choose a new --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Before any node starts: what the report needs, then the bag's cameras against the rig.
    load_ground_truth(bag)  # fails early, naming what is missing
    checked = checked_parameters(bag, graph, out_dir, rig, setup, wait_timeout)
    with replay_domain(setup.domain_id) as domain:
        outputs, stats = run_replay(bag, graph, out_dir, map_path, rig, checkpoint,
                                    wait_timeout, startup_timeout, progress, setup, checked,
                                    domain)
    return build_report(bag, outputs, graph, stats, out_dir, map_path, segment_lengths_m,
                        pairs_index)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="g2g-eval-bag", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", help="bag directory from g2g-bag convert")
    parser.add_argument("--graph", required=True, choices=EVAL_GRAPHS)
    parser.add_argument("--map", default=None, help="map for --graph relocalize")
    parser.add_argument("--out", required=True, help="output directory for outputs + report")
    parser.add_argument("--rig", default="sim", help="parameter preset config/<rig>.yaml "
                        "(its cameras are replaced by the bag's)")
    parser.add_argument("--checkpoint", default="", help="G2G checkpoint (default: embedded)")
    parser.add_argument("--wait-timeout", type=float, default=30.0,
                        help="seconds per image group; a group without an answer is counted "
                             "in the report (wait_timeouts) and the replay goes on")
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--segments", type=float, nargs="+", default=list(SHORT_SEGMENTS_M),
                        help="KITTI-style segment lengths in m (short for simulator runs)")
    add_setup_arguments(parser)
    parser.add_argument("--pairs-index", default=None, metavar="FILE.json|FILE.csv",
                        help="also write the evaluated pairs as a g2g-eval pair index")
    parser.add_argument("--rig-pairs-index", default=None, metavar="FILE.json|FILE.csv",
                        help="with --pairs-index and --with-odometry: also the rig odometry "
                             "pairs")
    parser.add_argument("--dataset-root", default=None,
                        help="collection root of the dataset (with --pairs-index)")
    parser.add_argument("--query-trajectory", default=None,
                        help="the bag's dataset trajectory (default: the bag's metadata)")
    parser.add_argument("--map-trajectory", default=None,
                        help="the map's dataset trajectory (default: the map's source)")
    parser.add_argument("--quiet", action="store_true")
    return parser


def evaluate_args(argv: Sequence[str]) -> Tuple[argparse.Namespace, Dict[str, object]]:
    """Parse ``g2g-eval-bag``'s command line and run it: ``(the parsed flags, the report)``
    (``make demo`` runs its evaluation through here too). Errors as :func:`evaluate_bag`;
    argparse exits on bad flags."""
    parser = build_parser()
    opts = parser.parse_args(list(argv))
    if opts.pairs_index and not opts.dataset_root:
        parser.error("--pairs-index needs --dataset-root")
    if opts.rig_pairs_index and not opts.pairs_index:
        parser.error("--rig-pairs-index needs --pairs-index")
    pairs = PairsIndexSpec(opts.pairs_index, opts.dataset_root, opts.query_trajectory,
                           opts.map_trajectory, opts.rig_pairs_index) if opts.pairs_index else None
    setup = setup_from_args(opts, opts.bag, opts.graph)
    return opts, evaluate_bag(opts.bag, opts.graph, opts.out, opts.map, opts.rig,
                              opts.checkpoint, opts.wait_timeout, opts.startup_timeout,
                              opts.segments, progress=not opts.quiet, pairs_index=pairs,
                              setup=setup)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts, report = evaluate_args(argv)
    except (BagError, ValueError, TimeoutError, RuntimeError) as exc:
        print(f"g2g-eval-bag: {exc}", file=sys.stderr)
        return 2
    out = Path(opts.out)
    print((out / "report.md").read_text())
    print(f"report: {out / 'report.md'}, {out / 'report.json'}; plots: {report['plots']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
