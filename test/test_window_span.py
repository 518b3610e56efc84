"""Which query instants the relocalization verifier refines on
(g2g_model.localization.window_span)."""

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.geometry import make_pose
from g2g_model.localization.window_span import frames_within, instant_travel


def _window():
    # The relocalization camera at 4 instants 0.3 m apart, then a side camera with a 1.5 m
    # lever arm at instants 0 and 2 (the rig's views follow the query window).
    reloc = [make_pose(np.eye(3), [0.3 * i, 0.0, 0.0]) for i in range(4)]
    side = [make_pose(np.eye(3), [0.3 * i, 1.5, 0.0]) for i in (0, 2)]
    stamps = [10, 20, 30, 40, 10, 30]
    ks = np.stack([np.diag([100.0 + i, 100.0, 1.0]) for i in range(6)])
    return Group([np.full((4, 4, 3), i, np.uint8) for i in range(6)], ks,
                 np.stack(reloc + side), stamps=stamps)


def test_instants_within_the_span_join_with_all_their_cameras():
    group = _window()
    travel = instant_travel(group.cam_to_world, group.stamps)
    np.testing.assert_array_equal(frames_within(travel, 0.65),
                                  [0, 1, 2, 4, 5])  # instants 10-30; the side camera goes too
    np.testing.assert_array_equal(frames_within(travel, 0.0),
                                  np.arange(6))  # 0: the whole window
    # Without stamps each frame's own position counts: the side camera is 1.5 m away.
    np.testing.assert_array_equal(frames_within(instant_travel(group.cam_to_world, None), 0.65),
                                  [0, 1, 2])


def test_a_refinement_may_move_the_anchor_as_far_as_drift_explains():
    from g2g_model.localization.window_span import refinement_allowed

    group = _window()  # the odometry travels 0.9 m in the window
    travel = instant_travel(group.cam_to_world, group.stamps)
    whole = make_pose(np.eye(3), [1.0, 2.0, 0.0])
    assert refinement_allowed(whole, make_pose(np.eye(3), [1.09, 2.0, 0.0]),
                              travel)  # within 0.1 m
    assert not refinement_allowed(whole, make_pose(np.eye(3), [1.2, 2.0, 0.0]),
                                  travel)  # > 0.15 x 0.9 m
    long = group.cam_to_world.copy()
    long[:, 0, 3] *= 3.0  # 2.7 m of travel: 0.4 m of bend is possible
    assert refinement_allowed(whole, make_pose(np.eye(3), [1.3, 2.0, 0.0]),
                              instant_travel(long, group.stamps))
