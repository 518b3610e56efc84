"""Reversed pairs (data.reverse_fraction): A and B exchanged, targets follow, same cache groups."""

import numpy as np
import pytest

from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.smoke_data import make_smoke_collection
from g2g_model.training.trajectory_groups import TrajectoryStore


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return make_smoke_collection(tmp_path_factory.getbasetemp() / "smoke_collection")


def test_reverse_fraction_swaps_groups_and_targets(root):
    plain = read_pairs("rig", root, "rig_pairs.csv", seed=3)
    mixed = read_pairs("rig", root, "rig_pairs.csv", seed=3, reverse_fraction=0.5)
    assert len(plain) == len(mixed) > 4
    swapped = [k for k, (p, m) in enumerate(zip(plain, mixed)) if p != m]
    assert 0 < len(swapped) < len(plain)
    for k in swapped:
        assert (mixed[k].spec_a, mixed[k].spec_b) == (plain[k].spec_b, plain[k].spec_a)
    store = TrajectoryStore(root, (32, 32))
    a, b = PairDataset(plain, store), PairDataset(mixed, store)
    k = swapped[0]
    gt_a, gt_b = a.targets(k)
    rgt_a, rgt_b = b.targets(k)
    # Reversed: B's anchor B0 becomes the reference. T_{B0<-A0} = inv(T_{A0<-B0}).
    np.testing.assert_allclose(rgt_b[0], np.linalg.inv(gt_b[0]), atol=1e-9)
    np.testing.assert_allclose(rgt_a[0], np.eye(4), atol=1e-9)
    # The same groups in the same (sorted) order, so the feature cache is shared.
    assert a.group_specs() == b.group_specs()
    first = read_pairs("rig", root, "rig_pairs.csv", seed=3, reverse_fraction=1.0)[0]
    assert (first.spec_a, first.spec_b) == (plain[0].spec_b, plain[0].spec_a)


def test_reverse_fraction_out_of_range_is_refused(root):
    with pytest.raises(ValueError, match="reverse_fraction"):
        read_pairs("rig", root, "rig_pairs.csv", reverse_fraction=1.5)
