"""relocalize publishes the loaded map's keyframe trajectory (``~/map_path``, nav_msgs/Path,
transient local) as a real process over real DDS: a subscriber that joins after the map was
loaded receives it, and a map loaded through ``~/load_map`` replaces it."""

import pathlib

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from nav_msgs.msg import Path  # noqa: E402

from g2g_msgs.srv import LoadMap  # noqa: E402
from g2g_model.estimation.pipeline import G2GPipeline  # noqa: E402
from g2g_model.maps.building import build_map_from_trajectory  # noqa: E402
from g2g_model.maps.format import G2GMap, save_map  # noqa: E402
from g2g_ros.conversions import pose_to_matrix, stamp_ns  # noqa: E402
from g2g_ros.qos import latched_qos  # noqa: E402
from sim_fixtures import tiny_trajectories  # noqa: E402
from ros_helpers import Listener, Proc, node_cmd, stop_all  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOPIC = "/relocalize/map_path"
pytestmark = [pytest.mark.ros, pytest.mark.timeout(300)]


def _first_part(gmap: G2GMap, keep: int) -> G2GMap:
    """The map's frames of its first ``keep`` instants (a second, smaller map)."""
    stamps = sorted({f.stamp_ns for f in gmap.frames})[:keep]
    idx = [i for i, f in enumerate(gmap.frames) if f.stamp_ns in stamps]
    return G2GMap(frames=[gmap.frames[i] for i in idx], rig=gmap.rig, backbone=gmap.backbone,
                  features=gmap.features[idx], map_id=gmap.map_id + "-part", source=gmap.source)


def _late_subscriber(listener: Listener, timeout: float = 60.0) -> Path:
    box = listener.collect(Path, TOPIC, latched_qos())
    assert listener.spin_until(lambda: box, timeout=timeout), "no latched map path"
    return box


def _check(msg: Path, gmap: G2GMap, camera: str) -> None:
    idx = gmap.camera_indices(camera)
    assert msg.header.frame_id == "map"
    assert len(msg.poses) == len(idx) and len(idx) > 0
    for pose, i in zip(msg.poses, idx):
        frame = gmap.frames[int(i)]
        assert pose.header.frame_id == "map"
        assert stamp_ns(pose.header.stamp) == frame.stamp_ns
        np.testing.assert_allclose(pose_to_matrix(pose.pose), frame.world_T_cam, atol=1e-6)


def test_late_subscriber_gets_the_map_path_and_a_new_map_replaces_it(tmp_path):
    traj = tiny_trajectories(tmp_path / "sim", seed=20041, frames=12, traversals=1)[0]
    gmap = build_map_from_trajectory(traj, G2GPipeline.default("relocalization"), None,
                                     progress=False)
    part = _first_part(gmap, 7)
    full_path, part_path = save_map(gmap, tmp_path / "full.g2gmap"), save_map(
        part, tmp_path / "part.g2gmap")
    params = {"use_sim_time": True, "map_path": str(full_path), "localize_period_s": 0.0,
              "autostart": True}
    node = Proc(node_cmd("g2g_ros.nodes.relocalize", params, str(ROOT / "config" / "sim.yaml")),
                tmp_path / "node.log")
    listener = Listener()
    try:
        # Joins after the map was loaded at configure (the service exists from configure on).
        reply = listener.call(LoadMap, "/relocalize/load_map",
                              LoadMap.Request(path=str(tmp_path / "missing.g2gmap")), timeout=90)
        assert not reply.success
        first = _late_subscriber(listener)
        assert len(first) == 1  # the failed load kept the map and sent nothing new
        _check(first[0], gmap, "cam0")  # sim.yaml's reloc_camera
        reply = listener.call(LoadMap, "/relocalize/load_map",
                              LoadMap.Request(path=str(part_path)), timeout=90)
        assert reply.success, reply.message
        assert listener.spin_until(lambda: len(first) == 2, timeout=30.0)
        _check(first[1], part, "cam0")
        later = _late_subscriber(listener)  # a second late joiner: the current map only
        assert listener.spin_until(lambda: False, timeout=1.0) is False and len(later) == 1
        _check(later[0], part, "cam0")
        assert len(part.camera_indices("cam0")) < len(gmap.camera_indices("cam0"))
        assert node.alive(), node.output()[-3000:]
    finally:
        log = stop_all(listener, node)
    assert "Traceback" not in log, log[-3000:]
    sent = f"/map_path: {len(gmap.camera_indices('cam0'))} keyframes of camera cam0"
    assert sent in log, log[-3000:]
