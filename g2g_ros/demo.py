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
    from g2g_model.map_cli import build_map_from_trajectory
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

        with tqdm(total=frames, desc="  replaying the query bag", unit="group",
                  mininterval=5.0) as bar:
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


def _stamp(msg_stamp) -> int:
    return msg_stamp.sec * 10**9 + msg_stamp.nanosec


def evaluate(map_traj, query_traj, data, out: pathlib.Path) -> str:
    from g2g_model.baseline.classical import ClassicalBaseline
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.geometry import invert_pose
    from g2g_model.metrics import format_markdown_table, pose_errors, summarize_errors
    from g2g_ros.pose_msgs import pose_msg_to_matrix

    mreader, qreader = TrajectoryReader(map_traj), TrajectoryReader(query_traj)
    m_index = {int(t): i for i, t in enumerate(mreader.timestamps_ns)}
    q_index = {int(t): i for i, t in enumerate(qreader.timestamps_ns)}
    baseline = ClassicalBaseline()
    q_cam = qreader.world_T_cam(RIG_CAMERA)
    K = qreader.rig[RIG_CAMERA].K

    # --- relocalization: the node's windows, G2G vs classical on the same frames
    g2g_pred, cls_pred, gts = [], [], []
    for align in data["alignment"]:
        ia = [m_index[_stamp(s)] for s in align.stamps_a]
        ib = [q_index[_stamp(s)] for s in align.stamps_b]
        map_camera = align.group_a_id.split(":")[2]  # "map:<id>:<camera>:<stamp>"
        m_cam, Km = mreader.world_T_cam(map_camera), mreader.rig[map_camera].K
        gts.append(invert_pose(m_cam[ia[0]]) @ q_cam[ib[0]])
        g2g_pred.append(pose_msg_to_matrix(align.poses_b[0]))
        res = baseline.predict(([mreader.image(map_camera, i) for i in ia], Km, m_cam[ia]),
                               ([qreader.image(RIG_CAMERA, i) for i in ib], K, q_cam[ib]))
        cls_pred.append(res.pose_b0)
    summaries = {}
    if gts:
        summaries["relocalization G2G (T_A0<-B0)"] = summarize_errors(pose_errors(g2g_pred, gts))
        summaries["relocalization classical, same windows"] = summarize_errors(
            pose_errors(cls_pred, gts))
        # "No motion" predicts the identity: any useful method must beat it.
        summaries["relocalization 'no motion' reference"] = summarize_errors(
            pose_errors(np.stack([np.eye(4)] * len(gts)), gts))

    # --- corrected robot pose vs drifting odometry alone (position error in metres)
    gt_body = {int(t): qreader.world_T_body[i] for i, t in enumerate(qreader.timestamps_ns)}
    poses = {_stamp(p.header.stamp): pose_msg_to_matrix(p.pose.pose) for p in data["pose"]}
    err_at = {s: float(np.linalg.norm(T[:3, 3] - gt_body[s][:3, 3])) for s, T in poses.items()
              if s in gt_body}
    corr_err = list(err_at.values())
    # --- the published fixes (G2G + geometric verification) as T_A0<-B0 on the same windows
    base_T_cam0 = qreader.rig[RIG_CAMERA].T_body_cam
    fixes = [(invert_pose(mreader.world_T_cam(a.group_a_id.split(":")[2])[
        m_index[_stamp(a.stamps_a[0])]]) @ poses[_stamp(a.header.stamp)] @ base_T_cam0, gt)
        for a, gt in zip(data["alignment"], gts) if _stamp(a.header.stamp) in poses]
    if fixes:
        summaries["relocalization published fix (G2G + verification)"] = summarize_errors(
            pose_errors([f for f, _ in fixes], [g for _, g in fixes]))
    paths = [(a.path or "g2g", err_at.get(_stamp(a.header.stamp), np.nan))
             for a in data["alignment"]]

    # --- rig odometry: consecutive keyframes, G2G node vs classical on the same rig pairs
    odo = [(_stamp(o.header.stamp), pose_msg_to_matrix(o.pose.pose)) for o in data["odometry"]]
    odo = [(s, T) for s, T in odo if s in q_index]
    rig_g2g, rig_cls, rig_gt = [], [], []
    cams = qreader.cameras
    body_T = qreader.rig.T_body_cams()
    for (s0, T0), (s1, T1) in list(zip(odo, odo[1:]))[:12]:
        i0, i1 = q_index[s0], q_index[s1]
        rig_gt.append(invert_pose(qreader.world_T_body[i0]) @ qreader.world_T_body[i1])
        rig_g2g.append(invert_pose(T0) @ T1)
        res = baseline.predict(([qreader.image(c, i0) for c in cams], qreader.rig.intrinsics(),
                                body_T), ([qreader.image(c, i1) for c in cams],
                                          qreader.rig.intrinsics(), body_T))
        # classical gives T_{cam0(t0) <- cam0(t1)}; move it to the body frame
        rig_cls.append(body_T[0] @ res.pose_b0 @ invert_pose(body_T[0]))
    if rig_gt:
        summaries["rig odometry G2G (body motion per keyframe step)"] = summarize_errors(
            pose_errors(rig_g2g, rig_gt))
        summaries["rig odometry classical, same steps"] = summarize_errors(
            pose_errors(rig_cls, rig_gt))
        summaries["rig odometry 'no motion' reference"] = summarize_errors(
            pose_errors(np.stack([np.eye(4)] * len(rig_gt)), rig_gt))
    cols = ("n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean",
            "trans_err_median", "rra@5", "rta@15")
    table = format_markdown_table(summaries, columns=cols, title="method") if summaries else \
        "(no outputs recorded)\n"
    drift = [np.linalg.norm(qreader.world_T_body[0][:3, 3] - qreader.world_T_body[-1][:3, 3])]
    lines = [table]
    if corr_err:
        lines.append(f"relocalized robot position vs ground truth: mean {np.mean(corr_err):.3f} "
                     f"m, median {np.median(corr_err):.3f} m over {len(corr_err)} fixes")
    if paths:
        counts = {k: [p for p, _ in paths].count(k) for k in ("verified", "refined", "g2g")}
        lines.append(f"fixes by path: {counts['verified']} verified, {counts['refined']} refined"
                     f" (geometry corrected G2G), {counts['g2g']} G2G alone; per fix: "
                     + ", ".join(f"{p} {e:.3f} m" for p, e in paths))
    lines.append(f"query traversal: {qreader.num_frames} frames, start-to-end "
                 f"{drift[0]:.1f} m; odometry drift injected: 2 %/m scale, 1 deg/m heading")
    _plot(qreader, odo, data, out)
    return "\n".join(lines)


def _plot(qreader, odo, data, out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from g2g_model.geometry import invert_pose
    from g2g_ros.pose_msgs import pose_msg_to_matrix

    gt = qreader.world_T_body
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.plot(gt[:, 0, 3], gt[:, 1, 3], "k-", label="ground truth")
    if odo:
        # odometry starts at the identity: express it in the world frame of the first frame
        w0 = gt[0]
        pts = np.stack([(w0 @ T)[:3, 3] for _, T in odo])
        ax.plot(pts[:, 0], pts[:, 1], "b.-", label="G2G rig odometry")
    if data["pose"]:
        pts = np.stack([pose_msg_to_matrix(p.pose.pose)[:3, 3] for p in data["pose"]])
        ax.plot(pts[:, 0], pts[:, 1], "r*", markersize=10, label="G2G relocalized poses")
    del invert_pose
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend()
    ax.set_title("demo: query traversal (top view)")
    fig.tight_layout()
    fig.savefig(out / "trajectories.png", dpi=120)
    plt.close(fig)


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
    report = evaluate(map_traj, query_traj, data, out)
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
