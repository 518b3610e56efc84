"""Batched scoring of the T_A x T_B matrix equals pair-by-pair decoding."""

import numpy as np
import pytest
import torch

from g2g_model.covisibility.model import build_covisibility_model
from g2g_model.covisibility.scoring import score_matrix


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = build_covisibility_model("tiny", pool=2, dense_subdiv=2)
    with torch.no_grad():
        m.segment_embed.normal_(0, 1.0)
        m.scalar_head[2].bias.fill_(0.4)
    return m


def _tokens(model, n, seed):
    c = model.config
    return torch.randn(n, c.num_patches, c.in_dim, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch_size", [1, 7, 1000])
def test_batched_equals_per_pair(model, batch_size):
    ta, tb = _tokens(model, 9, 1), _tokens(model, 4, 2)
    scores = score_matrix(model, ta, tb, batch_size=batch_size)
    assert scores.score.shape == scores.r_ab.shape == scores.r_ba.shape == (9, 4)
    with torch.no_grad():
        for i in range(9):
            for j in range(4):
                out = model(ta[i:i + 1], tb[j:j + 1], dense=False)
                assert scores.r_ab[i, j] == pytest.approx(float(out["r_ab"]), abs=1e-5)
                assert scores.r_ba[i, j] == pytest.approx(float(out["r_ba"]), abs=1e-5)
    np.testing.assert_array_equal(scores.score, np.minimum(scores.r_ab, scores.r_ba))
    assert not np.allclose(scores.r_ab, scores.r_ba)


def test_float16_tokens_bf16_and_mode_restored(model):
    ta, tb = _tokens(model, 6, 3), _tokens(model, 5, 4)
    model.train()
    ref = score_matrix(model, ta, tb)
    assert model.training
    half = score_matrix(model, ta.half(), tb.half())
    np.testing.assert_allclose(half.score, ref.score, atol=2e-3)
    bf16 = score_matrix(model, ta, tb, bf16=True)
    np.testing.assert_allclose(bf16.score, ref.score, atol=3e-2)
    assert bf16.score.dtype == np.float32


def test_bad_inputs(model):
    with pytest.raises(ValueError, match="batch_size"):
        score_matrix(model, _tokens(model, 2, 0), _tokens(model, 2, 1), batch_size=0)
    with pytest.raises(ValueError, match="tokens_b"):
        score_matrix(model, _tokens(model, 2, 0), torch.zeros(16, 32))


def test_front_end_radius_scores_only_nearby_rows_and_matches_full(model):
    from g2g_model.covisibility.front_end import select_map_windows
    from g2g_model.covisibility.retrieval import select_windows

    ta, tb = _tokens(model, 40, 5), _tokens(model, 5, 6)
    positions = np.stack([np.arange(40.0), np.zeros(40), np.zeros(40)], 1)
    full = score_matrix(model, ta, tb)
    kw = dict(map_positions=positions, hint_position=[20.0, 0, 0], radius=7.5)
    expect = select_windows(full.score, 5, top_k=2, **kw)
    got, scores = select_map_windows(model, ta, tb, 5, top_k=2, **kw)
    assert len(got) == 2
    assert [(w.map_start, w.query_start) for w in got] == \
        [(w.map_start, w.query_start) for w in expect]
    np.testing.assert_allclose([w.score for w in got], [w.score for w in expect], atol=1e-6)
    near = np.abs(np.arange(40) - 20) <= 7.5
    np.testing.assert_allclose(scores.score[near], full.score[near], atol=1e-6)
    assert np.all(scores.score[~near] == 0)
    unrestricted, _ = select_map_windows(model, ta, tb, 5, top_k=3)
    assert [w.map_start for w in unrestricted] == \
        [w.map_start for w in select_windows(full.score, 5, top_k=3)]


def test_benchmark_script_runs(capsys):
    from benchmarks.bench_covisibility import main

    assert main(["--presets", "tiny", "--dtypes", "fp32", "--batch-sizes", "8",
                 "--budget-s", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "| tiny | 72,514 | 32 | fp32 | 8 |" in out and "window selection" in out


def test_front_end_coarse_to_fine_selects_fully_scored_windows(model):
    from g2g_model.covisibility.front_end import select_map_windows

    ta, tb = _tokens(model, 60, 7), _tokens(model, 5, 8)
    wins, scores = select_map_windows(model, ta, tb, 5, top_k=2, coarse_stride=4,
                                      coarse_candidates=2)
    scored_rows = np.flatnonzero(scores.score.any(axis=1))
    assert 15 <= len(scored_rows) < 60
    full = score_matrix(model, ta, tb)
    for w in wins:
        assert np.all(scores.score[w.map_indices] > 0)
        np.testing.assert_allclose(scores.score[w.map_indices], full.score[w.map_indices],
                                   atol=1e-6)
