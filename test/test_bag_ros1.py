"""g2g-bag from-ros1: the real T265 ROS 1 bag of test/fixtures/t265 (kapture's samples/t265)
converts, read back with rosbags and checked against the source bag read independently (topics,
counts, stamps, image bytes, camera_info from the calibration against kapture's sensors.txt,
/tf_static, the Odometry ground truth); a ROS 1 bag rebuilt from the same real data with
camera_info, TF, JPEG images and unsynchronized stamps takes the bag's own calibration, TF
ground truth and slop grouping; bad topic maps fail naming what is missing; and the converted
bag replays through the real rig_odometry node with g2g-eval-bag over real DDS.
"""

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("rclpy")
from rosbags.highlevel import AnyReader  # noqa: E402
from rosbags.rosbag1 import Reader as Ros1Reader, Writer as Ros1Writer  # noqa: E402
from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # noqa: E402

from g2g_model.geometry import make_pose, quat_xyzw_to_matrix  # noqa: E402
from g2g_ros.bags import cli  # noqa: E402
from g2g_ros.bags.bag_reader import BagError  # noqa: E402
from g2g_ros.bags.evaluation import load_ground_truth  # noqa: E402
from g2g_ros.bags.ros1 import convert_ros1  # noqa: E402
from g2g_ros.bags.ros1_topics import load_topic_map  # noqa: E402
from g2g_ros.conversions import header_ns, pose_to_matrix, transform_to_matrix  # noqa: E402

pytestmark = pytest.mark.timeout(180)

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "t265"
BAG = FIXTURE / "trimmed_locoffice.bag"
ROS1 = get_typestore(Stores.ROS1_NOETIC)
ROS1.register(get_types_from_msg("geometry_msgs/TransformStamped[] transforms",
                                 "tf2_msgs/msg/TFMessage"))  # not in rosbags' Noetic store
CAMS = {"fisheye1": "/camera/fisheye1/image_raw", "fisheye2": "/camera/fisheye2/image_raw"}
ODOM = "/camera/odom/sample"


def _source():
    """The fixture read with rosbags' ROS 1 reader alone: counts, images, odometry."""
    counts, images, odom = {}, {c: [] for c in CAMS}, []
    by_topic = {t: c for c, t in CAMS.items()}
    with Ros1Reader(BAG) as r:
        for conn in r.connections:
            counts[conn.topic] = counts.get(conn.topic, 0) + conn.msgcount
        for conn, _, raw in r.messages():
            if conn.topic in by_topic:
                msg = ROS1.deserialize_ros1(raw, conn.msgtype)
                images[by_topic[conn.topic]].append(msg)
            elif conn.topic == ODOM:
                msg = ROS1.deserialize_ros1(raw, conn.msgtype)
                odom.append((header_ns(msg.header), pose_to_matrix(msg.pose.pose)))
    return counts, images, odom


def _read(bag):
    """``topic -> [(log time, msg)]`` of a converted bag (definitions from the bag itself)."""
    out = {}
    with AnyReader([Path(bag)]) as r:
        for conn, t, raw in r.messages():
            out.setdefault(conn.topic, []).append((t, r.deserialize(raw, conn.msgtype)))
    return out


