"""`make demo`: relocalization and rig odometry end to end on the embedded default.

1. simulate a small scene of the test split: a mapping traversal and a query traversal in a
   different season (lighting, paint, posters, small objects), 5-camera rig;
2. convert both traversals to rosbag2 (MCAP) bags; the query bag carries a drifting odometry
   (2 %/m scale, 1 deg/m heading) as its odom->base_link input;
3. build a map from the mapping traversal (keyframes of the reference camera + cached tokens);
4. evaluate the query bag with g2g-eval-bag, its command line parsed by its own parser
   (:data:`DEMO_EVAL_FLAGS`, :func:`g2g_ros.bags.eval_bag.evaluate_args`; the command is printed):
   the relocalize and rig_odometry nodes (g2g-bringup's graph, use_sim_time) get the bag over
   DDS with /clock, each image group waiting until rig_odometry and relocalize have reported it
   done on rig_odometry/processed and relocalize/processed -- relocalize localizes every 0.5 s
   of *bag* time, ``localize_pacing: stamps`` -- so results do not depend on machine speed; the
   operator's initial pose is sent before the replay and takes effect at the first image. The
   outputs are recorded and scored against the bag's ground truth, and the pairs the nodes
   evaluated are written as g2g-eval pair indexes;
5. score G2G alone, the classical baseline (SIFT + RANSAC) and "no motion" on exactly those
   pairs with g2g-eval's code (:func:`g2g_model.training.evaluate.evaluate_methods`), print one
   table (:mod:`g2g_ros.demo_report`) and write trajectory plots.

Everything is CPU-only and offline; generated data goes to data/demo/ and outputs/demo/.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import shutil
import sys
import time


ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = 20000            # a test-split scene: never used for training


def step(n: int, total: int, text: str) -> None:
    print(f"\n[{n}/{total}] {text}", flush=True)


def simulate(out: pathlib.Path, frames: int):
    from g2g_model.data.format import is_complete
    from g2g_model.data.sim.generate import SimConfig, generate_trajectory, trajectory_dir

    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=2, frames=frames,
                    with_depth=False)
    paths = []
    for k in (0, 1):
        path = trajectory_dir(out, SEED, k)
        if is_complete(path):
            print(f"  reusing {path}")
        else:
            t0 = time.perf_counter()
            path = pathlib.Path(generate_trajectory(out, SEED, k, cfg)["path"])
            print(f"  rendered traversal {k} ({frames} frames x 5 cameras) in "
                  f"{time.perf_counter() - t0:.1f} s -> {path}")
        paths.append(pathlib.Path(path))
    return paths


def build_map(traj, out: pathlib.Path, pipeline):
    from g2g_model.maps.building import build_map_from_trajectory
    from g2g_model.maps.format import save_map

    # Keyframes of every camera of the mapping run: the query traversal revisits places in the
    # other direction, where another camera of the mapping run saw what the query camera sees.
    gmap = build_map_from_trajectory(traj, pipeline, None, min_translation_m=0.1,
                                     min_rotation_deg=5.0, progress=False)
    path = save_map(gmap, out)
    print(f"  {len(gmap)} keyframes of {gmap.cameras()} -> {path}")
    return path


def convert_bags(trajs, data_dir: pathlib.Path):
    from g2g_ros.bags.convert import OdometrySource, convert_trajectory

    bags = []
    for k, traj in enumerate(trajs):
        bag = data_dir / f"traversal_{k}.mcap"
        if bag.exists():
            print(f"  reusing {bag}")
        else:
            odometry = OdometrySource(drift_per_m=0.02 if k else 0.0,
                                      yaw_drift_deg_per_m=1.0 if k else 0.0)
            convert_trajectory(traj, bag, odometry=odometry, progress=False)
            print(f"  {traj.name} -> {bag}")
        bags.append(bag)
    return bags


# The demo's evaluation as g2g-eval-bag flags (parsed by g2g-eval-bag's own parser): rig
# odometry beside relocalize, a fix every 0.5 s of bag time, open gates, and an operator's
# initial pose near the truth (0.3 m, 5 deg off) at the first image, as clicked in RViz.
DEMO_EVAL_FLAGS = (
    "--rig", "sim", "--with-odometry", "--initial-pose-from-bag", "0.3", "5.0",
    "-p", "relocalize.localize_period_s:=0.5", "-p", "relocalize.consistency_count:=1",
    "-p", "relocalize.min_translation_m:=0.05",
    # The eval replay pauses the cameras while relocalize works: not a fault.
    "-p", "rig_odometry.keyframe_stride:=1", "-p", "rig_odometry.lost_after_s:=120.0",
    "--log-level", "warn")


def eval_command(query_bag, map_path, map_traj, query_traj, data_dir: pathlib.Path,
                 replay: pathlib.Path) -> list:
    """The ``g2g-eval-bag`` command line of the demo's evaluation (without the program)."""
    return [str(query_bag), "--graph", "relocalize", "--map", str(map_path), "--out",
            str(replay), *DEMO_EVAL_FLAGS,
            "--pairs-index", str(replay / "reloc_pairs.json"),
            "--rig-pairs-index", str(replay / "rig_pairs.json"), "--dataset-root", str(data_dir),
            "--query-trajectory", str(query_traj), "--map-trajectory", str(map_traj)]


