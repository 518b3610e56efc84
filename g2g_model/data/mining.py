"""Window mining on overlap matrices and the index of training / evaluation pairs.

Window score (ARCHITECTURE §3, "max-mean"): for a ``W x W`` block of the ``T_A x T_B`` overlap
matrix, average the mean of its row maxima and the mean of its column maxima. Every window
position is scored at once with sliding maxima and means; mining keeps the best windows greedily,
suppressing any window whose start is within ``nms`` frames of a kept one on both axes, and
stops at ``top_k`` or below ``min_score``.

Rig pairs: two rig observations (frames of the same or different traversals) whose bodies are at
most ``max_distance`` apart.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def window_score(block: np.ndarray) -> float:
    """Max-mean score of one ``[W,W]`` (or ``[W_A,W_B]``) overlap block."""
    block = np.asarray(block, dtype=np.float64)
    return float(0.5 * (block.max(1).mean() + block.max(0).mean()))


def window_scores(overlap: np.ndarray, window: int) -> np.ndarray:
    """Max-mean score of every ``W x W`` window: ``[T_A-W+1, T_B-W+1]``, entry (i, j) for the
    window starting at frame i of A and frame j of B."""
    overlap = np.asarray(overlap, dtype=np.float64)
    if overlap.ndim != 2:
        raise ValueError(f"overlap must be [T_A,T_B], got {overlap.shape}")
    if window < 1 or window > min(overlap.shape):
        raise ValueError(f"window {window} must be in 1..{min(overlap.shape)}")
    row_max = sliding_window_view(overlap, window, axis=1).max(-1)      # [T_A, T_B-W+1]
    row_part = sliding_window_view(row_max, window, axis=0).mean(-1)    # [T_A-W+1, T_B-W+1]
    col_max = sliding_window_view(overlap, window, axis=0).max(-1)      # [T_A-W+1, T_B]
    col_part = sliding_window_view(col_max, window, axis=1).mean(-1)
    return 0.5 * (row_part + col_part)


def mine_windows(overlap: np.ndarray, window: int, top_k: int = 10, min_score: float = 0.1,
                 nms: int | None = None) -> list[tuple[int, int, float]]:
    """Best windows ``(start_a, start_b, score)``, best first, after non-maximum suppression.

    Args:
        overlap: ``[T_A,T_B]`` symmetric overlap.
        window: W.
        top_k: at most this many windows.
        min_score: drop windows scoring below this.
        nms: suppression radius in frames (default W: kept windows never share a frame pair).
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    nms = window if nms is None else int(nms)
    scores = window_scores(overlap, window)
    flat = scores.ravel()
    order = np.argsort(-flat, kind="stable")
    kept: list[tuple[int, int, float]] = []
    ncols = scores.shape[1]
    for k in order:
        s = float(flat[k])
        if s < min_score or len(kept) >= top_k:
            break
        i, j = divmod(int(k), ncols)
        if any(abs(i - a) < nms and abs(j - b) < nms for a, b, _ in kept):
            continue
        kept.append((i, j, s))
    return kept


@dataclass
class WindowPair:
    """One mined pair of windows (an entry of the pair index)."""

    traj_a: str
    cam_a: str
    start_a: int
    traj_b: str
    cam_b: str
    start_b: int
    window: int
    score: float


@dataclass
class FramesPair:
    """Two groups given by their frames (one camera each): e.g. the windows a relocalization
    node used in a bag replay (map keyframes and motion-spaced query frames are in general not
    consecutive frames of the trajectory). ``frames_a`` / ``frames_b``: frame indices
    (rows of ``poses.csv``), space separated, anchor first; ``score``: overlap (1 if unknown).
    """

    traj_a: str
    cam_a: str
    frames_a: str
    traj_b: str
    cam_b: str
    frames_b: str
    score: float

    @staticmethod
    def format_frames(frames: Sequence[int]) -> str:
        return " ".join(str(int(i)) for i in frames)

    @staticmethod
    def parse_frames(text: str) -> tuple:
        """``"3 4 7"`` -> ``(3, 4, 7)`` (ValueError naming the text if malformed or empty)."""
        try:
            frames = tuple(int(t) for t in str(text).split())
        except ValueError:
            raise ValueError(f"frames must be integers separated by spaces, got {text!r}")
        if not frames or min(frames) < 0:
            raise ValueError(f"frames must be one or more indices >= 0, got {text!r}")
        return frames


@dataclass
class RigPair:
    """Two rig observations (frame indices of two trajectories) and their body offset."""

    traj_a: str
    frame_a: int
    traj_b: str
    frame_b: int
    distance_m: float
    yaw_deg: float


