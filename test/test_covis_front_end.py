"""Coarse-to-fine and radius-limited scoring of map rows (pure logic, numpy scorer)."""

import numpy as np
import pytest

from g2g_model.covisibility.front_end import score_map_rows
from g2g_model.covisibility.retrieval import select_windows
from g2g_model.covisibility.scoring import CovisibilityScores


def _scene(t_a=3000, t_b=10, place=1703, seed=0):
    """A map with one place matching the query (a diagonal band) and weaker look-alikes."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.0, 0.1, (t_a, t_b))
    i = np.arange(t_a)[:, None]
    j = np.arange(t_b)[None, :]
    s += 0.8 * np.exp(-((i - place - j) / 4.0) ** 2)
    for other in (400, 2500):
        s += 0.5 * np.exp(-((i - other - j) / 4.0) ** 2)
    return np.clip(s, 0, 1)


class _Scorer:
    def __init__(self, s):
        self.s = s
        self.calls = []

    def __call__(self, rows):
        self.calls.append(np.array(rows))
        sub = self.s[rows]
        return CovisibilityScores(score=sub, r_ab=sub, r_ba=sub)


def test_full_scoring_path_scores_every_candidate_row():
    s = _scene(t_a=200, place=120)
    scorer = _Scorer(s)
    full, scored = score_map_rows(scorer, 200, 10, np.arange(200), (5, 5))
    assert scored.all() and len(scorer.calls) == 1
    np.testing.assert_array_equal(full.score, s.astype(np.float32))


def test_coarse_to_fine_finds_the_full_answer_with_few_rows():
    s = _scene()
    expect = select_windows(s, 5, top_k=1)[0]
    scorer = _Scorer(s)
    full, scored = score_map_rows(scorer, 3000, 10, np.arange(3000), (5, 5), coarse_stride=8,
                                  coarse_candidates=3)
    assert scored.sum() < 3000 / 8 + 3 * (3 * 5 + 2 * 8)
    rows = np.concatenate(scorer.calls)
    assert len(rows) == len(np.unique(rows)) == scored.sum()  # no row scored twice
    run = np.convolve(scored, np.ones(5, int), mode="valid") == 5
    got = select_windows(full.score, 5, top_k=1, eligible=run)[0]
    assert (got.map_start, got.query_start) == (expect.map_start, expect.query_start)
    assert got.score == pytest.approx(expect.score, abs=1e-6)
    # Every selected window was scored at full resolution.
    assert scored[got.map_indices].all()


def test_coarse_to_fine_respects_candidate_rows():
    s = _scene()
    scorer = _Scorer(s)
    rows = np.arange(2300, 2800)  # e.g. within a hint radius: the true place is excluded
    full, scored = score_map_rows(scorer, 3000, 10, rows, (5, 5), coarse_stride=4)
    assert np.flatnonzero(scored).min() >= 2300 and np.flatnonzero(scored).max() < 2800
    run = np.convolve(scored, np.ones(5, int), mode="valid") == 5
    got = select_windows(full.score, 5, eligible=run)[0]
    assert abs(got.map_start - 2500) <= 5


def test_eligible_mask_validation():
    with pytest.raises(ValueError, match="eligible must be"):
        select_windows(np.zeros((10, 5)), 5, eligible=np.ones(3, bool))
    with pytest.raises(ValueError, match="coarse_stride"):
        score_map_rows(_Scorer(np.zeros((10, 5))), 10, 5, np.arange(10), (5, 5), coarse_stride=0)
