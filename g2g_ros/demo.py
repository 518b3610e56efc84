"""`make demo`: relocalization and rig odometry end to end on the embedded default.

1. simulate a small scene of the test split: a mapping traversal and a query traversal in a
   different season (lighting, paint, posters, small objects), 5-camera rig;
2. convert both traversals to rosbag2 (MCAP) bags; the query bag carries a drifting odometry
   (2 %/m scale, 1 deg/m heading) as its odom->base_link input;
3. build a map from the mapping traversal (keyframes of the reference camera + cached tokens);
4. start the relocalize and rig_odometry nodes (g2g-bringup's graph, use_sim_time) and replay
   the query bag into them over DDS with /clock (`g2g-bag play --eval`: each image group waits
   until rig_odometry has published its odometry and relocalize has reported it done on
   relocalize/processed -- relocalize localizes every 0.5 s of *bag* time,
   ``localize_pacing: stamps`` -- so results do not depend on machine speed; the operator's
   initial pose is sent before the replay and takes effect at the first image), recording
   their outputs;
5. evaluate against ground truth, with the classical baseline (SIFT + RANSAC) run on exactly the
   same groups, print a table, and write trajectory plots.

Everything is CPU-only and offline; generated data goes to data/demo/ and outputs/demo/.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time
from typing import Dict, List

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = 20000            # a test-split scene: never used for training
RIG_CAMERA = "cam0"


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
    from g2g_model.map_building import build_map_from_trajectory
    from g2g_model.maps import save_map

    # Keyframes of every camera of the mapping run: the query traversal revisits places in the
    # other direction, where another camera of the mapping run saw what the query camera sees.
    gmap = build_map_from_trajectory(traj, pipeline, None, min_translation_m=0.1,
                                     min_rotation_deg=5.0, progress=False)
    path = save_map(gmap, out)
    print(f"  {len(gmap)} keyframes of {gmap.cameras()} -> {path}")
    return path


class Recorder:
    """Subscribes to the nodes' outputs inside this process."""

    def __init__(self):
        import rclpy
        from geometry_msgs.msg import PoseWithCovarianceStamped
        from nav_msgs.msg import Odometry

        from g2g_msgs.msg import EstimatorStatus, GroupAlignment

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("g2g_demo_recorder", context=self.context)
        self.executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.data: Dict[str, List] = {"odometry": [], "pose": [], "alignment": [],
                                      "reloc_status": [], "odom_status": []}
        sub = self.node.create_subscription
        sub(Odometry, "odometry", self.data["odometry"].append, 100)
        sub(PoseWithCovarianceStamped, "relocalize/pose", self.data["pose"].append, 100)
        sub(GroupAlignment, "relocalize/alignment", self.data["alignment"].append, 100)
        sub(EstimatorStatus, "relocalize/status", self.data["reloc_status"].append, 100)
        sub(EstimatorStatus, "rig_odometry/status", self.data["odom_status"].append, 100)

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


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


def send_initial_pose(recorder, query_traj, stamp_ns: int) -> None:
    """What an operator does in RViz: an initial pose near the truth (0.3 m, 5 deg off)."""
    from geometry_msgs.msg import PoseWithCovarianceStamped

    from g2g_model.data.format import TrajectoryReader
    from g2g_model.geometry import axis_angle_to_matrix, make_pose
    from g2g_ros.node_common import to_stamp
    from g2g_ros.pose_msgs import matrix_to_pose_msg

    reader = TrajectoryReader(query_traj)
    k = int(np.argmin(np.abs(reader.timestamps_ns - stamp_ns)))
    guess = reader.world_T_body[k] @ make_pose(axis_angle_to_matrix([0, 0, np.radians(5.0)]),
                                               [0.3, 0.0, 0.0])
    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = "map"
    msg.header.stamp = to_stamp(int(reader.timestamps_ns[k]))
    matrix_to_pose_msg(guess, msg.pose.pose)
    pub = recorder.node.create_publisher(PoseWithCovarianceStamped, "/initialpose", 10)
    for _ in range(5):
        pub.publish(msg)
        recorder.spin(0.2)
    print("  sent /initialpose near the true start (0.3 m, 5 deg off), as an operator would")


