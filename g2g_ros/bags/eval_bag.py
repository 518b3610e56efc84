"""``g2g-eval-bag BAG --graph rig_odometry|relocalize [--map MAP] --out DIR``.

Starts the node graph (:mod:`g2g_ros.bringup`, ``use_sim_time:=true``, reliable sensor QoS),
replays the bag in evaluation mode -- each image group waits until the node is done with it:
rig odometry's ``odometry`` output; relocalize's ``relocalize/processed`` (the node runs with
``localize_pacing: stamps``, so its periodic localization is triggered by image stamps and
finishes before the node answers) -- so the results do not depend on the machine's speed; a
group without an answer within ``--wait-timeout`` is counted in the report (``wait_timeouts``)
and logged. It records the nodes' outputs to ``DIR/outputs`` (MCAP) and writes
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
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from g2g_model.geometry import invert_pose
from g2g_ros.bags.bag_reader import BagError, open_bag, read_metadata, require_topics
from g2g_ros.graphs import params_key
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


def _params_file(path: Path, cams: Sequence[str], compressed: bool,
                 localize_period_s: float = 1.0, extra: Optional[Dict[str, object]] = None,
                 graph: str = "relocalize") -> Path:
    def common():  # fresh objects per node: rcl's YAML parser rejects aliases
        # fp32 as g2g-eval: on bf16-capable CPUs "auto" would give other numbers.
        return {"cameras": list(cams), "sensor_qos_reliability": "reliable",
                "use_compressed": bool(compressed), "precision": "fp32"}

    data = {params_key("rig_odometry"): {"ros__parameters": common()},
            # Stamp-paced localization, and a generous wait for the odometry (TF) at an image
            # stamp: on a loaded machine it can lag the image by more than the live 0.5 s,
            # and a frame dropped for that would change the results.
            params_key("relocalize"): {"ros__parameters": dict(
                common(), reloc_camera=cams[0], localize_period_s=float(localize_period_s),
                localize_pacing="stamps", tf_wait_s=5.0)}}
    data[params_key(graph)]["ros__parameters"].update(extra or {})
    path.write_text(yaml.safe_dump(data))
    return path


def _wait_spec(graph: str, cams: Sequence[str], compressed: bool, wait_timeout: float,
               startup_timeout: float):
    """What says that the graph's node is done with an image group (evaluation replay)."""
    from g2g_ros.bags.player import WaitSpec

    if graph == "rig_odometry":
        return WaitSpec("odometry", "nav_msgs/msg/Odometry", wait_timeout, startup_timeout)
    image = f"{cams[0]}/image_raw" + ("/compressed" if compressed else "")
    return WaitSpec("relocalize/processed", "std_msgs/msg/Header", wait_timeout,
                    startup_timeout, (image,))


def run_replay(bag: Path, graph: str, out_dir: Path, map_path: Optional[str], rig: str,
               checkpoint: str, wait_timeout: float, startup_timeout: float,
               progress: bool, extra_params: Optional[Dict[str, object]] = None):
    """Graph + evaluation replay + recording; returns ``(outputs bag, PlayStats)``.

    ``extra_params``: parameters of the graph's node applied last (e.g. gates of relocalize).
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from g2g_ros.bags.player import BagPlayer
    from g2g_ros.bags.recorder import OUTPUT_TOPICS, Recorder
    from g2g_ros.bringup import GraphRunner, node_commands, parse_launch_args
    from g2g_ros.graphs import GRAPHS

    cams, compressed = _bag_cameras(bag)
    params = _params_file(out_dir / "eval_params.yaml", cams, compressed,
                          extra=extra_params, graph=graph)
    launch = [f"rig:={rig}", "use_sim_time:=true", f"params_file:={params}"]
    if checkpoint:
        launch.append(f"checkpoint:={checkpoint}")
    if graph == "relocalize":
        launch.append(f"map:={map_path}")
    commands = node_commands(GRAPHS[graph], parse_launch_args(GRAPHS[graph], launch))
    runs_odometry = graph == "rig_odometry"
    wait = _wait_spec(graph, cams, compressed, wait_timeout, startup_timeout)
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
    """

    path: str
    root: str
    query_traj: Optional[str] = None
    map_traj: Optional[str] = None


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
    if graph == "rig_odometry":
        report["rig_odometry"] = evaluate_odometry(gt, out, camera, segment_lengths_m)
        stamps, _, odo = odometry_trajectories(gt, out.odometry)
        if len(stamps):
            g0 = gt.at(int(stamps[0]))
            curves["odometry"] = np.stack([g0 @ o for o in odo])[:, :3, 3]
    else:
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

        stamps = report["rig_odometry"]["pair_stamps"] if graph == "rig_odometry" else ()
        path = write_pairs_index(pairs_index.path, pairs_index.root, graph, bag, gt.metadata,
                                 out.alignments, stamps, camera, map_path,
                                 pairs_index.query_traj, pairs_index.map_traj)
        report["pairs_index"] = {
            "path": str(path), "root": str(pairs_index.root),
            "g2g_eval": f"g2g-eval --task {'reloc' if graph == 'relocalize' else 'rig'} "
                        f"--root {pairs_index.root} --index {Path(path).resolve()} "
                        f"--checkpoint <the node's checkpoint> --out <dir>"}
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
                 node_params: Optional[Dict[str, object]] = None) -> Dict[str, object]:
    """Replay ``bag`` through ``graph`` in evaluation mode and report (module docstring).

    ``node_params``: parameters of the graph's node applied after the rig preset.
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
    outputs, stats = run_replay(bag, graph, out_dir, map_path, rig, checkpoint, wait_timeout,
                                startup_timeout, progress, node_params)
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
