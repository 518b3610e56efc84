"""g2g-bag play to a subscriber over real DDS, and g2g-eval-bag end to end with the real
rig_odometry node (random weights unless an embedded default exists: the report says so).

The evaluation's pairwise numbers are recomputed here independently -- poses from the recorded
output bag, ground truth and extrinsics from the *dataset* -- with g2g_model.metrics and must
equal the report's.
"""

import json
import re
import sys

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rosbags.highlevel import AnyReader  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.data.mining import RigPair, read_index  # noqa: E402
from g2g_model.geometry import invert_pose  # noqa: E402
from g2g_model.metrics import kitti_odometry_errors, summarize_pairs  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from g2g_ros.bags.convert import convert_trajectory  # noqa: E402
from g2g_ros.bags.eval_bag import PairsIndexSpec, evaluate_bag  # noqa: E402
from g2g_ros.conversions import pose_to_matrix, stamp_ns  # noqa: E402
from ros_helpers import Listener, Proc  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20003, frames=15)[0]


@pytest.fixture(scope="module")
def bag(traj, tmp_path_factory):
    out = tmp_path_factory.mktemp("bags") / "tiny.mcap"
    convert_trajectory(traj, out, progress=False)
    return out


def test_play_to_a_subscriber_with_clock(traj, bag, tmp_path):
    reader = TrajectoryReader(traj)
    stamps = [int(s) for s in reader.timestamps_ns]
    listener = Listener("g2g_bag_test_listener")
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    images = listener.collect(Image, "cam2/image_raw", 50)
    gts = listener.collect(Odometry, "ground_truth/odometry", 50)
    clocks = listener.collect(Clock, "/clock", 50)
    static = listener.collect(TFMessage, "/tf_static", latched)
    player = Proc([sys.executable, "-m", "g2g_ros.bags.cli", "play", str(bag), "--rate", "3",
                   "--delay", "2", "--quiet"], tmp_path / "play.log")
    try:
        ok = listener.spin_until(lambda: len(gts) == 15 and len(images) == 15, timeout=40)
        assert ok, f"got {len(gts)} gt, {len(images)} images\n{player.output()}"
        listener.spin_until(lambda: not player.alive() and static, timeout=10)
    finally:
        out = player.stop()
        listener.close()
    assert "played" in out, out
    assert "acknowledged" not in out, out  # the player waited until the last group was acked
    assert [stamp_ns(m.header.stamp) for m in gts] == stamps      # stamps preserved, in order
    assert [stamp_ns(m.header.stamp) for m in images] == stamps
    for i, img in enumerate(images):
        assert bytes(img.data) == reader.image("cam2", i).tobytes()
    clock_ns = [stamp_ns(c.clock) for c in clocks]
    assert clock_ns == sorted(clock_ns) and set(stamps) <= set(clock_ns)
    assert len(static) == 1 and len(static[0].transforms) == 5


def test_eval_bag_end_to_end_matches_library_metrics(traj, bag, tmp_path):
    out_dir = tmp_path / "eval"
    index = tmp_path / "rig_pairs.csv"
    report = evaluate_bag(bag, "rig_odometry", out_dir, startup_timeout=90, progress=False,
                          pairs_index=PairsIndexSpec(str(index), str(traj.parents[1])))
    md = (out_dir / "report.md").read_text()
    saved = json.loads((out_dir / "report.json").read_text())
    assert (out_dir / "trajectories.png").stat().st_size > 5000
    assert not re.search(r"\bnan\b", md, re.IGNORECASE)
    assert saved["replay"]["wait_timeouts"] == 0 and saved["replay"]["waited_groups"] == 15
    flags = saved["untrained_model"]
    assert flags, "the node's diagnostics (untrained_model) were not recorded"
    if any(flags.values()):
        assert "RANDOM (untrained) weights" in md
    odo = saved["rig_odometry"]
    assert odo["outputs"] == 15 and odo["pairs"] == 14
    assert "SHORT segments" in md and odo["kitti"]["n_segments"] > 0

    # Independent recomputation: recorded odometry + the dataset's ground truth.
    reader = TrajectoryReader(traj)
    gt = {int(s): T for s, T in zip(reader.timestamps_ns, reader.world_T_body)}
    Tbc = reader.rig["cam0"].T_body_cam
    odom = {}
    with AnyReader([out_dir / "outputs"]) as r:
        conns = [c for c in r.connections if c.topic == "odometry"]
        for conn, _, raw in r.messages(connections=conns):
            msg = r.deserialize(raw, conn.msgtype)
            odom[stamp_ns(msg.header.stamp)] = pose_to_matrix(msg.pose.pose)
    keys = sorted(odom)
    assert keys == sorted(gt)
    preds = [invert_pose(Tbc) @ invert_pose(odom[a]) @ odom[b] @ Tbc
             for a, b in zip(keys[:-1], keys[1:])]
    gts = [invert_pose(Tbc) @ invert_pose(gt[a]) @ gt[b] @ Tbc
           for a, b in zip(keys[:-1], keys[1:])]
    expected = summarize_pairs(np.stack(preds), np.stack(gts))["all"]
    for key, value in expected.items():
        got = saved["rig_odometry"]["pairwise"][key]
        if value is None:
            assert got is None, key
        else:
            assert got == pytest.approx(value, rel=1e-9, abs=1e-9), key
    g = np.stack([invert_pose(gt[keys[0]]) @ gt[k] for k in keys])
    o = np.stack([invert_pose(odom[keys[0]]) @ odom[k] for k in keys])
    kitti = kitti_odometry_errors(g, o, odo["kitti"]["segment_lengths_m"], step_frames=1)
    assert saved["rig_odometry"]["kitti"]["rte_pct"] == pytest.approx(kitti["rte_pct"])
    assert saved["rig_odometry"]["kitti"]["rre_deg_per_100m"] == pytest.approx(
        kitti["rre_deg_per_100m"])
    assert report["rig_odometry"]["pairs"] == 14
    # The evaluated pairs as a g2g-eval rig index: consecutive keyframes of the trajectory.
    rows = read_index(index, RigPair)
    assert [(r.frame_a, r.frame_b) for r in rows] == [(k, k + 1) for k in range(14)]
    assert {r.traj_a for r in rows} == {r.traj_b for r in rows} == {
        str(traj.relative_to(traj.parents[1]))}
    assert saved["pairs_index"]["path"] == str(index)


def test_wait_specs_select_their_groups_and_read_header_answers():
    from std_msgs.msg import Header

    from g2g_ros.bags.cli import build_parser
    from g2g_ros.bags.player import WaitSpec, _Progress
    from g2g_ros.conversions import to_stamp

    odo = WaitSpec()
    reloc = WaitSpec("relocalize/processed", "std_msgs/msg/Header",
                     image_topics=("cam0/image_raw",))
    assert odo.concerns({"cam1/image_raw"}) and not odo.concerns(set())
    assert reloc.concerns({"cam0/image_raw", "cam1/image_raw"})
    assert not reloc.concerns({"cam1/image_raw"})
    progress = _Progress()
    progress.on_msg(Header(stamp=to_stamp(5 * 10**9), frame_id="buffered"))
    assert progress.done(5 * 10**9, -1) and not progress.done(5 * 10**9 + 1, -1)
    opts = build_parser().parse_args(["play", "b", "--eval", "--also-wait", "relocalize/processed",
                                      "std_msgs/msg/Header", "cam0/image_raw"])
    assert opts.also_wait == [["relocalize/processed", "std_msgs/msg/Header", "cam0/image_raw"]]
