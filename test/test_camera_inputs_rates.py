"""CameraInputs' receive rates after reset_stamps (a jump back of ROS time): the soak of issue
22 item 14 logged ``publish_status failed: TypeError`` in both nodes after every replay loop,
because the rate compared the cleared stamps of a camera that had received images before."""

import numpy as np

from g2g_ros.camera_inputs import CameraInputs
from g2g_ros.image_conversion import image_msg
from ros_helpers import Listener


def test_rates_after_reset_stamps_count_only_the_new_stamps():
    ros = Listener("g2g_test_camera_inputs")
    try:
        got = []
        inputs = CameraInputs(ros.node, ["cam0"], lambda cam, stamp, msg: got.append(stamp),
                              max_ahead_s=None)
        cb = inputs._image_cb("cam0")  # the subscription's callback, fed real messages
        rgb = np.zeros((4, 4, 3), np.uint8)
        for i in range(11):  # 10 Hz for 1 s
            cb(image_msg(rgb, "cam0_optical_frame", 10**9 + i * 10**8))
        assert abs(inputs.rates_hz()["cam0"] - 10.0) < 1e-6
        inputs.reset_stamps()
        assert inputs.rates_hz() == {"cam0": 0.0}  # raised TypeError before the fix
        for i in range(3):  # the bag again, at 2 Hz
            cb(image_msg(rgb, "cam0_optical_frame", 10**9 + i * 5 * 10**8))
        assert abs(inputs.rates_hz()["cam0"] - 2.0) < 1e-6
        assert len(got) == 14 and inputs.received["cam0"] == 14
    finally:
        ros.close()


class _Clock:
    """The node clock's ``now().nanoseconds`` under test control (0: no /clock yet)."""

    def __init__(self):
        self.nanoseconds = 0

    def now(self):
        return self


def test_images_before_the_first_clock_are_dropped_and_a_lasting_lack_reported():
    # The race a replay test hit: a day-ahead image reached the node before its first /clock,
    # passed unjudged and made the synchronizer reject every later, correct image. Dropped
    # instead (an evaluation replay sends an unanswered group again: it must be unused).
    ros = Listener("g2g_test_camera_inputs_clock")
    try:
        got, rejects = [], []
        inputs = CameraInputs(ros.node, ["cam0"], lambda cam, stamp, msg: got.append(stamp),
                              max_ahead_s=10.0, on_reject=lambda cam, why: rejects.append(why))
        inputs._clock = clock = _Clock()
        cb = inputs._image_cb("cam0")
        rgb = np.zeros((4, 4, 3), np.uint8)
        day = 86400 * 10**9
        cb(image_msg(rgb, "cam0_optical_frame", 10**9 + day))  # no ROS time yet: dropped
        assert got == [] and inputs.received["cam0"] == 0 and rejects == []
        assert inputs.dropped_no_clock["cam0"] == 1
        clock.nanoseconds = 2 * 10**9
        cb(image_msg(rgb, "cam0_optical_frame", 2 * 10**9 + day))  # judged: too far ahead
        cb(image_msg(rgb, "cam0_optical_frame", 2 * 10**9))
        assert got == [2 * 10**9] and inputs.rejected_future["cam0"] == 1
        assert len(rejects) == 1 and "ahead of the ROS time dropped" in rejects[0]
        # No /clock at all (use_sim_time without --clock): reported every 10 dropped images.
        clock.nanoseconds = 0
        for i in range(19):
            cb(image_msg(rgb, "cam0_optical_frame", (3 + i) * 10**9))
        assert got == [2 * 10**9] and inputs.dropped_no_clock["cam0"] == 20
        assert [r.split(":")[0] for r in rejects[1:]] == ["10 images dropped",
                                                          "20 images dropped"]
        assert "no ROS time yet (use_sim_time is set and no /clock arrived)" in rejects[-1]
    finally:
        ros.close()


def test_a_camera_never_heard_from_is_silent_only_after_the_wait():
    # An evaluation replay starts its bag after the node is active: a camera that sent nothing
    # yet is not reported before the node has waited the quiet limit for it (it was, at the
    # first status tick, in every replay).
    ros = Listener("g2g_test_camera_inputs_silent")
    try:
        inputs = CameraInputs(ros.node, ["cam0", "cam1"], lambda cam, stamp, msg: None,
                              max_ahead_s=None)
        assert inputs.silent(5.0) == {}
        inputs.subscribed_wall -= 6.0  # the node has waited 6 s
        assert inputs.silent(5.0) == {"cam0": None, "cam1": None}
        inputs._image_cb("cam0")(image_msg(np.zeros((4, 4, 3), np.uint8), "cam0_optical_frame",
                                           10**9))
        assert inputs.silent(5.0) == {"cam1": None}
        inputs.last_wall["cam0"] -= 7.0  # and cam0's image is 7 s old
        assert set(inputs.silent(5.0)) == {"cam0", "cam1"} and inputs.silent(5.0)["cam0"] > 6.9
    finally:
        ros.close()