def _kapture_sensors():
    rows = {}
    for line in (FIXTURE / "kapture" / "sensors.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = [v.strip() for v in line.split(",")]
        rows[f[0]] = (int(f[4]), int(f[5]), [float(v) for v in f[6:]])
    return rows


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("ros1") / "t265.mcap"
    summary = convert_ros1(BAG, out, load_topic_map(FIXTURE / "t265_topics.yaml"),
                           progress=False)
    return out, summary


def test_t265_fixture_converts_equal_to_the_source(converted):
    out, summary = converted
    counts, images, odom = _source()
    assert counts == {"/camera/fisheye1/image_raw": 3, "/camera/fisheye2/image_raw": 3,
                      ODOM: 19, "/camera/gyro/sample": 19, "/camera/accel/sample": 6}
    stamps = [header_ns(m.header) for m in images["fisheye1"]]
    assert stamps == [header_ns(m.header) for m in images["fisheye2"]]   # a synchronized rig
    # Ground truth exists where the odometry covers an image stamp (not before its first one).
    odom_stamps = [s for s, _ in odom]
    covered = [s for s in stamps if odom_stamps[0] <= s <= odom_stamps[-1]]
    assert len(covered) == 2
    msgs = _read(out)
    assert {t: len(m) for t, m in msgs.items()} == {
        "/g2g/metadata": 1, "/tf_static": 1, "/tf": len(covered),
        "ground_truth/odometry": len(covered), "fisheye1/image_raw": 3,
        "fisheye2/image_raw": 3, "fisheye1/camera_info": 3, "fisheye2/camera_info": 3}
    assert summary.counts == {t: len(m) for t, m in msgs.items()}
    kapture = _kapture_sensors()
    for cam, kid in (("fisheye1", "cam001"), ("fisheye2", "cam002")):
        got = msgs[f"{cam}/image_raw"]
        assert [t for t, _ in got] == stamps                 # log time = the image stamp
        for (_, m), src in zip(got, images[cam]):
            assert header_ns(m.header) == header_ns(src.header)
            assert m.header.frame_id == f"{cam}_optical_frame"
            assert (m.width, m.height, m.encoding, m.step) == (848, 800, "mono8", 848)
            assert bytes(m.data) == bytes(src.data)
        w, h, (fx, fy, cx, cy, *dist) = kapture[kid]
        for (t, info), s in zip(msgs[f"{cam}/camera_info"], stamps):
            assert t == s and header_ns(info.header) == s
            assert (info.width, info.height) == (w, h) and info.distortion_model == "equidistant"
            np.testing.assert_allclose(info.k, [fx, 0, cx, 0, fy, cy, 0, 0, 1])
            np.testing.assert_allclose(info.d, dist)
    (_, static), = msgs["/tf_static"]
    tf = {t.child_frame_id: (t.header.frame_id, transform_to_matrix(t.transform))
          for t in static.transforms}
    assert sorted(tf) == ["fisheye1_optical_frame", "fisheye2_optical_frame"]
    # kapture's rig: parallel cameras 64 mm apart; optical z along the body's x (forward).
    left, right = tf["fisheye1_optical_frame"][1], tf["fisheye2_optical_frame"][1]
    assert tf["fisheye1_optical_frame"][0] == "base_link"
    np.testing.assert_allclose(left[:3, :3], right[:3, :3])
    np.testing.assert_allclose(left[:3, 2], [1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(left[:3, 3] - right[:3, 3], [0, 0.064, 0], atol=1e-12)
    # Ground truth: the Odometry interpolated at the image stamps (translation linearly).
    src_xyz = np.array([T[:3, 3] for _, T in odom])
    for (t, gt), s in zip(msgs["ground_truth/odometry"], covered):
        assert t == s == header_ns(gt.header) and gt.header.frame_id == "gt_world"
        P = pose_to_matrix(gt.pose.pose)
        expected = [np.interp(s, odom_stamps, src_xyz[:, k]) for k in range(3)]
        np.testing.assert_allclose(P[:3, 3], expected, atol=1e-9)
        nearest = odom[int(np.argmin(np.abs(np.array(odom_stamps) - s)))][1]
        assert np.degrees(np.arccos(np.clip((np.trace(nearest[:3, :3].T @ P[:3, :3]) - 1) / 2,
                                            -1, 1))) < 0.1
    for (t, m), s in zip(msgs["/tf"], covered):
        pairs = {(x.header.frame_id, x.child_frame_id) for x in m.transforms}
        assert t == s and pairs == {("odom", "base_link"), ("gt_world", "gt_base_link")}
    meta = json.loads(msgs["/g2g/metadata"][0][1].data)
    assert meta["cameras"] == ["fisheye1", "fisheye2"] and meta["dataset"] == \
        "ros1:trimmed_locoffice"
    assert meta["source_counts"] == {t: counts[t] for t in (*CAMS.values(), ODOM)}
    assert meta["unmatched_images"] == 0
    # What g2g-eval-bag reads of it.
    truth = load_ground_truth(out)
    assert list(truth.stamps) == covered and sorted(truth.base_T_cam) == sorted(CAMS)


def _ros1_msg(name, **fields):
    return ROS1.types[name](**fields)


def _header(ns, frame, seq=0):
    t = ROS1.types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
    return _ros1_msg("std_msgs/msg/Header", seq=seq, stamp=t, frame_id=frame)


def _transform(parent, child, T, ns):
    from g2g_model.geometry import matrix_to_quat_xyzw

    q = matrix_to_quat_xyzw(T[:3, :3])
    tr = _ros1_msg("geometry_msgs/msg/Transform",
                   translation=_ros1_msg("geometry_msgs/msg/Vector3", x=T[0, 3], y=T[1, 3],
                                         z=T[2, 3]),
                   rotation=_ros1_msg("geometry_msgs/msg/Quaternion", x=q[0], y=q[1], z=q[2],
                                      w=q[3]))
    return _ros1_msg("geometry_msgs/msg/TransformStamped", header=_header(ns, parent),
                     child_frame_id=child, transform=tr)


def _rebuilt_bag(path, skew_ns):
    """The fixture's images (JPEG) and odometry rewritten as a ROS 1 bag with camera_info,
    /tf_static (body -> camera_link -> optical frames), /tf (world -> body: the ground truth),
    and fisheye2 stamped ``skew_ns`` after fisheye1."""
    _, images, odom = _source()
    calib = {"fisheye1": ([284.0, 0, 424.0, 0, 285.0, 394.0, 0, 0, 1],
                          [0.001, 0.03, -0.03, 0.005]),
             "fisheye2": ([283.0, 0, 417.0, 0, 285.5, 400.0, 0, 0, 1],
                          [-0.002, 0.04, -0.04, 0.007])}
    link = make_pose(np.eye(3), [0.01, 0.0, 0.02])
    optical = {c: make_pose(quat_xyzw_to_matrix([-0.5, 0.5, -0.5, 0.5]), [0, y, 0])
               for c, y in (("fisheye1", 0.032), ("fisheye2", -0.032))}
    queue = []

    def write(topic, msgtype, msg, ns):
        queue.append((ns, len(queue), topic, msgtype, msg))

    t0 = odom[0][0]
    write("/tf_static", "tf2_msgs/msg/TFMessage", _ros1_msg(
        "tf2_msgs/msg/TFMessage", transforms=[_transform("body", "camera_link", link, t0)] + [
            _transform("camera_link", f"{c}_lens", T, t0) for c, T in optical.items()]), t0)
    for s, T in odom:
        write("/tf", "tf2_msgs/msg/TFMessage", _ros1_msg(
            "tf2_msgs/msg/TFMessage", transforms=[_transform("world", "body", T, s)]), s)
    for cam, msgs in images.items():
        K, D = calib[cam]
        for i, src in enumerate(msgs):
            ns = header_ns(src.header) + (skew_ns if cam == "fisheye2" else 0)
            ok, jpg = cv2.imencode(".jpg", src.data.reshape(800, 848))
            assert ok
            write(f"/{cam}/image_raw/compressed", "sensor_msgs/msg/CompressedImage",
                  _ros1_msg("sensor_msgs/msg/CompressedImage",
                            header=_header(ns, f"{cam}_lens", i), format="jpeg",
                            data=np.frombuffer(jpg.tobytes(), np.uint8)), ns + 10**6)
            roi = _ros1_msg("sensor_msgs/msg/RegionOfInterest", x_offset=0, y_offset=0,
                            height=0, width=0, do_rectify=False)
            write(f"/{cam}/camera_info", "sensor_msgs/msg/CameraInfo", _ros1_msg(
                "sensor_msgs/msg/CameraInfo", header=_header(ns, f"{cam}_lens", i),
                height=800, width=848, distortion_model="equidistant",
                D=np.array(D), K=np.array(K, float), R=np.eye(3).reshape(-1),
                P=np.array(K[:3] + [0] + K[3:6] + [0] + K[6:] + [0], float),
                binning_x=0, binning_y=0, roi=roi), ns + 10**6)
    with Ros1Writer(path) as w:         # in log-time order, as a recorder writes
        conns = {}
        for ns, _, topic, msgtype, msg in sorted(queue, key=lambda q: q[:2]):
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=ROS1)
            w.write(conns[topic], ns, ROS1.serialize_ros1(msg, msgtype))
    return calib, link, optical, odom, images


def test_bag_camera_info_tf_ground_truth_and_slop(tmp_path):
    src = tmp_path / "rebuilt.bag"
    skew = 3 * 10**6
    calib, link, optical, odom, images = _rebuilt_bag(src, skew)
    out = tmp_path / "rebuilt.mcap"
    rc = cli.main(["from-ros1", str(src), str(out), "--quiet", "--body-frame", "body",
                   "--camera", "fisheye1=/fisheye1/image_raw/compressed",
                   "--camera", "fisheye2=/fisheye2/image_raw/compressed",
                   "--ground-truth-tf", "world", "--sync-slop-ms", "5"])
    assert rc == 0
    msgs = _read(out)
    stamps = [header_ns(m.header) for m in images["fisheye1"]]
    for cam in ("fisheye1", "fisheye2"):
        got = msgs[f"{cam}/image_raw/compressed"]
        # One rig group per fisheye1 stamp; the fisheye2 image keeps its own header stamp.
        assert [t for t, _ in got] == stamps
        assert [header_ns(m.header) for _, m in got] == [
            s + (skew if cam == "fisheye2" else 0) for s in stamps]
        assert all(m.format == "jpeg" and m.header.frame_id == f"{cam}_optical_frame"
                   for _, m in got)
        decoded = cv2.imdecode(np.frombuffer(bytes(got[0][1].data), np.uint8),
                               cv2.IMREAD_GRAYSCALE)
        assert np.abs(decoded.astype(int) - images[cam][0].data.reshape(800, 848)).mean() < 3
        K, D = calib[cam]
        for _, info in msgs[f"{cam}/camera_info"]:     # the bag's camera_info, renamed
            assert info.header.frame_id == f"{cam}_optical_frame"
            np.testing.assert_allclose(info.k, K)
            np.testing.assert_allclose(info.d, D)
            assert info.distortion_model == "equidistant"
    (_, static), = msgs["/tf_static"]
    tf = {t.child_frame_id: transform_to_matrix(t.transform) for t in static.transforms}
    for cam, T in optical.items():      # body -> camera_link -> lens, chained from the bag's TF
        np.testing.assert_allclose(tf[f"{cam}_optical_frame"], link @ T, atol=1e-9)
    # Ground truth from the TF chain world -> body where /tf covers the stamp.
    odom_stamps = [s for s, _ in odom]
    covered = [s for s in stamps if odom_stamps[0] <= s <= odom_stamps[-1]]
    gt = msgs["ground_truth/odometry"]
    assert [t for t, _ in gt] == covered
    xyz = np.array([T[:3, 3] for _, T in odom])
    for (t, m) in gt:
        np.testing.assert_allclose(pose_to_matrix(m.pose.pose)[:3, 3],
                                   [np.interp(t, odom_stamps, xyz[:, k]) for k in range(3)],
                                   atol=1e-9)
    # Without slop the skewed images do not join a group: counted, at their own stamps.
    out2 = tmp_path / "exact.mcap"
    summary = convert_ros1(src, out2, load_topic_map(
        cameras=["fisheye1=/fisheye1/image_raw/compressed",
                 "fisheye2=/fisheye2/image_raw/compressed"], body_frame="body",
        ground_truth={"tf": "world"}), progress=False)
    assert summary.metadata["unmatched_images"] == 3 and summary.frames == 6
    assert [t for t, _ in _read(out2)["fisheye2/image_raw/compressed"]] == [
        s + skew for s in stamps]


def test_topic_map_errors_name_what_is_missing(tmp_path, capsys):
    rc = cli.main(["from-ros1", str(BAG), "--list-topics"])
    listing = capsys.readouterr().out
    assert rc == 0 and "/camera/odom/sample  nav_msgs/msg/Odometry  19" in listing
    # No camera_info in the bag and no calibration file; a wrong topic; a TF ground truth in a
    # bag without /tf: one error names all three and lists the bag's topics.
    rc = cli.main(["from-ros1", str(BAG), str(tmp_path / "a"), "--body-frame",
                   "camera_pose_frame", "--camera", "left=/camera/fisheye1/image_raw",
                   "--camera", "right=/camera/fisheye3/image_raw", "--ground-truth-tf", "world"])
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "a").exists()
    for text in ("/camera/fisheye1/camera_info (camera_info of camera left",
                 "/camera/fisheye3/image_raw (images of camera right) is missing",
                 "/tf (ground truth: TF world -> camera_pose_frame) is missing",
                 "The bag has: /camera/accel/sample (sensor_msgs/msg/Imu)"):
        assert text in err, err
    rc = cli.main(["from-ros1", str(BAG), str(tmp_path / "b"), "--topic-map",
                   str(FIXTURE / "t265_topics.yaml"), "--ground-truth-odometry",
                   "/camera/gyro/sample"])
    assert rc == 2 and "/camera/gyro/sample (ground truth) is a sensor_msgs/msg/Imu, not " \
        "nav_msgs/msg/Odometry" in capsys.readouterr().err
    with pytest.raises(BagError, match="does not exist"):
        convert_ros1(tmp_path / "none.bag", tmp_path / "c", load_topic_map(
            FIXTURE / "t265_topics.yaml"))
    with pytest.raises(ValueError, match="no ground truth"):
        load_topic_map(cameras=["a=/x"], body_frame="b")
    with pytest.raises(ValueError, match="unknown keys"):
        (tmp_path / "m.yaml").write_text("body_frame: b\ncamera: []\n")
        load_topic_map(tmp_path / "m.yaml")
    with pytest.raises(BagError, match="no rig group between"):
        convert_ros1(BAG, tmp_path / "d", load_topic_map(FIXTURE / "t265_topics.yaml"),
                     start_s=5.0)
    assert not (tmp_path / "d").exists()
    calib = (FIXTURE / "t265_calibration.yaml").read_text()
    (tmp_path / "calib.yaml").write_text(calib.replace("width: 848", "width: 640", 1))
    with pytest.raises(BagError, match="fisheye1's images are 848x800 but its calibration "
                                       "says 640x800"):
        convert_ros1(BAG, tmp_path / "e", load_topic_map(
            FIXTURE / "t265_topics.yaml", calibration=str(tmp_path / "calib.yaml")))


@pytest.mark.ros
@pytest.mark.timeout(300)
def test_t265_replays_through_rig_odometry_with_eval_bag(converted, tmp_path, capsys):
    from g2g_ros.bags import eval_bag

    bag, _ = converted
    out = tmp_path / "eval"
    rc = eval_bag.main([str(bag), "--graph", "rig_odometry", "--out", str(out), "--quiet",
                        "--wait-timeout", "60"])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    report = json.loads((out / "report.json").read_text())
    replay = report["replay"]
    assert (replay["groups"], replay["waited_groups"], replay["wait_timeouts"]) == (3, 3, 0)
    odo = report["rig_odometry"]
    # One output per rig group; one keyframe pair has ground truth at both ends.
    assert odo["outputs"] == 3 and odo["pairs"] == 1 and odo["pair_camera"] == "fisheye1"
    pairwise = odo["pairwise"]
    assert pairwise["n"] == 1 and pairwise["n_failed"] == 0
    assert np.isfinite(pairwise["rot_err_mean"]) and np.isfinite(pairwise["trans_err_mean"])
    assert report["dataset"] == "ros1:trimmed_locoffice"
    print(json.dumps({"replay": replay, "pairwise": pairwise,
                      "latency": report["latency"]}, default=str))