def run_nodes(query_bag, query_traj, map_path, workdir: pathlib.Path, rate_hz: float,
              frames: int):
    from g2g_ros.bringup import GraphRunner, node_commands, parse_launch_args
    from g2g_ros.graphs import GRAPHS

    overrides = workdir / "demo_params.yaml"
    overrides.write_text(
        "/**/relocalize:\n  ros__parameters:\n    localize_period_s: 0.5\n"
        "    localize_pacing: stamps\n    tf_wait_s: 5.0\n"
        "    consistency_count: 1\n    min_translation_m: 0.05\n"
        "    sensor_qos_reliability: reliable\n"
        "/**/rig_odometry:\n  ros__parameters:\n    publish_tf: false\n"
        "    keyframe_stride: 1\n    sensor_qos_reliability: reliable\n"
        # The eval replay pauses the cameras while relocalize works: not a camera fault.
        "    lost_after_s: 120.0\n")
    graph = GRAPHS["relocalize"]
    args = parse_launch_args(graph, ["rig:=sim", f"map:={map_path}", "with_odometry:=true",
                                     "use_sim_time:=true", f"params_file:={overrides}",
                                     "log_level:=warn"])
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", str(90 + os.getpid() % 9)))
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
    recorder = Recorder()
    runner = GraphRunner(node_commands(graph, args), env=env).start()
    player = None
    try:
        print("  waiting for the nodes to come up ...", flush=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (recorder.data["reloc_status"]
                                                   and recorder.data["odom_status"]):
            recorder.spin(0.5)
            if runner.poll() is not None:
                raise RuntimeError("a node exited during start-up")
        import subprocess

        from g2g_model.data.format import TrajectoryReader

        # Before the replay, stamped at the first image: relocalize holds it until the odometry
        # at that stamp arrives, so it takes effect at the same image on every run.
        send_initial_pose(recorder, query_traj, int(TrajectoryReader(query_traj).timestamps_ns[0]))
        play_log = open(workdir / "play.log", "w")
        player = subprocess.Popen(
            [sys.executable, "-m", "g2g_ros.bags.cli", "play", str(query_bag), "--eval",
             "--also-wait", "relocalize/processed", "std_msgs/msg/Header",
             f"{RIG_CAMERA}/image_raw", "--rate", str(rate_hz), "--quiet"],
            stdout=play_log, stderr=subprocess.STDOUT, env=env)
        from tqdm import tqdm

        # A progress bar on a terminal; quiet in logs and CI (the summary line follows).
        with tqdm(total=frames, desc="  replaying the query bag", unit="group",
                  mininterval=5.0, disable=not sys.stderr.isatty()) as bar:
            while player.poll() is None:
                recorder.spin(0.5)
                bar.n = min(frames, len(recorder.data["odometry"]))
                bar.set_postfix(fixes=len(recorder.data["alignment"]))
                bar.refresh()
            bar.n = len(recorder.data["odometry"])
            bar.refresh()
        recorder.spin(6.0)  # let the last groups finish
        report_replay(workdir / "play.log")
    finally:
        if player is not None and player.poll() is None:
            player.terminate()
        if player is not None:
            play_log.close()
        runner.stop()
        data = recorder.data
        recorder.close()
    return data


def report_replay(log: pathlib.Path) -> None:
    """Print the player's summary; a group the nodes did not finish in time is said loudly
    (the figures then depend on the machine's speed)."""
    lines = log.read_text().splitlines()
    summary = next((line for line in reversed(lines) if line.startswith("played ")),
                   "(the player printed no summary)")
    print(f"  {summary}")
    if "played " not in summary or " 0 timeouts" not in summary:
        print(f"  WARNING: the replay did not wait for every group (see {log}); the figures "
              "below may differ from run to run")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=50, help="frames per traversal")
    parser.add_argument("--rate", type=float, default=1.0, help="replay speed factor")
    parser.add_argument("--data", default=str(ROOT / "data" / "demo"))
    parser.add_argument("--out", default=str(ROOT / "outputs" / "demo"))
    opts = parser.parse_args(argv)
    data_dir, out = pathlib.Path(opts.data), pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    from g2g_model.inference import G2GPipeline
    from g2g_ros.demo_report import evaluate

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
    step(4, total, "running relocalize + rig_odometry nodes on the replayed query bag")
    data = run_nodes(query_bag, query_traj, map_path, out, opts.rate, opts.frames)
    print(f"  recorded {len(data['odometry'])} odometry messages, {len(data['alignment'])} "
          f"accepted relocalizations, {len(data['pose'])} relocalized poses")
    step(5, total, "evaluating against ground truth (classical baseline on the same groups)")
    report = evaluate(map_traj, query_traj, data, out, RIG_CAMERA)
    (out / "report.md").write_text(report + "\n")
    (out / "summary.json").write_text(json.dumps({
        "odometry_messages": len(data["odometry"]), "relocalizations": len(data["alignment"]),
        "untrained_model": pipeline.untrained, "seconds": time.perf_counter() - t_start}))
    print("\n" + report)
    print(f"\nplots: {out / 'trajectories.png'}\nreport: {out / 'report.md'}")
    print(f"demo finished in {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
