"""``g2g-eval-bag BAG --graph rig_odometry|relocalize [--map MAP] --out DIR``.

Starts the node graph (:mod:`g2g_ros.bringup`, ``use_sim_time:=true``, reliable sensor QoS),
replays the bag -- in evaluation mode for rig odometry (each image group waits for its
``odometry`` output, so the results do not depend on the machine's speed); relocalization runs
its periodic localization on wall time, so its replay is paced by ``--rate`` -- records the
nodes' outputs to ``DIR/outputs`` (MCAP) and writes ``DIR/report.json``, ``DIR/report.md`` and
``DIR/trajectories.png`` (metrics in :mod:`g2g_ros.bags.evaluation`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from g2g_model.geometry import invert_pose
from g2g_ros.bags.bag_reader import BagError, open_bag, read_metadata, require_topics
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
                 localize_period_s: float = 1.0) -> Path:
    def common():  # fresh objects per node: rcl's YAML parser rejects aliases
        return {"cameras": list(cams), "sensor_qos_reliability": "reliable",
                "use_compressed": bool(compressed)}

    data = {"rig_odometry": {"ros__parameters": common()},
            "relocalize": {"ros__parameters": dict(common(), reloc_camera=cams[0],
                                                   localize_period_s=float(localize_period_s))}}
    path.write_text(yaml.safe_dump(data))
    return path


def run_replay(bag: Path, graph: str, out_dir: Path, map_path: Optional[str], rig: str,
               checkpoint: str, rate: float, wait_timeout: float, startup_timeout: float,
               progress: bool):
    """Graph + replay + recording; returns ``(outputs bag, PlayStats)``."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from g2g_ros.bags.player import BagPlayer, WaitSpec
    from g2g_ros.bags.recorder import OUTPUT_TOPICS, Recorder
    from g2g_ros.bringup import GraphRunner, node_commands, parse_launch_args
    from g2g_ros.graphs import GRAPHS

    cams, compressed = _bag_cameras(bag)
    params = _params_file(out_dir / "eval_params.yaml", cams, compressed)
    launch = [f"rig:={rig}", "use_sim_time:=true", f"params_file:={params}"]
    if checkpoint:
        launch.append(f"checkpoint:={checkpoint}")
    if graph == "relocalize":
        launch.append(f"map:={map_path}")
    commands = node_commands(GRAPHS[graph], parse_launch_args(GRAPHS[graph], launch))
    runs_odometry = graph == "rig_odometry"
    wait = WaitSpec("odometry", "nav_msgs/msg/Odometry", wait_timeout,
                    startup_timeout) if runs_odometry else None
    context = rclpy.Context()
    rclpy.init(context=context)
    runner = GraphRunner(commands, env=dict(os.environ)).start()
    player = recorder = executor = None
    try:
        player = BagPlayer(bag, rate, wait, exclude_tf_children=["base_link"] if runs_odometry
                           else (), context=context)
        recorder = Recorder(OUTPUT_TOPICS, lambda: player.current_stamp_ns, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(player)
        executor.add_node(recorder)

        def spin(timeout: float) -> None:
            code = runner.poll()
            if code is not None:
                raise RuntimeError(f"a node of graph {graph!r} exited with code {code} during "
                                   f"the replay (see its log above)")
            executor.spin_once(timeout_sec=timeout)

        if wait is None:  # paced replay: still let the nodes come up first
            deadline = time.monotonic() + startup_timeout
            topic = f"{graph}/status"
            while recorder.count_publishers(topic) == 0 and time.monotonic() < deadline:
                spin(0.05)
            time.sleep(1.0)
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


def build_report(bag: Path, outputs: Path, graph: str, stats, out_dir: Path,
                 map_path: Optional[str] = None,
                 segment_lengths_m: Sequence[float] = SHORT_SEGMENTS_M) -> Dict[str, object]:
    """Metrics, plots and report files from the input bag and the recorded outputs."""
    gt = load_ground_truth(bag)
    out = load_outputs(outputs)
    camera = (gt.metadata.get("cameras") or sorted(gt.base_T_cam))[0]
    report: Dict[str, object] = {
        "graph": graph, "bag": str(bag), "outputs_bag": str(outputs),
        "dataset": gt.metadata.get("dataset", "unknown"),
        "replay": {"mode": "evaluation (waits for each group)" if stats.waited_groups or
                   stats.wait_timeouts else "paced by wall time",
                   "groups": stats.groups, "messages": stats.messages,
                   "waited_groups": stats.waited_groups, "wait_timeouts": stats.wait_timeouts},
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
        report["relocalization"] = evaluate_relocalization(gt, out, gt.odom_input, map_path)
        s, corr = corrected_trajectory(gt, out, gt.odom_input)
        curves["relocalized (map->odom)"] = corr[:, :3, 3]
        curves["relocalization fixes"] = np.array([p[:3, 3] for _, p in out.reloc_poses]
                                                  ).reshape(-1, 3)
        if gt.odom_input:
            s0 = min(gt.odom_input)
            g0 = gt.at(s0) if gt.at(s0) is not None else np.eye(4)
            curves["odometry"] = np.stack([g0 @ invert_pose(gt.odom_input[s0]) @ T for _, T in
                                           sorted(gt.odom_input.items())])[:, :3, 3]
    plot = plot_trajectories(out_dir / "trajectories.png", curves,
                             f"{graph} on {Path(bag).name}")
    report["plots"] = [str(plot)]
    write_json(report, out_dir / "report.json")
    (out_dir / "report.md").write_text(markdown(report))
    return report


def evaluate_bag(bag: str | Path, graph: str, out_dir: str | Path, map_path: Optional[str] = None,
                 rig: str = "sim", checkpoint: str = "", rate: float = 1.0,
                 wait_timeout: float = 30.0, startup_timeout: float = 120.0,
                 segment_lengths_m: Sequence[float] = SHORT_SEGMENTS_M,
                 progress: bool = True) -> Dict[str, object]:
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
    outputs, stats = run_replay(bag, graph, out_dir, map_path, rig, checkpoint, rate,
                                wait_timeout, startup_timeout, progress)
    return build_report(bag, outputs, graph, stats, out_dir, map_path, segment_lengths_m)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="g2g-eval-bag", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bag", help="bag directory from g2g-bag convert")
    parser.add_argument("--graph", required=True, choices=EVAL_GRAPHS)
    parser.add_argument("--map", default=None, help="map for --graph relocalize")
    parser.add_argument("--out", required=True, help="output directory for outputs + report")
    parser.add_argument("--rig", default="sim", help="parameter preset config/<rig>.yaml")
    parser.add_argument("--checkpoint", default="", help="G2G checkpoint (default: embedded)")
    parser.add_argument("--rate", type=float, default=1.0, help="paced replay speed")
    parser.add_argument("--wait-timeout", type=float, default=30.0)
    parser.add_argument("--startup-timeout", type=float, default=120.0)
    parser.add_argument("--segments", type=float, nargs="+", default=list(SHORT_SEGMENTS_M),
                        help="KITTI-style segment lengths in m (short for simulator runs)")
    parser.add_argument("--quiet", action="store_true")
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    try:
        report = evaluate_bag(opts.bag, opts.graph, opts.out, opts.map, opts.rig,
                              opts.checkpoint, opts.rate, opts.wait_timeout,
                              opts.startup_timeout, opts.segments, progress=not opts.quiet)
    except (BagError, ValueError, TimeoutError, RuntimeError) as exc:
        print(f"g2g-eval-bag: {exc}", file=sys.stderr)
        return 2
    out = Path(opts.out)
    print((out / "report.md").read_text())
    print(f"report: {out / 'report.md'}, {out / 'report.json'}; plots: {report['plots']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
