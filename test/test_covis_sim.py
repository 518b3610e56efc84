"""Covisibility samples from simulator scenes, and the shipped covisibility checkpoint."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.checkpoint import load_checkpoint, save_checkpoint
from g2g_model.covisibility.sim_data import (balanced_pairs, load_scene_frames, scene_overlap,
                                             scene_samples)
from g2g_model.covisibility.sim_eval import retrieval_pairs, window_queries
from g2g_model.covisibility.model import build_covisibility_model
from g2g_model.data.overlap import directional_overlap
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A tiny sim scene (2 traversals of 12 frames, 4 cameras, depth) and its frames."""
    root = tmp_path_factory.mktemp("covis_sim")
    cfg = SimConfig(scene_preset="small", rig_preset="ring4", traversals=2, frames=12,
                    image_size=64, with_depth=True)
    for traversal in range(2):
        generate_trajectory(root, 3, traversal, cfg)
    pipeline = G2GPipeline.untrained_default(seed=0)
    frames = load_scene_frames(pipeline, root / "scene_00003", stride=1, label_hw=(32, 32),
                               cache_dir=root / "cache")
    return root, pipeline, frames


def test_frames_are_encoded_per_frame_and_cached(scene):
    root, pipeline, frames = scene
    assert len(frames) == 2 * 4 * 12
    assert frames.tokens.dtype == torch.float16
    assert frames.encoder == pipeline.backbone_id()
    assert frames.depth.shape == (96, 32, 32)
    # The cache returns the same frames without encoding again.
    again = load_scene_frames(pipeline, root / "scene_00003", stride=1, label_hw=(32, 32),
                              cache_dir=root / "cache")
    assert torch.equal(again.tokens, frames.tokens)
    np.testing.assert_array_equal(again.world_T_cam, frames.world_T_cam)
    # Each token row is the encoding of that frame alone (what maps cache).
    from g2g_model.data.format import TrajectoryReader

    reader = TrajectoryReader(root / "scene_00003" / "traj_01")
    i = int(frames.select(1, 2)[5])
    assert frames.frame[i] == 5
    alone = pipeline.encode_frames([reader.image("cam2", 5)], reader.rig["cam2"].K)
    torch.testing.assert_close(frames.tokens[i].float(), alone[0], atol=2e-3, rtol=1e-2)


def test_frames_without_an_encoder_have_the_same_geometry(scene):
    """``load_scene_frames(None, ...)`` (the image models' data) reads the same depth, poses and
    frame numbers without encoding or caching anything."""
    root, _, frames = scene
    bare = load_scene_frames(None, root / "scene_00003", stride=1, label_hw=(32, 32),
                             cache_dir=root / "no_cache")
    assert bare.tokens.shape == (len(frames), 0, 0) and bare.encoder == {}
    assert not (root / "no_cache").exists()
    for name in ("depth", "intrinsics", "world_T_cam", "traversal", "camera", "frame"):
        np.testing.assert_array_equal(getattr(bare, name), getattr(frames, name), err_msg=name)


def test_sim_eval_reports_every_scorer_overall_and_per_scene(scene):
    """``evaluate_scenes`` (``g2g-covis sim-eval``) on two scenes with small untrained models:
    every scorer is reported, and each scene's window-pick report adds up to the overall one."""
    from g2g_model.covisibility.embedding import CovisibilityEmbedding
    from g2g_model.covisibility.image_embedding import ImageEmbedding
    from g2g_model.covisibility.pair_verifier import PairVerifier
    from g2g_model.covisibility.sim_eval import evaluate_scenes

    root, pipeline, frames = scene
    cfg = SimConfig(scene_preset="small", rig_preset="ring4", traversals=2, frames=12,
                    image_size=64, with_depth=True)
    for traversal in range(2):
        generate_trajectory(root, 4, traversal, cfg)
    torch.manual_seed(0)
    _, patches, dim = frames.tokens.shape
    side = int(round(patches ** 0.5))
    model = build_covisibility_model("tiny", in_dim=dim, grid_hw=(side, side))
    embedding = CovisibilityEmbedding(patches, dim, dim=8)
    embedding.projection.normal_()
    scenes = [root / "scene_00003", root / "scene_00004"]
    out = evaluate_scenes(model, pipeline, scenes, model.config.dense_hw, stride=1,
                          pairs_per_scene=40, window=4, embedding=embedding,
                          image_embedding=ImageEmbedding(16, 2, 8).eval(),
                          pair_verifier=PairVerifier(16, 2, 4).eval(), verify_top_k=3)
    assert out["scenes"] == ["scene_00003", "scene_00004"]
    assert {"balanced", "retrieval", "window", "baseline_descriptor", "whitened", "embedding",
            "image", "combined", "verified"} <= set(out)
    assert set(out["per_scene"]) == {"embedding", "image", "combined", "verified"}
    for name, per_scene in out["per_scene"].items():
        overall = out[name]["window"]
        assert list(per_scene) == out["scenes"], name
        counts = [r["queries"] for r in per_scene.values()]
        assert sum(counts) == overall["queries"] and min(counts) > 0, name
        hits = sum(r["within_tolerance"] * r["queries"] for r in per_scene.values())
        assert hits / overall["queries"] == pytest.approx(overall["within_tolerance"]), name


