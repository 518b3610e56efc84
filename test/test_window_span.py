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


def test_a_bend_is_shown_only_beyond_what_noise_explains():
    from g2g_model.localization.window_span import bend_shown

    rng = np.random.default_rng(0)
    K = np.array([[500.0, 0.0, 320.0], [0.0, 500.0, 240.0], [0.0, 0.0, 1.0]])
    points = np.c_[rng.uniform(-2, 2, (200, 2)), rng.uniform(3, 6, 200)]
    truth = np.eye(4)  # the anchor camera is the body: world_T_b0 = cam_T_b0 = identity
    h = points @ K.T
    pixels = h[:, :2] / h[:, 2:] + rng.normal(0.0, 0.5, (200, 2))

    def shown(whole, near, n=200):
        return bend_shown(whole, near, [pixels[:n]], [points[:n]], [np.eye(4)], K[None], 4.0)

    # The whole window's pose 2 mm from the refined one: the noise of 200 matches explains it.
    assert not shown(make_pose(np.eye(3), [0.002, 0.0, 0.0]), truth)
    # 5 cm: the instants near the start fit the refined pose far better (a bent window).
    assert shown(make_pose(np.eye(3), [0.05, 0.0, 0.0]), truth)
    # Too few matches to tell: the refinement stands.
    assert shown(make_pose(np.eye(3), [0.002, 0.0, 0.0]), truth, n=4)
