"""One-camera bags through the evaluation replays; rig and bag must agree; the evaluation flags.

A one-camera (``mono``) simulated scene: a map of the first traversal, a query bag of the
second. Checked:

* the flags ``--params-file``, ``-p NODE.PARAM:=VALUE``, ``--initial-pose`` and
  ``--initial-pose-from-bag`` build the replay's setup (typed values, precedence, the pose at
  the first image), and unknown nodes / parameters are refused;
* the demo's graph (relocalize with rig_odometry beside it, the demo's flags) replays the
  one-camera bag over DDS with the real nodes without a single wait timeout, and rig
  odometry publishes;
* rig odometry set to a subset of the bag's cameras (``-p rig_odometry.cameras:=[...]``, as
  NCLT's up-looking camera is left out) replays the bag without waiting for subscribers on
  the cameras it does not use;
* a rig asking for cameras the bag lacks stops ``g2g-eval-bag`` (before any node starts) and
  ``g2g-bag play --eval`` (from the running node's parameters) within 10 s, exit code 2, the
  missing cameras named.
"""

import subprocess
import sys
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from g2g_model.assets import default_checkpoint  # noqa: E402
from g2g_model.estimation.pipeline import G2GPipeline  # noqa: E402
from g2g_model.maps.building import build_map_from_trajectory  # noqa: E402
from g2g_model.maps.format import save_map  # noqa: E402
from g2g_ros.bags.convert import convert_trajectory  # noqa: E402
from g2g_ros.bags.eval_bag import build_parser, evaluate_args  # noqa: E402
from g2g_ros.bags.eval_setup import first_image_stamp, setup_from_args, yaw_pose  # noqa: E402
from g2g_ros.bags.evaluation import load_ground_truth  # noqa: E402
from g2g_ros.demo import DEMO_EVAL_FLAGS  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(600)]

FRAMES = 14
FIVE = ["cam0", "cam1", "cam2", "cam3", "cam4"]
STOP_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def mono(tmp_path_factory):
    root = tmp_path_factory.mktemp("mono")
    map_traj, query_traj = tiny_trajectories(root, seed=20004, frames=FRAMES, traversals=2,
                                             rig="mono")
    checkpoint = default_checkpoint("relocalization")
    pipeline = (G2GPipeline.from_checkpoint(checkpoint) if checkpoint else
                G2GPipeline.default("relocalization"))
    gmap = build_map_from_trajectory(map_traj, pipeline, ["cam0"], min_translation_m=0.1,
                                     min_rotation_deg=5.0, progress=False)
    map_path = save_map(gmap, root / "map.g2gmap")
    bag = root / "query.mcap"
    convert_trajectory(query_traj, bag, progress=False)
    return map_path, bag


def _setup(argv, bag, graph="relocalize"):
    opts = build_parser().parse_args([str(bag), "--graph", graph, "--out", "x", *argv])
    return setup_from_args(opts, bag, graph)


def test_flags_build_the_replay_setup(mono, tmp_path):
    _, bag = mono
    params = tmp_path / "params.yaml"
    params.write_text("/**/relocalize:\n  ros__parameters:\n    localize_period_s: 2.0\n"
                      "    window_size: 4\n/**/map_builder:\n  ros__parameters:\n"
                      "    min_translation_m: 0.3\n")
    setup = _setup(["--with-odometry", "--params-file", str(params),
                    "-p", "relocalize.localize_period_s:=0.5",
                    "-p", "rig_odometry.cameras:=[cam0]", "-p", "relocalize.verify:=false",
                    "-p", "relocalize.reloc_camera:=cam0", "--log-level", "warn"], bag)
    # -p after the file; YAML-typed values; the map_builder section matches no node: ignored.
    assert setup.node_params == {
        "relocalize": {"localize_period_s": 0.5, "window_size": 4, "verify": False,
                       "reloc_camera": "cam0"},
        "rig_odometry": {"cameras": ["cam0"]}}
    assert setup.with_odometry and setup.log_level == "warn" and setup.initial_pose is None

    stamp0 = first_image_stamp(bag)
    truth = load_ground_truth(bag).at(stamp0)
    stamp, pose = _setup(["--initial-pose-from-bag", "0.3", "5.0"], bag).initial_pose
    assert stamp == stamp0
    # 0.3 m along the body's x axis, 5 deg about its z axis.
    np.testing.assert_allclose(pose[:3, 3], truth[:3, 3] + 0.3 * truth[:3, 0], atol=1e-9)
    rel = np.linalg.inv(truth) @ pose
    assert np.degrees(np.arctan2(rel[1, 0], rel[0, 0])) == pytest.approx(5.0)
    stamp, pose = _setup(["--initial-pose", "1", "2", "0.5", "90"], bag).initial_pose
    assert stamp == stamp0
    np.testing.assert_allclose(pose, yaw_pose(1, 2, 0.5, 90), atol=1e-12)
    np.testing.assert_allclose(pose[:3, 0], [0, 1, 0], atol=1e-12)   # x turned onto y


