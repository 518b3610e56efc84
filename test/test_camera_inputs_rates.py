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
