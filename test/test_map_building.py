"""MapBuilder: the one keyframe rule, resize and encoding behind g2g-map build, the map_builder
node and the demo (real embedded default model)."""

import numpy as np
import pytest

from g2g_model.geometry import axis_angle_to_matrix, make_pose
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.maps.building import MapBuilder

K = np.array([[120.0, 0, 80], [0, 120.0, 60], [0, 0, 1]])


def test_keyframe_rule_resize_limit_clear_and_finish():
    pipe = G2GPipeline.default("relocalization")
    builder = MapBuilder(pipe, min_translation_m=0.2, min_rotation_deg=10.0, max_keyframes=4)
    image = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    calls = []

    def load():
        calls.append(1)
        return image

    poses = [make_pose(np.eye(3), [x, 0, 0]) for x in (0.0, 0.1, 0.25)]
    poses.append(make_pose(axis_angle_to_matrix([0, 0.3, 0]), [0.25, 0, 0]))  # 17 deg turn
    added = [builder.offer("cam0", i, T, load, K) for i, T in enumerate(poses)]
    assert added == [True, False, True, True] and len(calls) == 3  # a skipped frame: not loaded
    assert builder.offer("cam1", 9, poses[1], image, K)  # every camera has its own rule
    with pytest.raises(ValueError, match="max_keyframes=4"):
        builder.add("cam1", 10, poses[3], image, K)
    gmap = builder.finish()
    assert len(gmap) == 4 and gmap.rig == {"cameras": ["cam0", "cam1"]}
    assert gmap.frames[0].size_hw == tuple(pipe.image_size)  # resized to the backbone's input
    scale = pipe.image_size[1] / 160
    np.testing.assert_allclose(gmap.frames[0].intrinsics[0, 0], 120.0 * scale)
    assert gmap.features.shape[0] == 4 and gmap.backbone == pipe.backbone_id()
    assert builder.clear() == 4 and len(builder) == 0
    with pytest.raises(ValueError, match="no keyframes"):
        builder.finish()
