"""Window selection: max-mean scores, greedy NMS, threshold and radius restriction."""

import itertools

import numpy as np
import pytest

from g2g_model.covisibility.retrieval import (
    select_windows, window_scores, windows_within_radius,
)


def _naive(s, wa, wb):
    out = np.zeros((s.shape[0] - wa + 1, s.shape[1] - wb + 1))
    for i, j in itertools.product(range(out.shape[0]), range(out.shape[1])):
        win = s[i:i + wa, j:j + wb]
        out[i, j] = 0.5 * (win.max(1).mean() + win.max(0).mean())
    return out


def test_max_mean_by_hand():
    s = np.array([[0.1, 0.9, 0.2],
                  [0.4, 0.3, 0.8],
                  [0.0, 0.5, 0.6]])
    # (0,0): rows max .9,.4 cols max .4,.9 -> .65; (0,1): .9,.8 / .9,.8 -> .85;
    # (1,0): .4,.5 / .4,.5 -> .45; (1,1): rows .8,.6 -> .7, cols .5,.8 -> .65 -> .675.
    np.testing.assert_allclose(window_scores(s, 2), [[0.65, 0.85], [0.45, 0.675]])


@pytest.mark.parametrize("window", [1, 3, (4, 2), (2, 5)])
def test_max_mean_matches_naive(window):
    s = np.random.default_rng(0).random((17, 6))
    wa, wb = (window, window) if np.isscalar(window) else window
    np.testing.assert_allclose(window_scores(s, window), _naive(s, wa, wb), atol=1e-12)


def test_window_errors():
    with pytest.raises(ValueError, match="does not fit"):
        window_scores(np.zeros((5, 3)), 4)
    with pytest.raises(ValueError, match="NaN"):
        window_scores(np.full((5, 5), np.nan), 2)
    with pytest.raises(ValueError, match="top_k"):
        select_windows(np.zeros((5, 5)), 2, top_k=0)
    with pytest.raises(ValueError, match="suppress"):
        select_windows(np.zeros((5, 5)), 2, suppress="cube")


def _greedy_reference(ws, wa, wb, k, mode):
    """Brute force: best remaining window not conflicting with any kept one."""
    kept = []
    cands = sorted(((ws[i, j], i, j) for i in range(ws.shape[0]) for j in range(ws.shape[1])),
                   key=lambda t: -t[0])
    for score, i, j in cands:
        clash = any(abs(i - ki) < wa and (mode == "map" or abs(j - kj) < wb)
                    for _, ki, kj in kept)
        if not clash:
            kept.append((score, i, j))
        if len(kept) == k:
            break
    return kept


@pytest.mark.parametrize("mode", ["box", "map"])
def test_topk_nms(mode):
    s = np.random.default_rng(1).random((40, 8))
    wins = select_windows(s, 4, top_k=5, suppress=mode)
    assert len(wins) == 5
    scores = [w.score for w in wins]
    assert scores == sorted(scores, reverse=True)
    for w1, w2 in itertools.combinations(wins, 2):
        overlap_a = set(w1.map_indices) & set(w2.map_indices)
        overlap_b = set(w1.query_indices) & set(w2.query_indices)
        assert not overlap_a if mode == "map" else not (overlap_a and overlap_b)
    ref = _greedy_reference(window_scores(s, 4), 4, 4, 5, mode)
    assert [(w.map_start, w.query_start) for w in wins] == [(i, j) for _, i, j in ref]
    np.testing.assert_allclose(scores, [r[0] for r in ref])


def test_max_overlap_allows_partial_sharing():
    s = np.zeros((30, 4))
    s[10:14] = 1.0
    s[12:16] = 1.0  # two nearly equal peaks two frames apart
    strict = select_windows(s, 4, top_k=3, suppress="map")
    loose = select_windows(s, 4, top_k=3, suppress="map", max_overlap=0.5)
    assert all(abs(a.map_start - b.map_start) >= 4
               for a, b in itertools.combinations(strict, 2))
    assert all(abs(a.map_start - b.map_start) >= 2 for a, b in itertools.combinations(loose, 2))
    assert min(abs(a.map_start - b.map_start) for a, b in itertools.combinations(loose, 2)) < 4


def test_threshold_drops_weak_windows():
    s = np.full((20, 5), 0.2)
    s[5:10, :] = 0.9
    wins = select_windows(s, 5, top_k=3, threshold=0.5)
    assert [(w.map_start, w.query_start) for w in wins] == [(5, 0)]
    assert select_windows(s, 5, threshold=0.95) == []


def test_radius_restriction():
    t_a = 60
    positions = np.stack([np.arange(t_a, dtype=float), np.zeros(t_a), np.zeros(t_a)], 1)
    s = np.full((t_a, 5), 0.1)
    s[40:45] = 0.9  # the best window is at x = 40..44
    s[10:15] = 0.6  # a weaker one at x = 10..14
    assert select_windows(s, 5)[0].map_start == 40
    hint = np.eye(4)
    hint[:3, 3] = [12.0, 0.5, 0.0]
    wins = select_windows(s, 5, top_k=3, map_positions=positions, hint_position=hint, radius=6.0)
    assert wins[0].map_start == 10
    for w in wins:
        assert np.all(np.linalg.norm(positions[w.map_indices] - hint[:3, 3], axis=1) <= 6.0)
    allowed = windows_within_radius(positions, [12.0, 0.5, 0.0], 6.0, 5)
    # frames 7..17 are within 6 m of x=12 (lateral offset 0.5 m): window starts 7..13 qualify.
    assert np.flatnonzero(allowed).tolist() == list(range(7, 14))
    assert select_windows(s, 5, map_positions=positions, hint_position=[500.0, 0, 0],
                          radius=1.0) == []
    with pytest.raises(ValueError, match="needs map_positions"):
        select_windows(s, 5, radius=3.0)
    with pytest.raises(ValueError, match="rows"):
        select_windows(s, 5, map_positions=positions[:10], hint_position=hint, radius=3.0)


def test_retrieval_finds_known_window():
    rng = np.random.default_rng(2)
    t_a, t_b, w, true_start = 300, 6, 6, 173
    positions = np.cumsum(rng.normal(0, 0.5, (t_a, 3)), axis=0)
    query = positions[true_start:true_start + t_b] + rng.normal(0, 0.1, (t_b, 3))
    dist = np.linalg.norm(positions[:, None] - query[None], axis=2)
    scores = np.clip(np.exp(-dist) + rng.normal(0, 0.05, dist.shape), 0, 1)
    best = select_windows(scores, w, top_k=1)[0]
    assert (best.map_start, best.query_start) == (true_start, 0)
    assert best.score == pytest.approx(window_scores(scores, w).max())