def evaluate_replay(query_bag, query_traj, map_traj, map_path, data_dir: pathlib.Path,
                    out: pathlib.Path):
    """g2g-eval-bag on the query bag (both nodes), then g2g-eval on the pairs it evaluated:
    ``(report, reloc methods, rig methods)`` (see :mod:`g2g_ros.demo_report`)."""
    from g2g_model.assets import default_checkpoint
    from g2g_model.training.evaluate import default_methods, evaluate_methods
    from g2g_ros.bags.eval_bag import evaluate_args

    replay = out / "replay"
    shutil.rmtree(replay, ignore_errors=True)
    # The replay reserves a DDS domain of its own (g2g_ros.bags.domains).
    argv = eval_command(query_bag, map_path, map_traj, query_traj, data_dir, replay)
    print(f"  the same from the command line:\n    g2g-eval-bag {shlex.join(argv)}")
    _, report = evaluate_args(argv + ([] if sys.stderr.isatty() else ["--quiet"]))
    replayed = report["replay"]
    print(f"  played {replayed['groups']} groups, {replayed['messages']} messages; waited for "
          f"{replayed['waited_groups']}, {replayed['wait_timeouts']} timeouts")
    if replayed["wait_timeouts"]:
        print("  WARNING: the replay did not wait for every group; the figures below may "
              "differ from run to run")
    methods = {}
    for which, task in (("pairs_index", "reloc"), ("rig_pairs_index", "rig")):
        if which not in report:
            methods[task] = {}
            continue
        # G2G alone on the relocalization windows is the node's own prediction (in the report).
        checkpoint = default_checkpoint("rig_odometry") if task == "rig" else None
        specs = default_methods([str(checkpoint)] if checkpoint else [], "default", False,
                                identity=True)
        methods[task] = evaluate_methods(task, str(data_dir), report[which]["path"], specs,
                                         str(out / f"same_pairs_{task}"), progress=False)
    return report, methods["reloc"], methods["rig"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=50, help="frames per traversal")
    parser.add_argument("--data", default=str(ROOT / "data" / "demo"))
    parser.add_argument("--out", default=str(ROOT / "outputs" / "demo"))
    opts = parser.parse_args(argv)
    data_dir, out = pathlib.Path(opts.data), pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_ros.demo_report import demo_report

    total = 5
    step(1, total, f"simulating test scene {SEED}: mapping + query traversal (other season)")
    map_traj, query_traj = simulate(data_dir, opts.frames)
    step(2, total, "converting both traversals to rosbag2 (MCAP)")
    _, query_bag = convert_bags([map_traj, query_traj], data_dir)
    pipeline = G2GPipeline.default("relocalization")
    if pipeline.untrained:
        print("\n  NOTE: no trained default checkpoint is shipped yet: the model runs with RANDOM "
              "weights,\n  so the G2G numbers below show the wiring, not the method.")
    step(3, total, "building the map from the mapping traversal")
    map_path = build_map(map_traj, data_dir / "map.g2gmap", pipeline)
    step(4, total, "g2g-eval-bag: relocalize + rig_odometry nodes on the replayed query bag")
    report, reloc_methods, rig_methods = evaluate_replay(query_bag, query_traj, map_traj,
                                                         map_path, data_dir, out)
    print(f"  recorded {report['rig_odometry']['outputs'] if 'rig_odometry' in report else 0} "
          f"odometry messages, {report['relocalization']['fixes']} accepted relocalizations")
    step(5, total, "g2g-eval on the same pairs: G2G alone, classical baseline, 'no motion'")
    text = demo_report(report, reloc_methods, rig_methods, query_traj)
    (out / "report.md").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps({
        "odometry_messages": report.get("rig_odometry", {}).get("outputs", 0),
        "relocalizations": report["relocalization"]["fixes"],
        "untrained_model": pipeline.untrained, "seconds": time.perf_counter() - t_start}))
    print("\n" + text)
    print(f"\nplots: {report['plots'][0]}\nreport: {out / 'report.md'} (the replay's own: "
          f"{out / 'replay' / 'report.md'})")
    print(f"demo finished in {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
