"""The covisibility embedding: training, map-relative scoring, strict checkpoint loading."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.checkpoint import CheckpointError
from g2g_model.covisibility.embedding import (CovisibilityEmbedding, embedding_similarity,
                                              load_embedding, save_embedding, train_embedding)
from g2g_model.covisibility.samples import CovisibilitySamples
from g2g_model.tagged_safetensors import write_tagged

ENCODER = {"name": "toy", "config_hash": "abc"}
PATCHES, DIM = 9, 16


def _scene(gen, num_places=6, per_place=6):
    """Frames of one scene: a large offset of the scene, a zero-mean pattern per place."""
    shared = 20.0 * torch.randn(PATCHES, DIM, generator=gen)
    places = torch.randn(num_places, PATCHES, DIM, generator=gen)
    places = places - places.mean(1, keepdim=True)
    frames = shared + places.repeat_interleave(per_place, 0)
    frames = frames + 0.3 * torch.randn(frames.shape, generator=gen)
    return frames, torch.arange(num_places).repeat_interleave(per_place)


def _samples(seed=0, scenes=3):
    gen = torch.Generator().manual_seed(seed)
    frames, pairs, ratios, scene_ids, offset = [], [], [], [], 0
    for sid in range(scenes):
        f, place = _scene(gen)
        n = len(f)
        a, b = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        keep = a != b
        a, b = a[keep], b[keep]
        same = (place[a] == place[b]).float()
        pairs.append(torch.stack([a, b], 1) + offset)
        ratios.append(torch.stack([same, same], 1))
        frames.append(f)
        scene_ids.append(torch.full((n,), sid))
        offset += n
    pairs = torch.cat(pairs)
    return CovisibilitySamples(
        frames=torch.cat(frames).half(), pairs=pairs,
        dense_a=torch.zeros(len(pairs), 2, 2), dense_b=torch.zeros(len(pairs), 2, 2),
        ratios=torch.cat(ratios), scene=torch.cat(scene_ids), encoder=ENCODER)


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    return train_embedding(_samples(), dim=8, pca_dims=32, steps=300, batch_size=256,
                           lr=1e-2, progress=False)


def test_trained_embedding_scores_an_unseen_scene(trained):
    model, record = trained
    assert record["dim"] == 8 and record["pairs"] == 3 * 36 * 35
    frames, place = _scene(torch.Generator().manual_seed(99))  # a scene never trained on
    scores = embedding_similarity(model, frames, frames)
    same = (place[:, None] == place[None]).numpy() & ~np.eye(len(place), dtype=bool)
    other = (place[:, None] != place[None]).numpy()
    assert scores[same].mean() > 0.6, scores[same].mean()
    assert abs(scores[other].mean()) < 0.25, scores[other].mean()
    # The scene's own statistics matter: with another scene's, the offset swamps the places.
    foreign, _ = _scene(torch.Generator().manual_seed(7))
    from g2g_model.covisibility.window_scores import token_statistics

    wrong = embedding_similarity(model, frames, frames, stats=token_statistics(foreign))
    assert wrong[same].mean() - wrong[other].mean() < scores[same].mean() - scores[other].mean()


def test_round_trip_and_strict_loading(trained, tmp_path):
    model, record = trained
    path = save_embedding(tmp_path / "emb.safetensors", model, ENCODER, record)
    loaded, header = load_embedding(path, expect_encoder=ENCODER)
    assert header["training"]["steps"] == 300
    torch.testing.assert_close(loaded.projection, model.projection.half().float())
    with pytest.raises(CheckpointError, match="encoder 'toy'.*config_hash differs"):
        load_embedding(path, expect_encoder={"name": "toy", "config_hash": "other"})
    with pytest.raises(CheckpointError, match="does not exist"):
        load_embedding(tmp_path / "missing.safetensors")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_embedding(truncated)
    bad = tmp_path / "bad.safetensors"
    write_tagged(bad, "g2g_covis_embedding", {"version": 1, "num_patches": PATCHES,
                                              "in_dim": DIM, "dim": 4},
                 {"projection": torch.zeros(8, PATCHES * DIM)})
    with pytest.raises(CheckpointError, match="does not fit its header"):
        load_embedding(bad)


def test_bad_inputs_are_refused_with_a_reason():
    model = CovisibilityEmbedding(PATCHES, DIM, 4)
    with pytest.raises(ValueError, match=r"tokens must be \[T, 9, 16\]"):
        model(torch.zeros(3, 4, DIM))
    with pytest.raises(ValueError, match="NaN or Inf"):
        embedding_similarity(model, torch.full((3, PATCHES, DIM), float("nan")),
                             torch.zeros(2, PATCHES, DIM))
    with pytest.raises(ValueError, match="no training pairs"):
        empty = _samples()
        empty.pairs = empty.pairs[:0]
        train_embedding(CovisibilitySamples(
            frames=empty.frames, pairs=empty.pairs, dense_a=torch.zeros(0, 2, 2),
            dense_b=torch.zeros(0, 2, 2), ratios=torch.zeros(0, 2), scene=empty.scene),
            progress=False)
