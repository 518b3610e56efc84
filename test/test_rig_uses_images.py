"""The rig-odometry default fed the same rig group as A and B must predict no motion.

Issue 18's proof that the model uses its images: B = A gives the identity within 0.5 deg and
0.02 m, while a real step two frames later is not mistaken for standing still (translation
error at most half the true step; a model that always predicts the identity, which a run with
reversed pairs became, passes the first check only). The shipped default (g2g_rig_mnv2) does
not pass yet, narrowly: on this collection B = A gives 0.14 / 0.37 / 0.70 deg and <= 0.014 m,
and a 0.52 m step is off by 0.23 m on average (the step check passes; the third group's
rotation does not); on held-out scene 20001 B = A is 0.33 deg / 0.014 m on average over 15
groups, 1.0 deg / 0.032 m at worst (docs/TRAINING.md). So the test stays a strict expected
failure: the day a default passes, it reports XPASS as a failure and the marker must go.
"""

import numpy as np
import pytest

from g2g_model.data.format import TrajectoryReader
from g2g_model.geometry import rotation_angle_deg
from g2g_model.inference import G2GPipeline
from g2g_model.training.smoke_data import make_smoke_collection


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="the shipped rig default's B = A reaches 0.7 deg on one group of "
                          "three (goal 0.5 deg; docs/TRAINING.md); remove when a default passes")
def test_rig_default_predicts_identity_for_the_same_group(tmp_path_factory):
    root = make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")
    reader = TrajectoryReader(sorted(root.glob("scene_*/traj_00"))[0])
    pipe = G2GPipeline.default("rig_odometry")
    assert not pipe.untrained
    anchor = reader.world_T_cam(reader.cameras[0])
    rotations, translations, step_errors, steps = [], [], [], []
    for frame in (0, 5, 10):
        group = reader.rig_group([frame])
        b0 = pipe.predict(group, group).poses_b[0]
        rotations.append(rotation_angle_deg(b0[:3, :3]))
        translations.append(float(np.linalg.norm(b0[:3, 3])))
        moved = pipe.predict(group, reader.rig_group([frame + 2])).poses_b[0]
        truth = np.linalg.inv(anchor[frame]) @ anchor[frame + 2]
        step_errors.append(float(np.linalg.norm(moved[:3, 3] - truth[:3, 3])))
        steps.append(float(np.linalg.norm(truth[:3, 3])))
    assert max(rotations) <= 0.5 and max(translations) <= 0.02, (rotations, translations)
    assert np.mean(step_errors) <= 0.5 * np.mean(steps), (step_errors, steps)
