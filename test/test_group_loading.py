"""Threaded group loading (TrajectoryStore.load_many, the trainer's num_workers): the same
groups, in order, as loading one by one; with depth too; the reader cache stays consistent."""

import pytest
import torch

from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.smoke_data import make_smoke_collection
from g2g_model.training.trajectory_groups import TrajectoryStore


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def _specs(root):
    items = read_pairs("rig", root, "rig_pairs.csv", seed=0)
    return PairDataset(items, TrajectoryStore(root, (32, 32))).group_specs()


@pytest.mark.parametrize("with_depth", [False, True])
def test_threads_load_the_same_groups_in_order(root, with_depth):
    specs = _specs(root)
    assert len(specs) > 4
    serial = TrajectoryStore(root, (32, 32)).load_many(specs, with_depth)
    # max_open=1: every thread keeps evicting the others' readers from the shared cache.
    threaded = TrajectoryStore(root, (32, 32), max_open=1, workers=4)
    for _ in range(3):
        loaded = threaded.load_many(specs, with_depth)
        assert len(loaded) == len(serial)
        for a, b in zip(serial, loaded):
            assert torch.equal(a.images, b.images)
            assert torch.equal(a.cam_to_anchor, b.cam_to_anchor)
            if with_depth:
                assert torch.equal(a.depth, b.depth)
    assert len(threaded._readers) == 1


def test_negative_workers_are_refused(root):
    with pytest.raises(ValueError, match="workers"):
        TrajectoryStore(root, (32, 32), workers=-1)
