"""rig_odometry over real DDS with five 1936x1216 JPEG (CompressedImage) camera streams: every
group is processed, each camera's images are decoded at a reduced size (1/4, then area-averaged
to the verifier's 320 px: the node says so once per camera) and odometry comes out."""

import pathlib
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from sensor_msgs.msg import CameraInfo, CompressedImage  # noqa: E402

from g2g_model.data.format import TrajectoryReader  # noqa: E402
from g2g_model.estimation.groups import scale_intrinsics  # noqa: E402
from g2g_ros.calibration import camera_info_msg  # noqa: E402
from g2g_ros.conversions import matrix_to_transform_stamped, to_stamp  # noqa: E402
from g2g_ros.image_conversion import rgb_to_compressed_fields  # noqa: E402
from g2g_ros.tf_broadcaster import TransformBroadcaster  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
W, H = 1936, 1216
GROUPS = 3
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def test_full_size_jpeg_streams_are_decoded_reduced_and_processed(tmp_path_factory, tmp_path):
    from g2g_msgs.msg import EstimatorStatus
    from nav_msgs.msg import Odometry

    reader = TrajectoryReader(tiny_trajectories(tmp_path_factory.mktemp("sim"), seed=20001,
                                                frames=6)[0])
    cams = list(reader.cameras)
    listener = Listener()
    odoms = listener.collect(Odometry, "odometry")
    statuses = listener.collect(EstimatorStatus, "rig_odometry/status")
    qos = rclpy.qos.QoSProfile(depth=10, reliability=rclpy.qos.ReliabilityPolicy.RELIABLE)
    info_pub = {c: listener.node.create_publisher(CameraInfo, f"{c}/camera_info", qos)
                for c in cams}
    image_pub = {c: listener.node.create_publisher(CompressedImage,
                                                   f"{c}/image_raw/compressed", qos)
                 for c in cams}
    static = TransformBroadcaster(listener.node, static=True)
    node = Proc(node_cmd("g2g_ros.nodes.rig_odometry",
                         {"use_compressed": True, "sensor_qos_reliability": "reliable",
                          "status_period_s": 0.3, "cameras": cams},
                         str(ROOT / "config" / "sim.yaml")), tmp_path / "node.log")
    try:
        assert listener.spin_until(
            lambda: all(p.get_subscription_count() for p in image_pub.values()), 90), \
            node.output()
        static.send([matrix_to_transform_stamped(reader.rig[c].T_body_cam, "base_link",
                                                 f"{c}_optical_frame", 0) for c in cams])
        for k in range(GROUPS):
            stamp = int(reader.timestamps_ns[k])
            for cam in cams:
                spec = reader.rig[cam]
                big = cv2.resize(reader.image(cam, k), (W, H), interpolation=cv2.INTER_LINEAR)
                K = scale_intrinsics(np.asarray(spec.K, float), W / spec.width, H / spec.height)
                info_pub[cam].publish(camera_info_msg(K, W, H, f"{cam}_optical_frame", stamp))
                fields = SimpleNamespace(**rgb_to_compressed_fields(big, "jpeg", 90))
                msg = CompressedImage(format=fields.format, data=fields.data)
                msg.header.stamp = to_stamp(stamp)
                msg.header.frame_id = f"{cam}_optical_frame"
                image_pub[cam].publish(msg)
            n = k + 1
            assert listener.spin_until(lambda: len(odoms) >= n, timeout=60), \
                node.output()[-3000:]
        assert listener.spin_until(lambda: any(s.groups_processed >= GROUPS for s in statuses),
                                   10), [s.message for s in statuses[-2:]]
        assert sorted(statuses[-1].cameras_used) == sorted(cams)
        for msg in odoms:
            p = msg.pose.pose.position
            assert np.all(np.isfinite([p.x, p.y, p.z]))
        log = node.output()
        for cam in cams:
            assert f"camera {cam}: ({W}x{H}" in log and "reduced to 320x201" in log \
                and "(JPEG decoded at 1/4)" in log, log[-3000:]
        assert node.alive()
    finally:
        log = stop_all(listener, node)
    assert "Traceback" not in log, log[-3000:]
