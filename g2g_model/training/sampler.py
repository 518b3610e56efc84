"""Resumable, rank-sharded batch sampler over the pairs eligible under the curriculum.

Each epoch is a seeded permutation of the eligible indices (score >= threshold) split across
ranks exactly as :class:`torch.utils.data.DistributedSampler` does (it is used for the split), so
that in a DDP run every rank sees different pairs. The state (threshold, epoch, position) is
saved with the training state; a resumed run draws the very same batches. A threshold change
starts a new epoch over the new eligible set.

Buckets: when the pairs carry a bucket label (their groups' sizes, e.g. 4- and 5-camera rigs in
one training set), every batch holds one bucket only, because a batch is one stacked tensor.
The epoch's permutation is then cut into full batches bucket by bucket and the batches are
shuffled (seeded by seed and epoch); each bucket's last, incomplete batch of an epoch is left out
(the next epoch's permutation draws other pairs). With a single bucket the batches are exactly
those without buckets.
"""

from __future__ import annotations

from typing import Dict, Hashable, List, Optional, Sequence

import numpy as np
from torch.utils.data import DistributedSampler


class _IndexList:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def bucket_members(order: Sequence[int], buckets: Sequence[Hashable]
                   ) -> Dict[Hashable, List[int]]:
    """The pair indices of ``order`` per bucket label (``buckets[i]``: pair i's), each in
    ``order``'s order, buckets in the order they first appear: a batch takes one bucket's."""
    members: Dict[Hashable, List[int]] = {}
    for i in order:
        members.setdefault(buckets[i], []).append(i)
    return members


class CurriculumSampler:
    """Batches of dataset indices.

    Args:
        scores: ``[M]`` overlap score per pair (all ones when there is no score).
        batch_size: per-rank batch size.
        rank / world_size: DDP position (0 / 1 without DDP).
        seed: permutation seed (same on every rank).
        buckets: optional label per pair; a batch never mixes labels.
    """

    def __init__(self, scores: np.ndarray, batch_size: int, rank: int = 0, world_size: int = 1,
                 seed: int = 0, buckets: Optional[Sequence[Hashable]] = None) -> None:
        self.scores = np.asarray(scores, dtype=np.float64)
        if self.scores.size == 0:
            raise ValueError("the sampler needs at least one pair")
        if buckets is not None and len(buckets) != self.scores.size:
            raise ValueError(f"{len(buckets)} bucket labels for {self.scores.size} pairs")
        self.buckets = list(buckets) if buckets is not None else None
        self.batch_size = int(batch_size)
        self.rank, self.world_size, self.seed = int(rank), int(world_size), int(seed)
        self.threshold = None
        self.epoch = 0
        self.position = 0
        self._order: List[int] = []

    def _eligible(self, threshold: float) -> np.ndarray:
        idx = np.flatnonzero(self.scores >= threshold - 1e-9)
        if idx.size == 0:
            raise ValueError(f"no pair has an overlap score >= {threshold}")
        return idx

    def _build(self) -> None:
        eligible = self._eligible(self.threshold)
        split = DistributedSampler(_IndexList(len(eligible)), num_replicas=self.world_size,
                                   rank=self.rank, shuffle=True, seed=self.seed, drop_last=False)
        split.set_epoch(self.epoch)
        self._order = [int(eligible[i]) for i in split]
        if self.buckets is not None and len({self.buckets[i] for i in self._order}) > 1:
            self._order = self._bucketed(self._order)

    def _bucketed(self, order: List[int]) -> List[int]:
        """``order`` re-cut into full one-bucket batches in a seeded random order (flattened)."""
        members = bucket_members(order, self.buckets)
        bs = self.batch_size
        batches = [m[k:k + bs] for m in members.values() for k in range(0, len(m) - bs + 1, bs)]
        if not batches:  # no bucket fills a batch: the largest one, repeated by next_batch
            return max(members.values(), key=len)
        rng = np.random.default_rng([self.seed, self.epoch])
        return [i for b in rng.permutation(len(batches)) for i in batches[b]]

    def set_threshold(self, threshold: float) -> None:
        """Sample from pairs with score >= ``threshold`` from now on (new epoch on a change)."""
        threshold = round(float(threshold), 6)
        if threshold == self.threshold:
            return
        if self.threshold is not None:
            self.epoch += 1
        self.threshold = threshold
        self.position = 0
        self._build()

    def next_batch(self) -> List[int]:
        """The next ``batch_size`` indices (epochs roll over; batches never mix epochs)."""
        if self.threshold is None:
            self.set_threshold(0.0)
        if self.position + self.batch_size > len(self._order):
            if self.position == 0:  # fewer eligible pairs than a batch: repeat them
                reps = -(-self.batch_size // len(self._order))
                return (self._order * reps)[:self.batch_size]
            self.epoch += 1
            self.position = 0
            self._build()
            return self.next_batch()
        batch = self._order[self.position:self.position + self.batch_size]
        self.position += self.batch_size
        return batch

    def state_dict(self) -> Dict:
        return {"threshold": self.threshold, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Dict) -> None:
        self.threshold = state["threshold"]
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        if self.threshold is not None:
            self._build()