def test_domain_flag_and_its_range(mono):
    _, bag = mono
    assert _setup([], bag).domain_id is None          # a private domain (test_domains.py)
    assert _setup(["--domain-id", "42"], bag).domain_id == 42
    with pytest.raises(ValueError, match="--domain-id must be in 0-232"):
        _setup(["--domain-id", "300"], bag)


@pytest.mark.parametrize("argv, words", [
    (["-p", "relocalize.localize_perod_s:=0.5"], ["relocalize", "localize_perod_s"]),
    (["-p", "rig_odometry.keyframe_stride:=1"], ["rig_odometry", "--with-odometry"]),
    (["-p", "localize_period_s:=0.5"], ["NODE.PARAM:=VALUE"]),
    (["-p", "relocalize.cameras:=[cam0"], ["not YAML"]),
])
def test_unknown_nodes_parameters_and_bad_values_are_refused(mono, argv, words):
    with pytest.raises(ValueError) as err:
        _setup(argv, mono[1])
    assert all(w in str(err.value) for w in words), err.value


def test_eval_parameters_keep_the_presets_reloc_camera_when_the_bag_has_it(tmp_path):
    from g2g_ros.bags.eval_setup import _params_file
    from g2g_ros.bags.eval_setup import ReplaySetup
    from g2g_ros.bringup import rig_params_file
    from g2g_ros.launch_graphs import node_parameters

    nclt = rig_params_file("nclt")           # reloc_camera: cam5, the forward camera
    for cams, reloc in ((["cam1", "cam2", "cam3", "cam4", "cam5"], "cam5"), (["cam0"], "cam0")):
        path = _params_file(tmp_path / "p.yaml", cams, False, ReplaySetup(), nclt)
        merged = {n: node_parameters([nclt, path], n) for n in ("relocalize", "rig_odometry")}
        assert merged["relocalize"]["reloc_camera"] == reloc
        assert merged["relocalize"]["cameras"] == merged["rig_odometry"]["cameras"] == cams
        assert merged["rig_odometry"]["min_cameras"] == 0          # all the bag's cameras


def test_evaluation_lets_the_cameras_pause_while_a_node_works(tmp_path):
    """The player holds the next group until the nodes answered: the cameras may stay quiet
    for the replay's wait per group before a node reports them; -p still decides."""
    from g2g_ros.bags.eval_setup import ReplaySetup, _params_file
    from g2g_ros.bringup import rig_params_file
    from g2g_ros.launch_graphs import node_parameters

    sim = rig_params_file("sim")
    for quiet, setup, want in ((None, ReplaySetup(), (3.0, 3.0)),
                               (30.0, ReplaySetup(), (30.0, 30.0)),
                               (1.0, ReplaySetup(), (3.0, 3.0)),
                               (30.0, ReplaySetup(node_params={
                                   "relocalize": {"stale_after_s": 7.0}}), (7.0, 30.0))):
        path = _params_file(tmp_path / "p.yaml", ["cam0"], False, setup, sim, quiet)
        got = (node_parameters([sim, path], "relocalize").get("stale_after_s", 3.0),
               node_parameters([sim, path], "rig_odometry").get("lost_after_s", 3.0))
        assert got == want, (quiet, got)


@pytest.mark.parametrize("argv, node, missing", [
    (["-p", "relocalize.reloc_camera:=cam3"], "relocalize", ["cam3"]),
    (["--with-odometry", "-p", "rig_odometry.cameras:=[cam0,cam2]"], "rig_odometry", ["cam2"]),
    (["-p", "relocalize.use_compressed:=true"], "relocalize", ["cam0/image_raw/compressed"]),
])
def test_rig_check_names_what_each_node_misses(mono, tmp_path, argv, node, missing):
    from g2g_ros.bags.eval_setup import checked_parameters
    from g2g_ros.bags.rig_check import RigMismatch

    with pytest.raises(RigMismatch) as err:
        checked_parameters(mono[1], "relocalize", tmp_path, "sim", _setup(argv, mono[1]))
    line = [x for x in str(err.value).splitlines() if x.strip().startswith(node)]
    assert line and all(m in line[0] for m in missing), err.value
    checked_parameters(mono[1], "relocalize", tmp_path, "sim", _setup([], mono[1]))   # agrees


