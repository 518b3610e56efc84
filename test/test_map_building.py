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
    # Stored at the verifier's size: a 160 x 120 image is smaller than that, so as given.
    assert gmap.frames[0].size_hw == (120, 160)
    np.testing.assert_allclose(gmap.frames[0].intrinsics, K)
    assert gmap.features.shape[0] == 4 and gmap.backbone == pipe.backbone_id()
    assert builder.clear() == 4 and len(builder) == 0
    with pytest.raises(ValueError, match="no keyframes"):
        builder.finish()


def test_keyframes_are_stored_at_the_verifiers_size_with_their_aspect():
    """A full-size camera's keyframe keeps relocalization's verification size (long side 480)
    and its aspect, not the backbone's square input: the verifier triangulates from it."""
    pipe = G2GPipeline.default("relocalization")
    big = np.random.default_rng(1).integers(0, 255, (1216, 1936, 3), dtype=np.uint8)
    k_big = np.array([[1000.0, 0, 967.5], [0, 1000.0, 607.5], [0, 0, 1]])
    for max_px, size_hw in ((480, (301, 480)), (0, (1216, 1936))):
        builder = MapBuilder(pipe, keyframe_max_px=max_px)
        builder.add("cam0", 1, np.eye(4), big, k_big)
        frame = builder._frames[0]
        assert frame.size_hw == size_hw and frame.decode().shape[:2] == size_hw
        s = size_hw[1] / 1936
        # The pixel-centre convention: x' + 0.5 = s (x + 0.5).
        np.testing.assert_allclose(frame.intrinsics[0, 0], 1000.0 * s)
        np.testing.assert_allclose(frame.intrinsics[0, 2] + 0.5, s * (967.5 + 0.5), atol=1e-6)
    with pytest.raises(ValueError, match="keyframe_max_px"):
        MapBuilder(pipe, keyframe_max_px=-1)
