"""A synthetic covisibility task whose answer is learnable from the tokens alone.

Every frame is taken at one of ``num_places`` places. A place has a random code vector; a
frame at that place shows the code (plus noise) on a random subset of its patches, a fraction
``v`` drawn per frame, and unique random clutter elsewhere. A patch of frame a is covisible in
frame b iff it shows the place code and b is at the same place, so
``r_ab = v_a * [place_a == place_b]``: asymmetric, and zero across places. Used by the unit
tests, the CLI smoke test and as a sanity check of the training loop; the real labels come from
depth (:mod:`g2g_model.covisibility.labels`).
"""

from __future__ import annotations

from typing import Tuple

import torch

from g2g_model.covisibility.samples import CovisibilitySamples


def synthetic_samples(
    num_places: int = 8,
    frames_per_place: int = 6,
    grid_hw: Tuple[int, int] = (4, 4),
    dim: int = 32,
    same_place_candidates: int = 2,
    other_place_candidates: int = 4,
    noise: float = 0.3,
    min_visible: float = 0.2,
    seed: int = 0,
    code_seed: int = 0,
) -> CovisibilitySamples:
    """Build a synthetic sample set.

    Every frame is a query once: it is paired with ``same_place_candidates`` other frames of
    its place and ``other_place_candidates`` frames of other places (so frame retrieval can be
    evaluated). ``code_seed`` fixes the place codes (share it between a train and a held-out
    set); ``seed`` draws the frames.

    Returns:
        :class:`CovisibilitySamples` with ``F = num_places * frames_per_place`` frames of
        ``[gh * gw, dim]`` tokens and ``F * (same + other)`` pairs; ``scene`` = place id.
    """
    if frames_per_place <= same_place_candidates:
        raise ValueError(
            f"frames_per_place ({frames_per_place}) must exceed same_place_candidates "
            f"({same_place_candidates})"
        )
    if num_places < 2:
        raise ValueError(f"num_places must be >= 2, got {num_places}")
    codes = torch.randn(num_places, dim, generator=torch.Generator().manual_seed(code_seed))
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    p = grid_hw[0] * grid_hw[1]
    n_frames = num_places * frames_per_place
    place = torch.arange(num_places).repeat_interleave(frames_per_place)
    visible = min_visible + (1 - min_visible) * torch.rand(n_frames, generator=gen)
    shows = torch.rand(n_frames, p, generator=gen).argsort(1) < (visible * p).round()[:, None]
    clutter = torch.randn(n_frames, p, dim, generator=gen)
    frames = torch.where(shows[..., None], codes[place][:, None, :], clutter)
    frames = frames + noise * torch.randn(n_frames, p, dim, generator=gen)

    pairs = []
    for a in range(n_frames):
        same = torch.nonzero((place == place[a]) & (torch.arange(n_frames) != a)).flatten()
        other = torch.nonzero(place != place[a]).flatten()
        pick_same = same[torch.randperm(len(same), generator=gen)[:same_place_candidates]]
        pick_other = other[torch.randperm(len(other), generator=gen)[:other_place_candidates]]
        pairs += [(a, int(b)) for b in torch.cat([pick_same, pick_other])]
    pairs = torch.tensor(pairs, dtype=torch.long)
    a, b = pairs[:, 0], pairs[:, 1]
    same_place = (place[a] == place[b])[:, None]
    dense_a = (shows[a] & same_place).float().view(-1, *grid_hw)
    dense_b = (shows[b] & same_place).float().view(-1, *grid_hw)
    ratios = torch.stack([dense_a.flatten(1).mean(1), dense_b.flatten(1).mean(1)], dim=1)
    return CovisibilitySamples(
        frames=frames, pairs=pairs, dense_a=dense_a, dense_b=dense_b, ratios=ratios,
        scene=place, encoder={"name": "synthetic", "config_hash": f"dim{dim}-codes{code_seed}"},
        source=f"synthetic places={num_places} seed={seed}",
    )
