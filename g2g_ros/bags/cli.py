"""``g2g-bag convert TRAJ OUT``, ``g2g-bag from-ros1 BAG OUT`` and ``g2g-bag play BAG``.

convert: a dataset trajectory (simulator, NCLT, ZJH; g2g_model.data format) -> rosbag2 MCAP
directory OUT with images, camera_info, /tf_static, ground truth (Odometry + TF gt_world ->
gt_base_link), the odometry input odom -> base_link (drift / noise configurable) and metadata.

from-ros1: a ROS 1 bag -> the same layout; a topic map (--topic-map FILE and/or flags) names the
image topics of the rig (--camera NAME=TOPIC, rig order), the body frame (--body-frame), the
ground truth (--ground-truth-odometry TOPIC or --ground-truth-tf WORLD_FRAME) and, optionally,
a calibration file for cameras without camera_info / TF in the bag (g2g_ros/bags/ros1_topics.py;
--list-topics shows what a bag has).

play: publish a bag with /clock (stamps preserved) at --rate; --eval waits for the nodes to
finish each group (--wait-topic, --also-wait, --wait-timeout) so results do not depend on
machine speed; e.g. relocalize (localize_pacing:=stamps) with rig_odometry:
``--eval --also-wait relocalize/processed std_msgs/msg/Header cam0/image_raw``. With --eval,
each node that comes up on a wait topic is asked for its cameras (its parameters); a node set
to use cameras the bag lacks stops the replay before the first group (exit code 2, the missing
cameras named).
Start the nodes with use_sim_time:=true (g2g-bringup GRAPH use_sim_time:=true, or
ros2 launch g2g_ros <graph>.launch.py use_sim_time:=true).
"""

from __future__ import annotations

import argparse
import logging
import sys

from g2g_ros.bags.bag_reader import BagError


def _convert(opts) -> int:
    from g2g_ros.bags.convert import OdometrySource, convert_trajectory

    odom = OdometrySource(opts.drift, opts.yaw_drift, opts.noise_trans, opts.noise_rot,
                          opts.seed)
    summary = convert_trajectory(opts.traj, opts.out, compressed=opts.compressed,
                                 odometry=odom, jpeg_quality=opts.jpeg_quality,
                                 progress=not opts.quiet)
    total = sum(summary.counts.values())
    print(f"wrote {summary.bag}: {summary.frames} frames, cameras {summary.cameras}, "
          f"{total} messages on {len(summary.counts)} topics")
    return 0


def _from_ros1(opts) -> int:
    from g2g_ros.bags.ros1 import convert_ros1, open_ros1
    from g2g_ros.bags.ros1_topics import load_topic_map

    if opts.list_topics:
        reader = open_ros1(opts.bag)
        try:
            for topic, info in sorted(reader.topics.items()):
                print(f"{topic}  {info.msgtype}  {info.msgcount}")
        finally:
            reader.close()
        return 0
    if not opts.out:
        raise ValueError("the output bag directory OUT is required")
    gt = ({"odometry": opts.ground_truth_odometry} if opts.ground_truth_odometry else
          {"tf": opts.ground_truth_tf} if opts.ground_truth_tf else None)
    odo = ({"odometry": opts.odometry_topic} if opts.odometry_topic else
           {"tf": opts.odometry_tf} if opts.odometry_tf else None)
    tmap = load_topic_map(opts.topic_map, opts.camera or (), opts.body_frame, gt, odo,
                          opts.calibration, opts.sync_slop_ms)
    summary = convert_ros1(opts.bag, opts.out, tmap, opts.start, opts.duration,
                           opts.gt_max_gap, progress=not opts.quiet)
    total = sum(summary.counts.values())
    meta = summary.metadata
    print(f"wrote {summary.bag}: {summary.frames} rig groups "
          f"({meta['ground_truth']['frames_with_ground_truth']} with ground truth), cameras "
          f"{summary.cameras}, {total} messages on {len(summary.counts)} topics"
          + (f"; {meta['unmatched_images']} images without a group" if
             meta["unmatched_images"] else ""))
    return 0


