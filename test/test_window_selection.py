"""Frame-pair scorers and window choice of g2g_model.covisibility.window_scores."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.window_scores import (
    MapWhitening, best_window, descriptor_similarity, max_mean, whitened_similarity,
)


def _places(num_places=6, per_place=5, patches=9, dim=16, seed=0):
    """Frames of a few places: a large offset shared by all frames (the encoder's bias and the
    scene's look), a small per-place spatial pattern (zero mean over the patches, so mean
    pooling loses it), smaller per-frame noise."""
    gen = torch.Generator().manual_seed(seed)
    shared = 50.0 * torch.randn(patches, dim, generator=gen)
    places = 0.5 * torch.randn(num_places, patches, dim, generator=gen)
    places = places - places.mean(1, keepdim=True)
    frames = places.repeat_interleave(per_place, 0)
    noise = 0.1 * torch.randn(frames.shape, generator=gen)
    return shared + frames + noise, torch.arange(num_places).repeat_interleave(per_place)


def test_whitened_similarity_finds_the_place_the_mean_descriptor_misses():
    tokens, place = _places()
    query = torch.tensor([2, 13, 27])  # one frame of places 0, 2 and 5
    map_idx = torch.tensor([i for i in range(len(tokens)) if i not in query.tolist()])
    white = whitened_similarity(tokens[map_idx], tokens[query])
    assert white.shape == (len(map_idx), 3)
    best = place[map_idx][white.argmax(0)]
    assert torch.equal(best, place[query])
    # Same map frames, same place -> clearly higher than other places.
    same = place[map_idx][:, None] == place[query][None]
    assert white[same.numpy()].min() > white[~same.numpy()].max()
    # The mean-pooled descriptor sees only the noise here.
    desc = descriptor_similarity(tokens[map_idx], tokens[query])
    assert not desc[same.numpy()].min() > desc[~same.numpy()].max()


def test_whitening_is_fitted_on_the_map_only_and_is_deterministic():
    tokens, _ = _places()
    a = MapWhitening.fit(tokens, dims=8)
    b = MapWhitening.fit(tokens, dims=8)
    assert a.dims == 8
    torch.testing.assert_close(a.transform(tokens), b.transform(tokens))
    out = a.transform(tokens[:3])
    assert out.shape == (3, 8)
    torch.testing.assert_close(out.norm(dim=-1), torch.ones(3))
    # Fewer frames than dims: as many directions as the centred frames span.
    assert MapWhitening.fit(tokens[:4], dims=48).dims == 3
    # The directions are orthonormal.
    torch.testing.assert_close(a.basis @ a.basis.T, torch.eye(8), atol=1e-4, rtol=0)
    # A large map is fitted on a seeded subset.
    sub = MapWhitening.fit(tokens, dims=8, max_frames=10, seed=1)
    again = MapWhitening.fit(tokens, dims=8, max_frames=10, seed=1)
    torch.testing.assert_close(sub.basis, again.basis)


def test_whitening_rejects_bad_tokens_with_a_reason():
    tokens, _ = _places()
    with pytest.raises(ValueError, match="F >= 2"):
        MapWhitening.fit(tokens[:1])
    with pytest.raises(ValueError, match="F >= 2"):
        MapWhitening.fit(tokens[0])
    bad = tokens.clone()
    bad[3, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or Inf"):
        MapWhitening.fit(bad)
    whitening = MapWhitening.fit(tokens)
    with pytest.raises(ValueError, match="like the map's"):
        whitening.transform(tokens[:, :4])
    with pytest.raises(ValueError, match="do not vary"):
        MapWhitening.fit(tokens[:1].repeat(5, 1, 1))


def test_best_window_uses_max_mean():
    scores = np.zeros((10, 3))
    scores[4:7] = 1.0
    windows = [np.arange(s, s + 3) for s in range(8)]
    idx, score = best_window(scores, windows)
    assert idx == 4 and score == pytest.approx(max_mean(scores[4:7]))
