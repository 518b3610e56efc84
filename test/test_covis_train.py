"""Covisibility loss, training on a learnable synthetic task, evaluation, checkpoints, CLI."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from g2g_model.covisibility import cli
from g2g_model.covisibility.checkpoint import (
    CheckpointError, load_checkpoint, read_checkpoint_meta, save_checkpoint,
)
from g2g_model.covisibility.evaluate import (
    evaluate, frame_retrieval_hits, window_selection_accuracy,
)
from g2g_model.covisibility.loss import covisibility_loss, match_dense_labels
from g2g_model.covisibility.model import build_covisibility_model
from g2g_model.covisibility.samples import (
    SamplesError, concat_samples, load_samples, save_samples,
)
from g2g_model.covisibility.synthetic import synthetic_samples
from g2g_model.covisibility.train import TRAIN_PRESETS, train_covisibility


@pytest.fixture
def one_thread():
    """Tiny models are overhead-bound: one thread is as fast and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_loss_zero_for_perfect_prediction_and_positive_otherwise():
    labels = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    batch = {"dense_a": labels, "dense_b": 1 - labels, "r_ab": torch.tensor([0.5]),
             "r_ba": torch.tensor([0.25])}
    perfect = {"dense_a": (labels * 2 - 1) * 50, "dense_b": (1 - labels * 2) * 50,
               "r_ab": torch.tensor([0.5]), "r_ba": torch.tensor([0.25])}
    total, parts = covisibility_loss(perfect, batch)
    assert float(total) < 1e-6
    wrong = dict(perfect, r_ab=torch.tensor([0.9]))
    total, parts = covisibility_loss(wrong, batch)
    assert parts["scalar"] == pytest.approx(0.5 * 0.4) and parts["dense"] < 1e-6


def test_dense_labels_pooled_to_head():
    fine = torch.zeros(1, 4, 4)
    fine[0, :2, :2] = 1.0
    fine[0, 0, 2] = 1.0
    np.testing.assert_allclose(match_dense_labels(fine, (2, 2))[0], [[1.0, 0.25], [0, 0]])
    with pytest.raises(ValueError, match="integer multiple"):
        match_dense_labels(fine, (3, 3))


def test_frame_retrieval_hits_by_hand():
    q = np.array([0, 0, 0, 1, 1, 1, 2, 3, 3])
    true = np.array([.1, .8, .3, .5, .2, .1, .9, 0, 0])
    pred = np.array([.9, .5, .2, .6, .1, .3, .4, .2, .5])
    # query 0: best frame (0.8) ranked 2nd -> top1 miss, top2 hit; query 1: ranked 1st;
    # query 2 has one candidate and query 3 none covisible: both skipped.
    out = frame_retrieval_hits(q, true, pred, ks=(1, 2))
    assert out == {"top1": 0.5, "top2": 1.0, "queries": 2}


def test_window_selection_accuracy():
    true = np.zeros((20, 4))
    true[5:9] = 0.8
    true[12:16] = 0.75  # second-best place, within 0.1 of the best
    good = true + 0.01  # picks the best window
    near = true.copy()
    near[12:16] = 0.9  # picks the second-best window: gap 0.05
    wrong = np.zeros_like(true)
    wrong[0:4] = 1.0  # picks a window of true overlap 0: gap 0.8
    out = window_selection_accuracy([true] * 3, [good, near, wrong], window=4)
    assert out["queries"] == 3
    assert out["within_tolerance"] == pytest.approx(2 / 3)
    assert out["mean_gap"] == pytest.approx((0 + 0.05 + 0.8) / 3)
    with pytest.raises(ValueError, match="differ"):
        window_selection_accuracy([true], [true[:5]], window=4)


