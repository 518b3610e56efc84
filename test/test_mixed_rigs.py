"""Rigs of different sizes in one training set: 4- and 5-camera groups never share a batch, the
feature cache keeps one size per shard, and a cached rig run trains on both (real sampler,
real cache, real model)."""

import numpy as np
import pytest
import torch

from g2g_model.data import cli as data_cli
from g2g_model.training.sampler import CurriculumSampler
from g2g_model.training.smoke_data import make_smoke_collection, smoke_config
from g2g_model.training.trainer import Trainer


def _epoch(sampler, n):
    return [sampler.next_batch() for _ in range(n)]


def test_batches_hold_one_bucket_and_cover_each_epoch():
    buckets = [4] * 23 + [5] * 13
    sampler = CurriculumSampler(np.ones(36), batch_size=4, seed=3, buckets=buckets)
    batches = _epoch(sampler, 5 + 3)  # 23 // 4 + 13 // 4 full batches in one epoch
    assert sampler.epoch == 0
    assert all(len({buckets[i] for i in b}) == 1 for b in batches)
    drawn = [i for b in batches for i in b]
    assert len(set(drawn)) == len(drawn) == 32  # each bucket loses < 4 pairs per epoch
    assert {buckets[b[0]] for b in batches} == {4, 5}
    order = [buckets[b[0]] for b in batches]
    assert order not in ([4] * 5 + [5] * 3, [5] * 3 + [4] * 5)  # the batches are shuffled
    sampler.next_batch()
    assert sampler.epoch == 1


def test_one_bucket_gives_the_batches_of_no_bucket():
    plain = CurriculumSampler(np.ones(30), batch_size=4, seed=1)
    labelled = CurriculumSampler(np.ones(30), batch_size=4, seed=1, buckets=[(4, 4)] * 30)
    assert _epoch(plain, 20) == _epoch(labelled, 20)


def test_bucketed_sampler_resumes_identically():
    buckets = [4] * 17 + [5] * 11
    first = CurriculumSampler(np.ones(28), batch_size=3, seed=5, buckets=buckets)
    _epoch(first, 7)
    state = first.state_dict()
    second = CurriculumSampler(np.ones(28), batch_size=3, seed=5, buckets=buckets)
    second.load_state_dict(state)
    assert _epoch(first, 12) == _epoch(second, 12)


def test_small_buckets_still_give_batches_of_one_size():
    buckets = [4, 4, 5]
    sampler = CurriculumSampler(np.ones(3), batch_size=4, buckets=buckets)
    for batch in _epoch(sampler, 3):
        assert len(batch) == 4 and {buckets[i] for i in batch} == {4}
    with pytest.raises(ValueError, match="2 bucket labels for 3 pairs"):
        CurriculumSampler(np.ones(3), batch_size=2, buckets=[4, 5])


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory):
    base = tmp_path_factory.mktemp("mixed")
    ring4 = make_smoke_collection(base / "ring4", frames=10, image_size=32)
    ring5 = make_smoke_collection(base / "ring5", frames=10, image_size=32, split="val",
                                  rig_preset="ring5")
    assert data_cli.main(["merge", str(ring4), str(ring5), "--out", str(base / "both"),
                          "--index", "rig_pairs.csv"]) == 0
    return base / "both"


def test_cached_rig_run_trains_on_both_rig_sizes(mixed_root, tmp_path):
    cfg = smoke_config(mixed_root, tmp_path / "run", task="rig",
                       cache={"enabled": True, "dir": str(tmp_path / "cache")},
                       model={"g2g_overrides": {"max_frames": 5}},
                       optim={"max_steps": 8, "warmup_steps": 2, "decay_steps": 6})
    trainer = Trainer(cfg, progress=False, trace=True)
    try:
        summary = trainer.run()
        sizes = [{len(trainer.targets[i][0]) for i in batch} for batch in trainer.seen]
        shard_sizes = {t.shape[2] for t in trainer.table._tensors}
    finally:
        trainer.close()
    assert summary["phase"] == "done" and summary["end_step"] == 8
    assert all(len(s) == 1 for s in sizes) and set.union(*sizes) == {4, 5}
    assert shard_sizes == {4, 5}
    assert torch.isfinite(torch.tensor([float(r) for r in _losses(tmp_path / "run")])).all()


def _losses(out):
    from g2g_model.training.logs import CsvLog
    from g2g_model.training.run_files import LOG_FILE

    return [row["loss"] for row in CsvLog(out / LOG_FILE).read()]


def test_fresh_standardised_rig_run_on_both_rig_sizes(mixed_root, tmp_path):
    """A fresh model with per-patch feature standardisation takes its statistics from batches
    of one rig size (a batch mixing 4- and 5-camera groups cannot be stacked)."""
    cfg = smoke_config(mixed_root, tmp_path / "run", task="rig",
                       model={"g2g_overrides": {"max_frames": 5, "feature_norm_patches": 16}},
                       optim={"max_steps": 2, "warmup_steps": 1, "decay_steps": 1})
    trainer = Trainer(cfg, progress=False)
    try:
        assert len({len(t[0]) for t in trainer.targets}) == 2
        summary = trainer.run()
        mean, scale = trainer.g2g.feature_mean, trainer.g2g.feature_scale
    finally:
        trainer.close()
    assert summary["end_step"] == 2
    assert torch.isfinite(mean).all() and mean.abs().sum() > 0 and (scale != 1).any()
