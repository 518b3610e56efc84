"""The rig's other cameras for verification (g2g_model.localization.rig_views): the query group
they make and their bounded memory."""

import numpy as np

from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_model.estimation.groups import Group
from g2g_model.localization.rig_views import RigView, RigViews, rig_group

K = np.array([[100.0, 0, 32], [0, 100, 32], [0, 0, 1]])


def _view(cam, value, reloc_T_cam):
    return RigView(cam, np.full((8, 8, 3), value, np.uint8), K, reloc_T_cam)


def test_rig_group_adds_each_stored_view_with_its_odometry_pose():
    left = make_pose(axis_angle_to_matrix([0, np.pi / 2, 0]), [0.1, 0, 0])
    odom = np.stack([make_pose(np.eye(3), [x, 0, 0]) for x in (0.0, 0.5)])
    query = Group([np.zeros((8, 8, 3), np.uint8)] * 2, K, odom, stamps=[100, 200])
    views = RigViews()
    views.add(200, _view("left", 7, left))
    views.add(300, _view("left", 9, left))  # not a query instant: not used
    group = rig_group(query, views)
    assert len(group.images) == 3 and group.images[2][0, 0, 0] == 7
    np.testing.assert_allclose(group.cam_to_world[2], odom[1] @ left)
    np.testing.assert_allclose(group.intrinsics[:2], np.stack([K, K]))
    assert rig_group(query, None) is query
    assert rig_group(query, RigViews()) is query  # no views at those stamps


def test_views_are_bounded_and_follow_the_query_window():
    views = RigViews(max_stamps=3)
    for stamp in range(10):
        views.add(stamp, _view("left", stamp, np.eye(4)))
    assert len(views) == 3  # only the newest stamps are waiting
    views.retain([7, 8])    # the window holds 7 and 8: 9 is newer, kept
    assert [len(views.at(s)) for s in (7, 8, 9)] == [1, 1, 1] and len(views) == 3
    views.retain([9])       # 7 and 8 left the window
    assert len(views) == 1 and views.at(9)[0].image[0, 0, 0] == 9
    views.clear()
    assert len(views) == 0


def test_map_rig_window_takes_the_other_cameras_within_the_window_span():
    from g2g_model.localization.rig_views import map_rig_window
    from g2g_model.maps.format import G2GMap, MapFrame, encode_image

    def frame(cam, stamp):
        img = np.full((8, 8, 3), stamp % 255, np.uint8)
        return MapFrame(cam, stamp, np.eye(4), K, encode_image(img), (8, 8))

    # cam0 keyframes at 10, 20, 30; cam1 (its own keyframe rule) at 5, 15, 25, 35
    frames = [frame("cam0", s) for s in (10, 20, 30)]
    frames += [frame("cam1", s) for s in (5, 15, 25, 35)]
    group = map_rig_window(G2GMap(frames=frames), [0, 1])  # cam0 at 10 and 20
    assert group.stamps == [10, 20, 15]  # the window first, then cam1 within [10, 20]
    assert len(group.images) == 3 and group.intrinsics.shape == (3, 3, 3)


def test_deferred_views_convert_once_when_a_group_reads_them():
    calls = []

    def convert(value):
        def run():
            calls.append(value)
            if value is None:
                raise ValueError("image is 4x4 but its camera_info says 8x8: refused")
            return np.full((8, 8, 3), value, np.uint8), K
        return run

    views = RigViews()
    for stamp, value in ((100, 3), (200, None), (300, 5)):
        views.add(stamp, RigView.deferred("left", convert(value), np.eye(4)))
    assert calls == []  # nothing converted while buffered
    query = Group([np.zeros((8, 8, 3), np.uint8)] * 2, K, np.stack([np.eye(4)] * 2),
                  stamps=[100, 200])
    group = rig_group(query, views)
    assert len(group.images) == 3 and group.images[2][0, 0, 0] == 3  # the refused one left out
    assert calls == [3, None]  # the view at 300 is not in the window: never converted
    again = rig_group(query, views)
    assert calls == [3, None] and len(again.images) == 3  # each converted (or refused) once
