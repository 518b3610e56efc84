"""``g2g-bag convert TRAJ OUT`` and ``g2g-bag play BAG``.

convert: a dataset trajectory (simulator, NCLT, ZJH; g2g_model.data format) -> rosbag2 MCAP
directory OUT with images, camera_info, /tf_static, ground truth (Odometry + TF gt_world ->
gt_base_link), the odometry input odom -> base_link (drift / noise configurable) and metadata.

play: publish a bag with /clock (stamps preserved) at --rate; --eval waits for the nodes to
finish each group (--wait-topic, --also-wait, --wait-timeout) so results do not depend on
machine speed; e.g. relocalize (localize_pacing:=stamps) with rig_odometry:
``--eval --also-wait relocalize/processed std_msgs/msg/Header cam0/image_raw``.
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
    p.add_argument("--wait-topic", default="odometry")
    p.add_argument("--wait-type", default="nav_msgs/msg/Odometry",
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
        return _convert(opts) if opts.command == "convert" else _play(opts)
    except (BagError, ValueError) as exc:
        print(f"g2g-bag {opts.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
