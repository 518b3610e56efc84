"""g2g-bag convert: a tiny simulator trajectory -> MCAP, read back with rosbags' AnyReader.

Checks topics, counts, stamps, image bytes, camera_info, /tf_static, ground truth (Odometry and
TF), the drifted odometry input, metadata and QoS against the dataset itself; and that missing,
corrupt or incomplete bags fail with a clear error.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy")
from rosbags.highlevel import AnyReader  # noqa: E402
from rosbags.interfaces import QosDurability  # noqa: E402
from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_ros.bags import cli  # noqa: E402
from g2g_ros.bags.bag_reader import BagError, iter_messages, open_bag  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from g2g_ros.bags.convert import OdometrySource, convert_trajectory  # noqa: E402
from g2g_ros.bags.evaluation import load_ground_truth  # noqa: E402
from g2g_ros.bags.typestore import bag_qos, bag_typestore  # noqa: E402
from g2g_ros.conversions import header_ns, pose_to_matrix, transform_to_matrix  # noqa: E402
from g2g_ros.dataset_publisher import drifted_odometry  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def traj(tmp_path_factory):
    return tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20003, frames=15)[0]


@pytest.fixture(scope="module")
def bag(traj, tmp_path_factory):
    out = tmp_path_factory.mktemp("bags") / "tiny.mcap"
    convert_trajectory(traj, out, odometry=OdometrySource(drift_per_m=0.05,
                                                          yaw_drift_deg_per_m=2.0),
                       progress=False)
    return out


def test_convert_reads_back_equal_to_the_dataset(traj, bag):
    reader = TrajectoryReader(traj)
    cams, n = reader.cameras, reader.num_frames
    stamps = [int(s) for s in reader.timestamps_ns]
    assert (bag / "metadata.yaml").is_file() and list(bag.glob("*.mcap"))
    msgs = {}
    with AnyReader([bag]) as r:  # type definitions come from the bag itself
        expected = {"/g2g/metadata": 1, "/tf_static": 1, "/tf": n, "ground_truth/odometry": n}
        for c in cams:
            expected[f"{c}/image_raw"] = n
            expected[f"{c}/camera_info"] = n
        assert {t: i.msgcount for t, i in r.topics.items()} == expected
        static = [c for c in r.connections if c.topic == "/tf_static"][0]
        assert static.ext.offered_qos_profiles[0].durability == QosDurability.TRANSIENT_LOCAL
        for conn, t, raw in r.messages():
            msgs.setdefault(conn.topic, []).append((t, r.deserialize(raw, conn.msgtype)))
    for cam in cams:
        spec = reader.rig[cam]
        for i, (t, img) in enumerate(msgs[f"{cam}/image_raw"]):
            assert t == header_ns(img.header) == stamps[i]
            assert (img.encoding, img.width, img.height) == ("rgb8", spec.width, spec.height)
            assert img.header.frame_id == f"{cam}_optical_frame"
            assert bytes(img.data) == reader.image(cam, i).tobytes()
        for i, (t, info) in enumerate(msgs[f"{cam}/camera_info"]):
            assert t == header_ns(info.header) == stamps[i]
            np.testing.assert_allclose(np.array(info.k).reshape(3, 3), spec.K)
    (_, tf_static), = msgs["/tf_static"]
    by_child = {t.child_frame_id: t for t in tf_static.transforms}
    assert sorted(by_child) == sorted(f"{c}_optical_frame" for c in cams)
    for cam in cams:
        t = by_child[f"{cam}_optical_frame"]
        assert t.header.frame_id == "base_link"
        np.testing.assert_allclose(transform_to_matrix(t), reader.rig[cam].T_body_cam, atol=1e-9)
    odom_expected = drifted_odometry(reader.world_T_body, 0.05, 2.0)
    for i, ((t, gt), (t2, tfm)) in enumerate(zip(msgs["ground_truth/odometry"], msgs["/tf"])):
        assert t == t2 == header_ns(gt.header) == stamps[i]
        assert (gt.header.frame_id, gt.child_frame_id) == ("gt_world", "base_link")
        np.testing.assert_allclose(pose_to_matrix(gt.pose.pose), reader.world_T_body[i], atol=1e-9)
        tfs = {(x.header.frame_id, x.child_frame_id): x for x in tfm.transforms}
        np.testing.assert_allclose(transform_to_matrix(tfs[("gt_world", "gt_base_link")]),
                                   reader.world_T_body[i], atol=1e-9)
        np.testing.assert_allclose(transform_to_matrix(tfs[("odom", "base_link")]),
                                   odom_expected[i], atol=1e-9)
    # The drift really changed the odometry input (it is not the ground truth).
    assert not np.allclose(odom_expected[-1], np.linalg.inv(reader.world_T_body[0])
                           @ reader.world_T_body[-1], atol=1e-3)
    meta = json.loads(msgs["/g2g/metadata"][0][1].data)
    assert meta["dataset"] == "g2g-sim" and meta["cameras"] == cams
    assert meta["source_path"] == str(Path(traj).resolve()) and meta["date"]
    custom = yaml.safe_load((bag / "metadata.yaml").read_text())
    assert json.loads(custom["rosbag2_bagfile_information"]["custom_data"]["g2g.metadata"]) \
        == meta
    gt = load_ground_truth(bag)
    np.testing.assert_allclose(gt.world_T_base, reader.world_T_body, atol=1e-9)


def test_convert_compressed_and_noise(traj, tmp_path):
    out = tmp_path / "jpeg"
    summary = convert_trajectory(traj, out, compressed=True, progress=False,
                                 odometry=OdometrySource(noise_trans_m=0.01, noise_rot_deg=0.5,
                                                         seed=3))
    assert summary.counts["cam0/image_raw/compressed"] == 15
    assert "cam0/image_raw" not in summary.counts
    import cv2

    reader = TrajectoryReader(traj)
    with open_bag(out) as r:
        for topic, msgtype, t, raw in iter_messages(r, ["cam1/image_raw/compressed"]):
            msg = r.deserialize(raw, msgtype)
            assert msg.format == "jpeg"
            bgr = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
            ref = reader.image("cam1", list(reader.timestamps_ns).index(t))
            assert np.abs(bgr[..., ::-1].astype(int) - ref.astype(int)).mean() < 4.0
    # Noise is seeded: the same seed gives the same odometry, another seed a different one.
    gt = reader.world_T_body
    a = OdometrySource(noise_trans_m=0.01, seed=3).poses(gt)
    np.testing.assert_array_equal(a, OdometrySource(noise_trans_m=0.01, seed=3).poses(gt))
    assert not np.allclose(a, OdometrySource(noise_trans_m=0.01, seed=4).poses(gt))
    with pytest.raises(ValueError, match="noise_trans_m"):
        OdometrySource(noise_trans_m=-1).validate()


def test_bad_input_gives_clear_errors(traj, bag, tmp_path, capsys):
    with pytest.raises(BagError, match="does not exist"):
        open_bag(tmp_path / "nope")
    assert cli.main(["play", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(ValueError, match="already exists"):
        convert_trajectory(traj, bag, progress=False)
    assert cli.main(["convert", str(tmp_path), str(tmp_path / "x"), "--quiet"]) == 2
    assert "meta.json" in capsys.readouterr().err
    # Corrupt: the storage file cut in half.
    broken = tmp_path / "broken"
    shutil.copytree(bag, broken)
    mcap = next(broken.glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])
    with pytest.raises(BagError, match="corrupt"):
        with open_bag(broken) as r:
            list(iter_messages(r, None, str(broken)))
    # A bag without ground truth: evaluation refuses it, naming the topic.
    partial = tmp_path / "partial"
    store = bag_typestore()
    with Writer(partial, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/tf", "tf2_msgs/msg/TFMessage", typestore=store,
                                offered_qos_profiles=[bag_qos()])
        msg = store.types["tf2_msgs/msg/TFMessage"](transforms=[])
        w.write(conn, 1, store.serialize_cdr(msg, "tf2_msgs/msg/TFMessage"))
    with pytest.raises(BagError, match="lacks topics.*ground_truth/odometry"):
        load_ground_truth(partial)
    from g2g_ros.bags import eval_bag

    assert eval_bag.main([str(partial), "--graph", "rig_odometry", "--out",
                          str(tmp_path / "ev")]) == 2
    assert "ground_truth/odometry" in capsys.readouterr().err
    assert eval_bag.main([str(bag), "--graph", "relocalize", "--out",
                          str(tmp_path / "ev2")]) == 2
    assert "--map" in capsys.readouterr().err


def test_bag_type_hashes_equal_the_ros_runtime(bag):
    """The RIHS01 hashes stored in the bag equal those of the installed ROS message packages
    (what `ros2 bag play` on a full install checks), g2g_msgs included."""
    from g2g_ros.bags.player import message_class
    from ros_helpers import Listener

    store = bag_typestore()
    with open_bag(bag) as r:
        stored = {c.msgtype: c.digest for c in r.connections}
    stored["g2g_msgs/msg/GroupAlignment"] = store.hash_rihs01("g2g_msgs/msg/GroupAlignment")
    stored["g2g_msgs/msg/EstimatorStatus"] = store.hash_rihs01("g2g_msgs/msg/EstimatorStatus")
    listener = Listener("g2g_bag_hash_check")
    try:
        for k, msgtype in enumerate(sorted(stored)):
            listener.node.create_publisher(message_class(msgtype), f"/hash_check_{k}", 1)
        for k, msgtype in enumerate(sorted(stored)):
            info, = listener.node.get_publishers_info_by_topic(f"/hash_check_{k}")
            assert str(info.topic_type_hash) == stored[msgtype], msgtype
    finally:
        listener.close()