def _play(opts) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from g2g_ros.bags.player import BagPlayer, WaitSpec
    from g2g_ros.qos import prefer_large_shm_profile

    wait = None
    if opts.eval:
        wait = [WaitSpec(opts.wait_topic, opts.wait_type, opts.wait_timeout,
                         opts.startup_timeout)]
        for spec in opts.also_wait or ():
            if len(spec) < 2:
                raise ValueError(f"--also-wait needs TOPIC TYPE [IMAGE_TOPIC ...], got {spec}")
            topic, msgtype, *images = spec
            wait.append(WaitSpec(topic, msgtype, opts.wait_timeout, opts.startup_timeout,
                                 tuple(images)))
    prefer_large_shm_profile()
    rclpy.init(args=[sys.argv[0]] + opts.ros_args)
    player = None
    try:
        player = BagPlayer(opts.bag, opts.rate, wait, clock=not opts.no_clock,
                           exclude_tf_children=opts.exclude_tf_child or (),
                           topics=opts.topics)
        executor = SingleThreadedExecutor()
        executor.add_node(player)
        stats = player.play(lambda t: executor.spin_once(timeout_sec=t),
                            progress=not opts.quiet, delay_s=opts.delay)
        print(f"played {stats.groups} groups, {stats.messages} messages"
              + (f"; waited for {stats.waited_groups}, {stats.wait_timeouts} timeouts "
                 f"{stats.timeouts_by_topic}" if opts.eval else ""))
    except (KeyboardInterrupt, ExternalShutdownException):
        return 130
    except TimeoutError as exc:
        print(f"g2g-bag play: {exc}", file=sys.stderr)
        return 3
    finally:
        if player is not None:
            player.destroy_node()
        rclpy.try_shutdown()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="g2g-bag", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert", help="dataset trajectory -> rosbag2 MCAP")
    c.add_argument("traj", help="trajectory directory (g2g_model.data format)")
    c.add_argument("out", help="output bag directory (must not exist), e.g. run.mcap")
    c.add_argument("--compressed", action="store_true",
                   help="sensor_msgs/CompressedImage (jpeg) on <cam>/image_raw/compressed")
    c.add_argument("--jpeg-quality", type=int, default=95)
    c.add_argument("--drift", type=float, default=0.0, help="odometry scale drift per m")
    c.add_argument("--yaw-drift", type=float, default=0.0, help="odometry deg of heading per m")
    c.add_argument("--noise-trans", type=float, default=0.0, help="odometry step noise (m)")
    c.add_argument("--noise-rot", type=float, default=0.0, help="odometry step noise (deg)")
    c.add_argument("--seed", type=int, default=0, help="seed of the odometry noise")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    r = sub.add_parser("from-ros1", help="ROS 1 bag -> rosbag2 MCAP")
    r.add_argument("bag", help="ROS 1 bag file (.bag)")
    r.add_argument("out", nargs="?", help="output bag directory (must not exist)")
    r.add_argument("--list-topics", action="store_true",
                   help="print the bag's topics (type, count) and exit")
    r.add_argument("--topic-map", default=None, help="topic map YAML (flags override it)")
    r.add_argument("--camera", action="append", metavar="NAME=TOPIC",
                   help="a camera of the rig and its image topic (repeat, rig order)")
    r.add_argument("--body-frame", default=None, help="the bag's body frame (-> base_link)")
    r.add_argument("--ground-truth-odometry", default=None, metavar="TOPIC",
                   help="ground truth: a nav_msgs/Odometry topic")
    r.add_argument("--ground-truth-tf", default=None, metavar="WORLD_FRAME",
                   help="ground truth: the TF chain WORLD_FRAME -> body frame on /tf")
    r.add_argument("--odometry-topic", default=None, metavar="TOPIC",
                   help="odom -> base_link input from this Odometry topic (default: the "
                        "ground truth)")
    r.add_argument("--odometry-tf", default=None, metavar="ODOM_FRAME",
                   help="odom -> base_link input from the TF chain ODOM_FRAME -> body frame")
    r.add_argument("--calibration", default=None,
                   help="calibration file for cameras without camera_info / TF in the bag")
    r.add_argument("--sync-slop-ms", type=float, default=None,
                   help="images within this of the first camera's stamp form a rig group")
    r.add_argument("--start", type=float, default=0.0,
                   help="seconds after the first image to start at")
    r.add_argument("--duration", type=float, default=None, help="seconds to convert")
    r.add_argument("--gt-max-gap", type=float, default=1.0,
                   help="largest gap (s) between Odometry samples to interpolate across")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    p = sub.add_parser("play", help="publish a bag with /clock")
    p.add_argument("bag", help="bag directory (or the .mcap file inside it)")
    p.add_argument("--rate", type=float, default=1.0, help="playback speed factor")
    p.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    p.add_argument("--delay", type=float, default=0.0,
                   help="seconds to wait before playing (publisher discovery)")
    p.add_argument("--topics", nargs="*", default=None, help="play only these topics")
    p.add_argument("--exclude-tf-child", nargs="*", default=None, metavar="FRAME",
                   help="drop these child frames from /tf (e.g. base_link when a node "
                        "publishes odom->base_link itself)")
    p.add_argument("--eval", action="store_true",
                   help="wait for the nodes to finish each group before the next")
    p.add_argument("--wait-topic", default="rig_odometry/processed",
                   help="a topic stamped at or after each group once the node is done with it "
                        "(default: rig_odometry's, one per group, also for groups that "
                        "publish no odometry)")
    p.add_argument("--wait-type", default="std_msgs/msg/Header",
                   help="type of --wait-topic (g2g_msgs/msg/EstimatorStatus for a status "
                        "topic: waits for groups_processed to increase)")
    p.add_argument("--also-wait", nargs="+", action="append", default=None,
                   metavar="TOPIC TYPE [IMAGE_TOPIC]",
                   help="another node to wait for (repeatable): its topic, its type and, "
                        "optionally, the image topics it listens to (default: all), e.g. "
                        "relocalize/processed std_msgs/msg/Header cam0/image_raw")
    p.add_argument("--wait-timeout", type=float, default=30.0, help="seconds per group")
    p.add_argument("--startup-timeout", type=float, default=120.0,
                   help="seconds to wait for the nodes to come up")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    opts, ros_args = parser.parse_known_args(argv)
    opts.ros_args = ros_args
    if ros_args and opts.command != "play":
        parser.error(f"unrecognized arguments: {' '.join(ros_args)}")
    logging.basicConfig(level=logging.INFO, format="[%(name)s] %(message)s")
    try:
        run = {"convert": _convert, "from-ros1": _from_ros1, "play": _play}[opts.command]
        return run(opts)
    except (BagError, ValueError) as exc:
        print(f"g2g-bag {opts.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