def write_index(pairs: Sequence, path: str | Path) -> Path:
    """Write pairs (dataclasses of one type) as ``.json`` (a list of objects) or ``.csv``."""
    path = Path(path)
    rows = [asdict(p) for p in pairs]
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".json":
        tmp.write_text(json.dumps(rows, indent=1))
    elif path.suffix == ".csv":
        if not pairs:
            raise ValueError(f"{path}: no pairs to write")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        raise ValueError(f"{path}: index must end in .json or .csv")
    tmp.replace(path)
    return path


def read_index(path: str | Path, kind: type | tuple = WindowPair) -> list:
    """Read an index written by :func:`write_index` back into ``kind`` instances.

    ``kind`` may be a tuple of dataclasses: the one whose fields the first entry has is used
    (e.g. ``(WindowPair, FramesPair)`` for relocalization indices).
    """
    path = Path(path)
    rows = _read_rows(path)
    if isinstance(kind, tuple):
        first = set(rows[0]) if rows else set()
        match = [k for k in kind if {f.name for f in fields(k)} == first]
        if rows and not match:
            raise ValueError(f"{path}: entry 1 has fields {sorted(first)}, expected one of "
                             f"{[sorted(f.name for f in fields(k)) for k in kind]}")
        kind = match[0] if match else kind[0]
    names = {f.name: f.type for f in fields(kind)}
    out = []
    casts = {"int": int, "float": float, "str": str}
    for line, row in enumerate(rows, start=2):
        if set(row) != set(names):
            raise ValueError(f"{path}: entry {line - 1} has fields {sorted(row)}, "
                             f"expected {sorted(names)}")
        try:
            out.append(kind(**{k: casts[str(names[k])](row[k]) for k in names}))
        except ValueError as exc:
            raise ValueError(f"{path}: entry {line - 1}: {exc}") from exc
    return out


def _read_rows(path: Path) -> list:
    if path.suffix == ".json":
        rows = json.loads(path.read_text())
    elif path.suffix == ".csv":
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    else:
        raise ValueError(f"{path}: index must end in .json or .csv")
    return rows


def rig_pairs(world_T_body_a: np.ndarray, world_T_body_b: np.ndarray, max_distance: float,
              min_distance: float = 0.0, same_trajectory: bool = False, min_frame_gap: int = 1,
              max_pairs: int | None = None, seed: int = 0,
              max_frame_gap: int | None = None) -> list[tuple[int, int, float, float]]:
    """Frame pairs ``(i, j, distance_m, yaw_deg)`` with body distance in
    ``[min_distance, max_distance]``.

    Args:
        world_T_body_a, world_T_body_b: ``[T_A,4,4]``, ``[T_B,4,4]``.
        same_trajectory: A and B are the same traversal: keep ``j - i >= min_frame_gap`` only
            (``min_frame_gap=0`` also keeps ``j == i``: standstill pairs, the rig seen twice at
            the same place).
        max_frame_gap: with ``same_trajectory``, also keep ``j - i <= max_frame_gap`` only
            (consecutive keyframes, the rig-odometry regime).
        max_pairs: subsample uniformly at random (seeded) to at most this many.
    """
    if max_distance <= 0 or min_distance < 0 or min_distance > max_distance:
        raise ValueError(f"need 0 <= min_distance <= max_distance, max_distance > 0; got "
                         f"{min_distance}, {max_distance}")
    if min_frame_gap < 0:
        raise ValueError(f"min_frame_gap must be >= 0, got {min_frame_gap}")
    if max_frame_gap is not None and (not same_trajectory or max_frame_gap < min_frame_gap):
        raise ValueError(f"max_frame_gap={max_frame_gap} needs same_trajectory and "
                         f">= min_frame_gap={min_frame_gap}")
    pa = np.asarray(world_T_body_a, dtype=np.float64)
    pb = np.asarray(world_T_body_b, dtype=np.float64)
    dist = np.linalg.norm(pa[:, None, :3, 3] - pb[None, :, :3, 3], axis=-1)
    ok = (dist <= max_distance) & (dist >= min_distance)
    if same_trajectory:
        ia, ib = np.meshgrid(np.arange(len(pa)), np.arange(len(pb)), indexing="ij")
        ok &= (ib - ia) >= min_frame_gap
        if max_frame_gap is not None:
            ok &= (ib - ia) <= max_frame_gap
    i, j = np.nonzero(ok)
    if max_pairs is not None and len(i) > max_pairs:
        pick = np.sort(np.random.default_rng(seed).choice(len(i), max_pairs, replace=False))
        i, j = i[pick], j[pick]
    yaw_a = np.arctan2(pa[i, 1, 0], pa[i, 0, 0])
    yaw_b = np.arctan2(pb[j, 1, 0], pb[j, 0, 0])
    yaw = np.degrees(np.abs((yaw_b - yaw_a + np.pi) % (2 * np.pi) - np.pi))
    return [(int(a), int(b), float(d), float(y)) for a, b, d, y in zip(i, j, dist[i, j], yaw)]
