"""Window mining (max-mean, NMS, top-K, minimum score), pair index and rig pairs."""

import numpy as np
import pytest

from g2g_model.data.mining import (FramesPair, RigPair, WindowPair, mine_windows, read_index,
                                   rig_pairs, window_score, window_scores, write_index)
from g2g_model.geometry import make_pose


def test_window_score_by_hand():
    block = np.array([[0.2, 0.8], [0.4, 0.0]])
    # row maxima 0.8, 0.4 -> 0.6 ; column maxima 0.4, 0.8 -> 0.6
    assert window_score(block) == pytest.approx(0.6)
    block = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    # rows: 1, 1, 1 -> 1 ; columns: 1, 0, 0 -> 1/3
    assert window_score(block) == pytest.approx(2.0 / 3.0)


def test_sliding_scores_match_block_by_block():
    rng = np.random.default_rng(0)
    ov = rng.random((13, 17))
    w = 4
    scores = window_scores(ov, w)
    assert scores.shape == (10, 14)
    for i in range(10):
        for j in range(14):
            assert scores[i, j] == pytest.approx(window_score(ov[i:i + w, j:j + w]))
    with pytest.raises(ValueError, match="window"):
        window_scores(ov, 14)


def test_mining_on_constructed_matrix():
    ov = np.zeros((60, 80))
    # A revisit: frames 10..19 of A match frames 40..49 of B (diagonal band), a weaker one at
    # A 40..44 / B 5..9, and noise elsewhere.
    for k in range(10):
        ov[10 + k, 40 + k] = 1.0
    for k in range(5):
        ov[40 + k, 5 + k] = 0.5
    w = 5
    found = mine_windows(ov, w, top_k=10, min_score=0.3)
    # The strong band allows starts 10..15 with score 1 at each; NMS keeps non-overlapping ones.
    starts = [(i, j) for i, j, _ in found]
    assert found[0][2] == pytest.approx(1.0)
    assert (10, 40) in starts and (15, 45) in starts
    assert (40, 5) in starts
    for a in range(len(found)):
        for b in range(a + 1, len(found)):
            ia, ja, _ = found[a]
            ib, jb, _ = found[b]
            assert abs(ia - ib) >= w or abs(ja - jb) >= w
    assert all(s >= 0.3 for *_, s in found)
    assert [s for *_, s in found] == sorted([s for *_, s in found], reverse=True)
    assert len(mine_windows(ov, w, top_k=1, min_score=0.3)) == 1
    assert mine_windows(ov, w, top_k=10, min_score=0.6) == [f for f in found if f[2] >= 0.6]
    assert mine_windows(np.zeros((10, 10)), 5, min_score=0.1) == []


def test_index_round_trip(tmp_path):
    pairs = [WindowPair("s0/traj_00", "cam0", 3, "s0/traj_01", "cam2", 7, 5, 0.75),
             WindowPair("s0/traj_00", "cam1", 30, "s0/traj_02", "cam1", 0, 5, 0.5)]
    for suffix in (".json", ".csv"):
        path = write_index(pairs, tmp_path / f"pairs{suffix}")
        assert read_index(path) == pairs
    rig = [RigPair("a", 1, "b", 2, 0.5, 10.0)]
    assert read_index(write_index(rig, tmp_path / "rig.csv"), RigPair) == rig
    (tmp_path / "bad.json").write_text('[{"traj_a": "x"}]')
    with pytest.raises(ValueError, match="entry 1"):
        read_index(tmp_path / "bad.json")


def test_rig_pairs_bounded_distance():
    xs = np.arange(10) * 0.2
    poses = np.stack([make_pose(np.eye(3), [x, 0.0, 1.0]) for x in xs])
    same = rig_pairs(poses, poses, max_distance=0.45, same_trajectory=True)
    assert sorted((i, j) for i, j, *_ in same) == sorted(
        [(i, i + 1) for i in range(9)] + [(i, i + 2) for i in range(8)])
    assert all(d <= 0.45 for *_, d, _ in same)
    shifted = poses.copy()
    shifted[:, 1, 3] = 0.3
    cross = rig_pairs(poses, shifted, max_distance=0.35, min_distance=0.1)
    assert sorted((i, j) for i, j, *_ in cross) == [(i, i) for i in range(10)]
    assert len(rig_pairs(poses, shifted, 5.0, max_pairs=7)) == 7
    with pytest.raises(ValueError, match="max_distance"):
        rig_pairs(poses, poses, max_distance=0.0)


def test_rig_pairs_max_frame_gap_keeps_consecutive_keyframes():
    poses = np.stack([make_pose(np.eye(3), [0.2 * k, 0.0, 1.0]) for k in range(10)])
    odo = rig_pairs(poses, poses, max_distance=5.0, same_trajectory=True, max_frame_gap=2)
    assert sorted((i, j) for i, j, *_ in odo) == sorted(
        [(i, i + 1) for i in range(9)] + [(i, i + 2) for i in range(8)])
    with pytest.raises(ValueError, match="max_frame_gap"):
        rig_pairs(poses, poses, max_distance=5.0, max_frame_gap=2)
    still = rig_pairs(poses, poses, max_distance=5.0, same_trajectory=True, min_frame_gap=0,
                      max_frame_gap=1)
    assert sorted((i, j) for i, j, *_ in still) == sorted(
        [(i, i) for i in range(10)] + [(i, i + 1) for i in range(9)])
    assert all(d == 0.0 for i, j, d, _ in still if i == j)
    with pytest.raises(ValueError, match="min_frame_gap"):
        rig_pairs(poses, poses, max_distance=5.0, same_trajectory=True, min_frame_gap=-1)


def test_frames_pair_index_is_told_apart_from_window_pairs(tmp_path):
    rows = [FramesPair("s/t0", "cam1", FramesPair.format_frames([4, 6, 9]), "s/t1", "cam0",
                       "0 1 3", 1.0)]
    for suffix in (".json", ".csv"):
        path = write_index(rows, tmp_path / f"frames{suffix}")
        back = read_index(path, (WindowPair, FramesPair))
        assert back == rows and FramesPair.parse_frames(back[0].frames_a) == (4, 6, 9)
    windows = write_index([WindowPair("a", "cam0", 0, "b", "cam0", 2, 5, 0.5)],
                          tmp_path / "w.json")
    assert isinstance(read_index(windows, (WindowPair, FramesPair))[0], WindowPair)
    rigs = write_index([RigPair("a", 0, "b", 1, 0.5, 3.0)], tmp_path / "r.json")
    with pytest.raises(ValueError, match="expected one of"):
        read_index(rigs, (WindowPair, FramesPair))
    for bad in ("", "1 x", "-1 2"):
        with pytest.raises(ValueError, match="frames"):
            FramesPair.parse_frames(bad)
