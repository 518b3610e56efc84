"""End to end on a tiny simulated set: g2g-sim -> g2g-data overlap / mine / rig-pairs / stats."""

import json

import numpy as np
import pytest

from g2g_model.data.cli import main as data_main
from g2g_model.data.mining import RigPair, WindowPair, read_index
from g2g_model.data.sim.cli import main as sim_main


def _last_json(capsys):
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


def test_sim_then_data_pipeline(tmp_path, capsys):
    root = tmp_path / "sim"
    args = ["--out", str(root), "--seeds", "20005", "--scene-preset", "small", "--rig-preset",
            "ring4", "--traversals", "2", "--frames", "8", "--image-size", "32"]
    assert sim_main(args) == 0
    captured = capsys.readouterr()
    first = json.loads(captured.out[captured.out.index("{"):])
    # Not a terminal (pytest captures): no progress bars in the log.
    assert "frames:" not in captured.err and "trajectories:" not in captured.err, captured.err
    assert first["trajectories_written"] == 2 and first["camera_frames"] == 2 * 8 * 4
    assert sim_main(args + ["--labels", "--window", "3"]) == 0  # resumable: nothing to render
    again = _last_json(capsys)
    assert again["trajectories_skipped"] == 2 and again["overlap"]["matrices_written"] == 4
    assert again["mining"]["matrices"] == 4

    assert data_main(["overlap", str(root), "--include-self", "--size", "16"]) == 0
    ov = _last_json(capsys)
    # pairs (00, 01), (00, 00), (01, 01), 4 same-name camera pairs each
    # the 4 cross-traversal matrices exist already (--labels); the 8 self-pairs are new
    assert ov["matrices_written"] == 8 and ov["matrices_skipped"] == 4
    assert (root / "overlap_hist.png").is_file()
    self_ov = np.load(root / "scene_20005" / "overlap" / "traj_00__traj_00__cam0__cam0.npy")
    np.testing.assert_allclose(np.diag(self_ov.astype(np.float32)), 1.0, atol=1e-3)
    assert data_main(["overlap", str(root), "--include-self", "--size", "16"]) == 0
    assert _last_json(capsys)["matrices_skipped"] == 12

    assert data_main(["mine", str(root), "--window", "3", "--min-score", "0.05"]) == 0
    mined = _last_json(capsys)
    pairs = read_index(mined["index"], WindowPair)
    assert len(pairs) == mined["pairs"] > 0 and all(p.score >= 0.05 for p in pairs)
    assert (root / "pairs_w3.png").is_file()

    assert data_main(["rig-pairs", str(root), "--max-distance", "0.5"]) == 0
    rig = read_index(_last_json(capsys)["index"], RigPair)
    assert rig and all(p.distance_m <= 0.5 for p in rig)
    # Keyframe pairs with standstills (a frame with itself) written three times each, in place.
    keyframes = ["rig-pairs", str(root), "--max-distance", "3", "--min-frame-gap", "0",
                 "--max-frame-gap", "2"]
    assert data_main(keyframes + ["--out", str(root / "once.csv")]) == 0
    once = read_index(_last_json(capsys)["index"], RigPair)
    assert data_main(keyframes + ["--standstill-repeat", "3", "--out", str(root / "x3.csv")]) == 0
    thrice = read_index(_last_json(capsys)["index"], RigPair)
    still = [p for p in once if p.traj_a == p.traj_b and p.frame_a == p.frame_b]
    assert len(still) == 16 and len(thrice) == len(once) + 2 * len(still)
    assert [p for p in thrice if p not in still] == [p for p in once if p not in still]
    assert thrice[:3] == [still[0]] * 3
    with pytest.raises(SystemExit):
        data_main(keyframes + ["--standstill-repeat", "0"])
    assert "--standstill-repeat: must be >= 1" in capsys.readouterr().err

    assert data_main(["stats", str(root)]) == 0
    stats = _last_json(capsys)
    assert stats["trajectories"] == 2 and stats["frames"] == 16
    assert stats["frame_pairs"]["pairs"] == 12 * 64
