"""Fixed scene-seed ranges of the simulator splits (the one place that defines them).

A scene is fully determined by its integer seed, so disjoint seed ranges guarantee that no
validation or test scene is ever generated for training. Ranges are half-open ``[start, stop)``.
"""

from __future__ import annotations

SPLIT_SEEDS: dict[str, range] = {
    "train": range(0, 10_000),
    "val": range(10_000, 11_000),
    "test": range(20_000, 21_000),
}


def split_seeds(split: str, count: int | None = None, offset: int = 0) -> list[int]:
    """The first ``count`` seeds of ``split`` starting at ``offset`` within its range."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"split must be one of {sorted(SPLIT_SEEDS)}, got {split!r}")
    seeds = SPLIT_SEEDS[split]
    if offset < 0 or offset > len(seeds):
        raise ValueError(f"offset {offset} outside split {split!r} of {len(seeds)} seeds")
    stop = len(seeds) if count is None else offset + count
    if count is not None and (count < 0 or stop > len(seeds)):
        raise ValueError(f"count {count} from offset {offset} exceeds split {split!r} "
                         f"({len(seeds)} seeds)")
    return list(seeds[offset:stop])


def split_of_seed(seed: int) -> str:
    """Name of the split that owns ``seed``; ``ValueError`` if none does."""
    for name, seeds in SPLIT_SEEDS.items():
        if seed in seeds:
            return name
    raise ValueError(f"seed {seed} belongs to no split {dict(SPLIT_SEEDS)}")