def test_window_selection_accuracy_with_a_position_hint():
    true = np.zeros((20, 4))
    true[5:9] = 0.8
    wrong = np.zeros_like(true)
    wrong[0:4] = 1.0  # without a hint this picks a window of true overlap 0 ...
    wrong[5:9] = 0.5  # ... and the best window only second
    map_positions = np.stack([np.arange(20.0), np.zeros(20), np.zeros(20)], 1)
    near_best = (map_positions, np.array([6.5, 0.0, 0.0]))
    nowhere = (map_positions, np.array([100.0, 0.0, 0.0]))
    assert window_selection_accuracy([true], [wrong], window=4)["within_tolerance"] == 0.0
    # The hint rules out the wrongly preferred window: frames 4-9 are eligible.
    out = window_selection_accuracy([true], [wrong], window=4, hints=[near_best], radius=2.6)
    assert out == {"within_tolerance": 1.0, "mean_gap": 0.0, "queries": 1,
                   "no_eligible_window": 0}
    # A hint far from every map frame leaves no window: a miss with the full gap.
    out = window_selection_accuracy([true, true], [true, true], window=4,
                                    hints=[near_best, nowhere], radius=2.6)
    assert out["within_tolerance"] == 0.5 and out["no_eligible_window"] == 1
    assert out["mean_gap"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="together"):
        window_selection_accuracy([true], [true], window=4, hints=[near_best])


def test_training_learns_synthetic_covisibility(tmp_path, one_thread):
    torch.manual_seed(0)
    train = synthetic_samples(num_places=12, frames_per_place=16, seed=0)
    val = synthetic_samples(num_places=12, frames_per_place=4, seed=1)
    model = build_covisibility_model("tiny")
    before = evaluate(model, val)
    config = dataclasses.replace(TRAIN_PRESETS["smoke"], steps=300, log_every=25,
                                 checkpoint_every=300)
    result = train_covisibility(model, train, tmp_path, config, val_set=val, progress=False)
    after = result["val"]
    rows = (tmp_path / "log.csv").read_text().splitlines()
    losses = [float(r.split(",")[1]) for r in rows[1:]]
    assert losses[-1] < 0.25 * losses[0]
    assert before["ratio_mae"] > 0.2
    print("synthetic held-out metrics before/after:", before, after)
    assert after["ratio_mae"] < 0.1, after
    assert after["dense_iou"] > 0.6 and after["retrieval_top1"] > 0.8, after
    meta = read_checkpoint_meta(result["checkpoint"])
    assert meta["step"] == 300 and meta["encoder"] == train.encoder and meta["optimizer"] is None


def _tiny():
    torch.manual_seed(1)
    return build_covisibility_model("tiny")


def test_checkpoint_round_trip_and_mismatch(tmp_path):
    model = _tiny()
    enc = {"name": "compact", "config_hash": "abc"}
    path = save_checkpoint(tmp_path / "c.safetensors", model, step=7, encoder=enc,
                           preset="tiny", metrics={"ratio_mae": 0.1})
    back, meta = load_checkpoint(path, expect_encoder=enc)
    assert meta["step"] == 7 and meta["preset"] == "tiny"
    a = torch.randn(3, 16, 32)
    b = torch.randn(3, 16, 32)
    with torch.no_grad():
        torch.testing.assert_close(back(a, b)["dense_a"], model(a, b)["dense_a"])
    with pytest.raises(CheckpointError, match="different decoder config.*'dim'"):
        load_checkpoint(path, model=build_covisibility_model("tiny", dim=32))
    with pytest.raises(CheckpointError, match="config_hash differs"):
        load_checkpoint(path, expect_encoder={"name": "compact", "config_hash": "zzz"})
    with pytest.raises(CheckpointError, match="no optimizer state"):
        load_checkpoint(path, optimizer=torch.optim.AdamW(model.parameters()))
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.safetensors")
    truncated = tmp_path / "t.safetensors"
    truncated.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(truncated)
    # A file with the right header but a missing weight names the key.
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open
    tensors = load_file(str(path))
    with safe_open(str(path), framework="pt") as fh:
        header = fh.metadata()
    del tensors["model.norm.weight"]
    save_file(tensors, str(tmp_path / "m.safetensors"), metadata=header)
    with pytest.raises(CheckpointError, match=r"missing keys \['norm.weight'\]"):
        load_checkpoint(tmp_path / "m.safetensors")


