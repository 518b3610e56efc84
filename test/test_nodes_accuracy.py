"""rig_odometry against ground truth: the shipped rig model, a real node process, real DDS.

A held-out simulator traversal (test seed, never trained on) with the rig the embedded model was
trained on (ring4, 4 cameras) is streamed by the dataset player with /clock into the
``rig_odometry`` node running the embedded default checkpoint. Every published odometry pose is
compared with the ground-truth body pose at the same stamp.

Stated tolerance for the embedded default, per keyframe step and relative to "no motion" on the
same steps (the size of the true motion): mean translation error at most ``MAX_TRANS_RATIO`` of
it, mean rotation error at most ``MAX_ROT_RATIO`` of it; the end drift is reported, not bounded.
The bounds were set when the default did not use its images (it predicted the simulator's
typical step); the current one does (test_rig_uses_images.py; held-out figures in
docs/TRAINING.md), and the bounds were kept: they catch gross errors of the node, not the
model's accuracy. What the test checks is the node around
the model: motion inverted (0.47 m step error, measured), composed in the camera instead of the
body frame (99 deg, 0.28 m, measured) or through the wrong camera's extrinsics (a 90 deg turn
of a 0.24 m step is a 0.34 m error) all break the bounds, and so does "no motion".
Verification is never deferred here (``verify_max_deferred`` 0), so the figures do not depend on
how loaded the machine is.
"""

import pathlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from nav_msgs.msg import Odometry  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.geometry import rotation_angle_deg  # noqa: E402
from g2g_ros.conversions import header_ns, pose_to_matrix  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, player_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.ros, pytest.mark.timeout(400)]

FRAMES = 16
MAX_TRANS_RATIO = 0.5
MAX_ROT_RATIO = 1.5


def step_errors(pred: np.ndarray, gt: np.ndarray):
    """Per-step rotation (deg) and translation (m) errors of ``pred`` vs ``gt`` ([K,4,4] each,
    same stamps), and the same for "no motion" (the size of each true step)."""
    rot, trans, rot0, trans0 = [], [], [], []
    for k in range(1, len(gt)):
        d_gt = np.linalg.inv(gt[k - 1]) @ gt[k]
        d_pred = np.linalg.inv(pred[k - 1]) @ pred[k]
        err = np.linalg.inv(d_gt) @ d_pred
        rot.append(rotation_angle_deg(err[:3, :3]))
        trans.append(np.linalg.norm(d_pred[:3, 3] - d_gt[:3, 3]))
        rot0.append(rotation_angle_deg(d_gt[:3, :3]))
        trans0.append(np.linalg.norm(d_gt[:3, 3]))
    return (np.array(rot), np.array(trans)), (np.array(rot0), np.array(trans0))


@pytest.fixture(scope="module")
def held_out_traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim_acc"), seed=20002, frames=FRAMES,
                             rig="ring4")[0]


def test_rig_odometry_matches_ground_truth(held_out_traj, tmp_path):
    reader = TrajectoryReader(held_out_traj)
    stamp_index = {int(t): k for k, t in enumerate(reader.timestamps_ns)}
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    cams = ["cam0", "cam1", "cam2", "cam3"]
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry",
                         {"use_sim_time": True, "cameras": cams,
                          "sensor_qos_reliability": "reliable",
                          # Every step verified: by default a step whose verification finds a
                          # newer group queued publishes G2G's motion unverified (the node
                          # falling behind), so under CI load the answers depended on timing
                          # (0.144 m once against 0.102 at rest). Deferral: test_odometry_core.
                          "verify_max_deferred": 0},
                         str(ROOT / "config" / "sim.yaml")), tmp_path / "node.log")
    player = None
    try:
        player = Proc(player_cmd(held_out_traj, "--clock", "--rate", "1.5", "--cameras", *cams,
                                 "--wait-subscribers", "90", "--exit-when-done"),
                      tmp_path / "player.log")
        # Every group, or the player is done (a group dropped under load leaves a longer step
        # between two published poses, which is compared with the ground truth like any other).
        listener.spin_until(lambda: len(odoms) >= FRAMES or not player.alive(), timeout=300)
        listener.spin_until(lambda: False, timeout=3.0)  # the last group in flight
        assert len(odoms) >= FRAMES // 2, (
            f"{len(odoms)} odometry messages.\nnode:\n{node.output()[-3000:]}\n"
            f"player:\n{player.output()[-2000:]}")
    finally:
        log = stop_all(listener, node, player)
    assert "Traceback" not in log, log[-3000:]
    assert "RANDOM weights" not in log, "the embedded rig model must be installed"

    keys = [stamp_index[header_ns(m.header)] for m in odoms]
    assert keys == sorted(keys), "odometry must come in stamp order"
    pred = np.stack([pose_to_matrix(m) for m in odoms])
    world = reader.world_T_body[keys]
    gt = np.linalg.inv(world[0])[None] @ world
    (rot, trans), (rot0, trans0) = step_errors(pred, gt)
    path = trans0.sum()
    drift = np.linalg.norm(pred[-1, :3, 3] - gt[-1, :3, 3])
    report = (f"{len(keys)} keyframes; step rotation error {rot.mean():.2f} deg "
              f"(no motion {rot0.mean():.2f}), step translation error {trans.mean():.3f} m "
              f"(no motion {trans0.mean():.3f}), end drift {drift:.2f} m over {path:.2f} m")
    print(report)
    assert trans.mean() <= MAX_TRANS_RATIO * trans0.mean(), report
    assert rot.mean() <= MAX_ROT_RATIO * rot0.mean(), report