def test_sample_labels_agree_with_the_reference_overlap(scene):
    _, _, frames = scene
    overlap = scene_overlap(frames, size=None)
    pairs = balanced_pairs(overlap, 200, np.random.default_rng(0))
    assert len(pairs) == 200 and not np.any(pairs[:, 0] == pairs[:, 1])
    covisible = overlap[pairs[:, 0], pairs[:, 1]] >= 0.05
    assert covisible.mean() == pytest.approx(0.5, abs=0.05)
    samples = scene_samples(frames, pairs, dense_hw=(8, 8))
    # Reference: the project's labeller on the same depth maps, directional both ways.
    ref_ab = np.array([directional_overlap(frames.depth[a][None], frames.intrinsics[a],
                                           frames.world_T_cam[a][None], frames.depth[b][None],
                                           frames.intrinsics[b], frames.world_T_cam[b][None],
                                           size=None)[0, 0] for a, b in pairs])
    r_ab = samples.ratios[:, 0].numpy()
    r_ba = samples.ratios[:, 1].numpy()
    assert np.abs(r_ab - ref_ab).mean() < 0.02
    assert np.abs(r_ab - ref_ab).max() < 0.1
    sym = np.minimum(r_ab, r_ba)
    assert np.abs(sym - overlap[pairs[:, 0], pairs[:, 1]]).mean() < 0.02
    # Dense labels are consistent with the ratio (equal-size cells, all depth valid here).
    valid = (frames.depth[pairs[:, 0]] > 0).mean((1, 2))
    full = valid > 0.999
    assert full.any()
    np.testing.assert_allclose(samples.dense_a.float().mean((1, 2)).numpy()[full], r_ab[full],
                               atol=2e-3)


def test_retrieval_and_window_queries(scene):
    _, _, frames = scene
    pairs = retrieval_pairs(frames, query_every=4)
    assert set(frames.traversal[pairs[:, 0]]) == {1} and set(frames.traversal[pairs[:, 1]]) == {0}
    assert len(pairs) == len(np.arange(48)[::4]) * 48
    side = int(round(frames.tokens.shape[1] ** 0.5))
    model = build_covisibility_model("tiny", in_dim=frames.tokens.shape[-1],
                                     grid_hw=(side, side))
    trues, preds, positions, query_frames = window_queries(model, frames, window=4,
                                                           min_best=0.0)
    assert len(trues) == len(positions) == 4 * (12 - 4 + 1)
    # Positions: the map camera centres and the query window's mean camera centre.
    m = frames.select(0, 0)
    np.testing.assert_array_equal(positions[0][0], frames.world_T_cam[m][:, :3, 3])
    np.testing.assert_allclose(positions[0][1],
                               frames.world_T_cam[frames.select(1, 0)[:4], :3, 3].mean(0))
    # Frames: the rows (map) and columns (query) of each query's matrices.
    np.testing.assert_array_equal(query_frames[0][0], m)
    np.testing.assert_array_equal(query_frames[1][1], frames.select(1, 0)[1:5])
    assert trues[0].shape == preds[0].shape == (12, 4)
    assert all(np.all((t >= 0) & (t <= 1)) for t in trues)
    # The descriptor-similarity fallback is scored on the same queries.
    base_trues, base_preds, _, _ = window_queries(None, frames, window=4, min_best=0.0)
    assert len(base_preds) == len(preds)
    assert all(np.array_equal(a, b) for a, b in zip(base_trues, trues))


def test_input_norm_statistics_round_trip(scene, tmp_path):
    _, _, frames = scene
    side = int(round(frames.tokens.shape[1] ** 0.5))
    model = build_covisibility_model("tiny", in_dim=frames.tokens.shape[-1],
                                     grid_hw=(side, side), input_norm=True)
    with pytest.raises(ValueError, match="tokens must be"):
        model.set_input_statistics(frames.tokens[:1])
    model.set_input_statistics(frames.tokens)
    emb = model.embed(frames.tokens)
    z = (frames.tokens.float() - model.input_mean) / model.input_std
    torch.testing.assert_close(z.mean(0), torch.zeros_like(z[0]), atol=1e-4, rtol=0)
    path = save_checkpoint(tmp_path / "c.safetensors", model, encoder=frames.encoder)
    loaded, _ = load_checkpoint(path, expect_encoder=frames.encoder)
    assert loaded.config.input_norm
    torch.testing.assert_close(loaded.embed(frames.tokens), emb)
    with pytest.raises(ValueError, match="input_norm"):
        build_covisibility_model("tiny").set_input_statistics(frames.tokens)


@pytest.mark.skipif(default_checkpoint("covisibility") is None,
                    reason="no shipped covisibility checkpoint")
def test_shipped_checkpoint_matches_the_default_backbone():
    pipeline = G2GPipeline.default()
    assert not pipeline.untrained
    model, meta = load_checkpoint(default_checkpoint("covisibility"),
                                  expect_encoder=pipeline.backbone_id())
    assert meta["encoder"] == pipeline.backbone_id()
    assert model.config.in_dim == pipeline.backbone.feature_dim
    tokens = torch.randn(3, model.config.num_patches, model.config.in_dim)
    out = model(tokens[:2], tokens[1:], dense=True)
    assert out["r_ab"].shape == (2,)
