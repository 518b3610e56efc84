"""Floor plans of the procedural scenes: rooms by binary space partition, connected by doors
(a random spanning tree plus extra doors that make loops). World frame: z up, metres."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_ROOM = 2.6          # smallest room side (m)
DOOR_WIDTH = (0.9, 1.3)
DOOR_HEIGHT = (2.0, 2.2)
DOOR_MARGIN = 0.25      # wall left on each side of a door (m)
EXTRA_DOOR_PROB = 0.4   # probability of a door on an adjacency outside the spanning tree


@dataclass
class Door:
    """Opening in the wall plane ``axis`` (0: x = coord, 1: y = coord) between two rooms."""

    room_lo: int   # room on the low side of the wall
    room_hi: int   # room on the high side
    axis: int
    coord: float
    span: tuple[float, float]   # along the other horizontal axis
    height: float


def split_rooms(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray,
                max_rooms: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Binary space partition of a rectangle into at most ``max_rooms`` rooms."""
    rooms = [(lo.copy(), hi.copy())]
    for _ in range(4 * max_rooms):
        if len(rooms) >= max_rooms:
            break
        sizes = np.array([(b - a).max() for a, b in rooms])
        k = int(rng.choice(len(rooms), p=sizes / sizes.sum()))
        l, h = rooms[k]
        axis = int(np.argmax(h - l)) if rng.random() < 0.8 else int(rng.integers(2))
        if h[axis] - l[axis] < 2 * MIN_ROOM:
            continue
        cut = rng.uniform(l[axis] + MIN_ROOM, h[axis] - MIN_ROOM)
        h1, l2 = h.copy(), l.copy()
        h1[axis] = cut
        l2[axis] = cut
        rooms[k] = (l, h1)
        rooms.append((l2, h))
    return rooms


def _adjacencies(lo: np.ndarray, hi: np.ndarray) -> list[tuple]:
    """``(room_lo, room_hi, axis, coord, span_lo, span_hi)`` for walls shared by two rooms."""
    out = []
    need = DOOR_WIDTH[0] + 2 * DOOR_MARGIN
    for i in range(len(lo)):
        for j in range(len(lo)):
            for axis in (0, 1):
                if abs(hi[i, axis] - lo[j, axis]) > 1e-9:
                    continue
                o = 1 - axis
                a, b = max(lo[i, o], lo[j, o]), min(hi[i, o], hi[j, o])
                if b - a >= need:
                    out.append((i, j, axis, float(hi[i, axis]), float(a), float(b)))
    return out


def make_doors(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray,
               ceiling: float) -> list[Door]:
    adj = _adjacencies(lo, hi)
    order = rng.permutation(len(adj))
    parent = list(range(len(lo)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    doors = []
    for k in order:
        i, j, axis, coord, a, b = adj[k]
        tree_edge = find(i) != find(j)
        if not tree_edge and rng.random() > EXTRA_DOOR_PROB:
            continue
        parent[find(i)] = find(j)
        width = min(rng.uniform(*DOOR_WIDTH), b - a - 2 * DOOR_MARGIN)
        start = rng.uniform(a + DOOR_MARGIN, b - DOOR_MARGIN - width)
        height = min(rng.uniform(*DOOR_HEIGHT), ceiling - 0.2)
        doors.append(Door(i, j, axis, coord, (start, start + width), height))
    if len({find(r) for r in range(len(lo))}) != 1:
        raise ValueError("scene layout: rooms are not connected (no adjacency wide enough)")
    return doors