def test_one_camera_bag_through_relocalize_and_rig_odometry(mono, tmp_path):
    """The demo's flags on a one-camera bag: every group answered, odometry published."""
    map_path, bag = mono
    t0 = time.monotonic()
    _, report = evaluate_args([str(bag), "--graph", "relocalize", "--map", str(map_path),
                               "--out", str(tmp_path / "eval"), *DEMO_EVAL_FLAGS, "--quiet"])
    elapsed = time.monotonic() - t0
    replay = report["replay"]
    assert replay["wait_timeouts"] == 0, replay
    assert replay["waited_groups"] == FRAMES, replay
    assert report["rig_odometry"]["outputs"] >= FRAMES - 1, report["rig_odometry"]
    assert report["relocalization"]["attempts"] >= 1, report["relocalization"]
    print(f"one-camera replay: {FRAMES} groups, {replay['wait_timeouts']} wait timeouts, "
          f"{report['rig_odometry']['outputs']} odometry messages, {elapsed:.1f} s")


def test_rig_odometry_on_a_subset_of_the_bags_cameras(tmp_path):
    """A five-camera bag, rig odometry on three of them: every group answered."""
    frames = 6
    traj, = tiny_trajectories(tmp_path / "sim", seed=20004, frames=frames, rig="ring5")
    bag = tmp_path / "five.mcap"
    convert_trajectory(traj, bag, progress=False)
    _, report = evaluate_args([str(bag), "--graph", "rig_odometry", "--out",
                               str(tmp_path / "eval"), "-p",
                               "rig_odometry.cameras:=[cam0,cam1,cam2]",
                               "--startup-timeout", "40", "--wait-timeout", "20", "--quiet"])
    assert report["replay"]["wait_timeouts"] == 0, report["replay"]
    assert report["replay"]["waited_groups"] == frames, report["replay"]
    assert report["rig_odometry"]["outputs"] == frames, report["rig_odometry"]


def _assert_named_stop(proc, elapsed, missing):
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert all(cam in out for cam in missing) and "lacks cameras" in out, out
    assert elapsed < STOP_WITHIN_S, (elapsed, out)


def test_rig_mismatch_stops_g2g_eval_bag_before_the_nodes(mono, tmp_path):
    map_path, bag = mono
    out = tmp_path / "eval"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "g2g_ros.bags.eval_bag", str(bag), "--graph",
                           "relocalize", "--map", str(map_path), "--out", str(out),
                           "--with-odometry", "-p", f"rig_odometry.cameras:=[{','.join(FIVE)}]",
                           "--wait-timeout", "3"], capture_output=True, text=True, timeout=300)
    _assert_named_stop(proc, time.monotonic() - t0, FIVE[1:])
    assert not (out / "outputs").exists()          # nothing was replayed


def test_rig_mismatch_stops_g2g_bag_play_eval(mono, tmp_path):
    _, bag = mono
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry", {
        "cameras": FIVE, "use_sim_time": True, "sensor_qos_reliability": "reliable"}),
        tmp_path / "node.log")
    listener = Listener()
    try:
        up = listener.spin_until(lambda: listener.node.count_publishers("/odometry") > 0,
                                 timeout=120.0)
        assert up, node.output()
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "g2g_ros.bags.cli", "play", str(bag),
                               "--eval", "--wait-timeout", "3", "--quiet"],
                              capture_output=True, text=True, timeout=300)
        _assert_named_stop(proc, time.monotonic() - t0, FIVE[1:])
        assert node.alive()
    finally:
        listener.close()
        node.stop()


def test_groups_without_odometry_are_answered_on_processed(tmp_path):
    """With ``keyframe_stride`` 2 every other group publishes no odometry; the replay waits on
    ``rig_odometry/processed`` (one Header per group, its outcome in ``frame_id``), so no
    group waits out the timeout (waiting on ``odometry`` it did, 20 s each)."""
    frames = 6
    traj, = tiny_trajectories(tmp_path / "sim", seed=20004, frames=frames, rig="ring5")
    bag = tmp_path / "five.mcap"
    convert_trajectory(traj, bag, progress=False)
    t0 = time.monotonic()
    _, report = evaluate_args([str(bag), "--graph", "rig_odometry", "--out",
                               str(tmp_path / "eval"), "-p", "rig_odometry.keyframe_stride:=2",
                               "--startup-timeout", "40", "--wait-timeout", "20", "--quiet"])
    elapsed = time.monotonic() - t0
    assert report["replay"]["wait_timeouts"] == 0, report["replay"]
    assert report["replay"]["waited_groups"] == frames, report["replay"]
    assert report["rig_odometry"]["outputs"] == frames // 2, report["rig_odometry"]
    assert elapsed < 20 * (frames // 2), elapsed
