"""G2GPipeline.predict on user data with the shipped default model (real weights, CPU)."""

import numpy as np
import pytest
import torch

from g2g_model.geometry import axis_angle_to_matrix, is_rotation, make_pose
from g2g_model.estimation.pipeline import G2GPipeline


@pytest.fixture(scope="module")
def pipe():
    return G2GPipeline.default("relocalization")


def _group(n, seed, offset=np.eye(4)):
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 255, (120, 160, 3), dtype=np.uint8) for _ in range(n)]
    poses = np.stack([make_pose(axis_angle_to_matrix([0, 0.1 * i, 0]), [0.3 * i, 0, 0])
                      for i in range(n)])
    return {"images": images, "intrinsics": np.array([[140.0, 0, 80], [0, 140, 60], [0, 0, 1]]),
            "cam_to_world": offset @ poses}


def test_predict_shapes_and_frames(pipe):
    pred = pipe.predict(_group(4, 0), _group(3, 1))
    assert pred.poses_a.shape == (4, 4, 4) and pred.poses_b.shape == (3, 4, 4)
    np.testing.assert_array_equal(pred.poses_a[0], np.eye(4))
    assert is_rotation(pred.poses_b[:, :3, :3], atol=1e-4).all()
    assert np.isfinite(pred.poses_b).all() and not pred.untrained
    np.testing.assert_allclose(pred.a0_T_b0, pred.poses_b[0])
    np.testing.assert_allclose(pred.world_T_b, np.eye(4)[None] @ pred.poses_b, atol=1e-12)
    assert set(pred.timing_ms) == {"prepare", "encode", "g2g", "match", "total"}


def test_world_frame_does_not_matter(pipe):
    # Each group is re-anchored to its frame 0, so moving the world frame changes nothing.
    world = make_pose(axis_angle_to_matrix([0.3, -1.2, 0.5]), [10.0, -4.0, 2.0])
    a = pipe.predict(_group(3, 2), _group(3, 3))
    b = pipe.predict(_group(3, 2, world), _group(3, 3, world))
    np.testing.assert_allclose(a.poses_b, b.poses_b, atol=1e-4)
    np.testing.assert_allclose(b.world_T_b, world @ _group(3, 2)["cam_to_world"][0] @ b.poses_b,
                               atol=1e-6)


def test_cached_features_give_the_same_answer(pipe):
    ga, gb = _group(3, 4), _group(2, 5)
    first = pipe.predict(ga, gb)
    again = pipe.predict(ga, gb, features_a=first.features_a, features_b=first.features_b)
    np.testing.assert_allclose(first.poses_b, again.poses_b, atol=1e-6)


def test_bad_input_is_named(pipe):
    with pytest.raises(ValueError, match=r"group_b\.cam_to_world\[1\]: non-finite"):
        bad = _group(3, 6)
        bad["cam_to_world"][1, 0, 3] = np.nan
        pipe.predict(_group(3, 7), bad)
    with pytest.raises(ValueError, match="at most"):
        pipe.predict(_group(pipe.max_frames + 1, 8), _group(2, 9))


def test_relocalization_runs_both_ways_and_fuses(pipe):
    # The relocalization default also runs with the groups exchanged and returns one rigid group
    # B: the mean of every frame's estimate of T_{A0<-B0} (3 of B, 4 of A), carried through B's
    # known poses. A rig checkpoint runs both ways only when it was trained on reversed pairs too.
    from g2g_model.geometry import fuse_poses, invert_pose
    from g2g_model.assets import default_checkpoint

    assert pipe.both_directions
    # The fusion itself, without the rotation matching that replaces the fused rotation
    # (test_rotation_matching.py).
    pipe = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                       rotation_matching=False)
    rig = G2GPipeline.default("rig_odometry")
    reverse = (rig.header["training"].get("reverse_fraction") or 0.0) > 0
    assert rig.both_directions == reverse
    for fraction, expected in ((0.0, False), (0.5, True)):
        header = {"training": {"task": "rig", "reverse_fraction": fraction}}
        assert G2GPipeline(rig.backbone, rig.model, header=header).both_directions == expected
    ga, gb = _group(4, 10), _group(3, 11)
    pred = pipe.predict(ga, gb)
    assert pred.directions == 2 and pred.b0_estimates.shape == (7, 4, 4)
    np.testing.assert_allclose(pred.a0_T_b0, fuse_poses(pred.b0_estimates), atol=1e-9)
    input_b = invert_pose(gb["cam_to_world"][0]) @ gb["cam_to_world"]
    np.testing.assert_allclose(pred.poses_b, pred.a0_T_b0 @ input_b, atol=1e-5)
    # The same estimates, from the other side: the rotations agree exactly; the translation
    # only up to the mean of translations of the inverses.
    back = pipe.predict(gb, ga)
    loop = pred.a0_T_b0 @ back.a0_T_b0
    np.testing.assert_allclose(loop[:3, :3], np.eye(3), atol=1e-5)
    one_way = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"),
                                          both_directions=False, rotation_matching=False)
    single = one_way.predict(ga, gb)
    assert single.directions == 1 and single.b0_estimates.shape == (3, 4, 4)
    np.testing.assert_allclose(single.poses_b[0], single.b0_estimates[0], atol=1e-5)
    loop_one_way = single.a0_T_b0 @ one_way.predict(gb, ga).a0_T_b0
    assert np.abs(loop_one_way[:3, :3] - np.eye(3)).max() > 1e-4   # one way: not symmetric
    with pytest.raises(ValueError, match="both_directions"):
        G2GPipeline(pipe.backbone, pipe.model, both_directions="yes")


def test_both_directions_in_one_batch_are_the_two_passes(pipe):
    # predict runs (A, B) and (B, A) as one batch of two: the same outputs as two passes, in
    # float32 (bf16 off: its rounding depends on the batch).
    bf16, pipe.bf16 = pipe.bf16, False
    try:
        prep_a, prep_b = pipe.prepare(_group(4, 10)), pipe.prepare(_group(4, 11))
        fa, fb = pipe.encode_pair(prep_a, prep_b)
        torch.testing.assert_close(fa, pipe.encode(prep_a), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(fb, pipe.encode(prep_b), atol=1e-5, rtol=1e-5)
        forward, backward = pipe.run_both_ways(fa, fb)
        for got, want in ((forward, pipe.run_features(fa, fb)),
                          (backward, pipe.run_features(fb, fa))):
            for key in want:
                torch.testing.assert_close(got[key], want[key], atol=1e-5, rtol=1e-5)
    finally:
        pipe.bf16 = bf16