def test_resume_reproduces_uninterrupted_run(tmp_path, one_thread):
    data = synthetic_samples(num_places=4, frames_per_place=4, seed=3)
    config = dataclasses.replace(TRAIN_PRESETS["smoke"], steps=12, batch_size=8,
                                 warmup_steps=3, checkpoint_every=100, log_every=3)
    full = _tiny()
    train_covisibility(full, data, tmp_path / "full", config, progress=False)
    part = _tiny()
    stopped = train_covisibility(part, data, tmp_path / "split", config, progress=False,
                                 stop_at=7)
    assert stopped["step"] == 7
    assert not (tmp_path / "split" / "covisibility.safetensors").exists()
    resumed = build_covisibility_model("tiny")  # fresh weights: everything comes from the file
    train_covisibility(resumed, data, tmp_path / "split", config, progress=False)
    for (name, p1), p2 in zip(full.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(p1, p2, rtol=0, atol=1e-6, msg=name)
    rows = (tmp_path / "split" / "log.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["step", "3", "6", "9", "12"]
    # A different decoder cannot resume from this directory.
    with pytest.raises(CheckpointError, match="different decoder config"):
        train_covisibility(build_covisibility_model("tiny", depth=1), data, tmp_path / "split",
                           config, progress=False)


def test_samples_file_round_trip_and_errors(tmp_path):
    s = synthetic_samples(num_places=3, frames_per_place=3, same_place_candidates=1,
                          other_place_candidates=2, seed=5)
    path = save_samples(s, tmp_path / "s.safetensors")
    back = load_samples(path, expect_encoder=s.encoder)
    assert len(back) == len(s) == 27
    item = back[4]
    assert item["tokens_a"].shape == (16, 32) and item["dense_a"].shape == (4, 4)
    torch.testing.assert_close(back.ratios, s.ratios)
    torch.testing.assert_close(back.frames, s.frames)
    both = concat_samples([s, back])
    assert len(both) == 54 and int(both.pairs[27:].min()) >= s.frames.shape[0]
    with pytest.raises(SamplesError, match="name differs"):
        load_samples(path, expect_encoder={"name": "compact", "config_hash": "x"})
    with pytest.raises(SamplesError, match="ratios must be"):
        dataclasses.replace(s, ratios=s.ratios[:3])
    with pytest.raises(SamplesError, match="outside"):
        dataclasses.replace(s, pairs=s.pairs + 100)
    with pytest.raises(SamplesError, match="does not exist"):
        load_samples(tmp_path / "none.safetensors")


def test_cli_synth_train_eval_info(tmp_path, capsys, one_thread):
    tr, va, out = tmp_path / "tr.safetensors", tmp_path / "va.safetensors", tmp_path / "run"
    assert cli.main(["synth", "--out", str(tr), "--places", "4", "--frames-per-place", "4"]) == 0
    assert cli.main(["synth", "--out", str(va), "--places", "4", "--frames-per-place", "3",
                     "--seed", "1"]) == 0
    assert cli.main(["train", "--train", str(tr), "--val", str(va), "--out", str(out),
                     "--preset", "tiny", "--train-preset", "smoke", "--steps", "5",
                     "--pool", "2", "--dense-subdiv", "2", "--quiet"]) == 0
    capsys.readouterr()
    metrics_file = tmp_path / "m.json"
    assert cli.main(["eval", "--checkpoint", str(out / "covisibility.safetensors"),
                     "--samples", str(va), "--json", str(metrics_file)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(metrics_file.read_text())
    assert set(printed) >= {"dense_iou", "dense_acc", "ratio_mae", "retrieval_top1"}
    assert cli.main(["info", "--checkpoint", str(out / "covisibility.safetensors")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["preset"] == "tiny" and info["config"]["pool"] == 2 and info["step"] == 5
    assert cli.main(["eval", "--checkpoint", str(tmp_path / "x"), "--samples", str(va)]) == 2
    assert "does not exist" in capsys.readouterr().err
