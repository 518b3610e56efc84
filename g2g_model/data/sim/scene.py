"""Procedural indoor scenes: connected rooms with doors, furniture, posters and lights.

World frame: z up, floor at z = 0, metres. A scene is a rectangular footprint split into rooms by
a random binary space partition; adjacent rooms share zero-thickness walls and are connected by
door openings (a random spanning tree plus extra doors that create loops, so traversals can
revisit places from other directions). All solid geometry is axis-aligned boxes (furniture made
of one or more boxes, grouped under one bounding box) plus spheres.

Appearance variants ("seasons"): the layout and the large furniture depend only on the scene
seed; a season changes the lighting (colour, intensity, lamp positions, ambient), re-tints or
re-textures some surfaces, swaps some posters and moves, removes or adds small objects on top of
furniture. Small objects never stand on the floor, so the walkable space (and hence collision
checking of trajectories) is identical across seasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from g2g_model.data.sim.textures import POSTER_IMAGES, TEXTURE_NAMES, poster_library

SCENE_PRESETS: dict[str, dict] = {
    "small": dict(footprint_x=(6.0, 8.0), footprint_y=(5.0, 6.5), max_rooms=3, furniture=(1, 3)),
    "default": dict(footprint_x=(8.0, 13.0), footprint_y=(6.0, 10.0), max_rooms=6,
                    furniture=(2, 4)),
    "large": dict(footprint_x=(12.0, 18.0), footprint_y=(10.0, 14.0), max_rooms=10,
                  furniture=(2, 5)),
}
MIN_ROOM = 2.6          # smallest room side (m)
CEILING = (2.5, 3.2)    # ceiling height range (m)
DOOR_WIDTH = (0.9, 1.3)
DOOR_HEIGHT = (2.0, 2.2)
DOOR_MARGIN = 0.25      # wall left on each side of a door (m)
EXTRA_DOOR_PROB = 0.4   # probability of a door on an adjacency outside the spanning tree
DOOR_KEEPOUT = 1.1      # furniture keeps this far from a door opening (m)

_WALL_TEX = ("plaster", "stripes", "bricks", "dots", "tiles", "brick")
_FLOOR_TEX = ("planks", "tiles", "checker", "carpet", "grass", "gravel")
_CEIL_TEX = ("plaster", "tiles")
_OBJ_TEX = ("planks", "plaster", "checker", "stripes", "dots", "carpet", "tiles")


@dataclass
class Door:
    """Opening in the wall plane ``axis`` (0: x = coord, 1: y = coord) between two rooms."""

    room_lo: int   # room on the low side of the wall
    room_hi: int   # room on the high side
    axis: int
    coord: float
    span: tuple[float, float]   # along the other horizontal axis
    height: float


@dataclass
class Scene:
    """Renderable scene; every array is indexed by the id of its element.

    Rooms ``[R]``: ``room_lo/room_hi [R,3]`` interior bounds, ``room_mat [R,3]`` material ids of
    (walls, floor, ceiling). Furniture groups ``[G]``: ``group_lo/hi [G,3]`` bounding boxes,
    ``group_room [G]``. Boxes ``[B]``: ``box_lo/hi [B,3]``, ``box_group [B]``, ``box_mat [B]``.
    Spheres ``[S]``: ``sph_center [S,3]``, ``sph_radius [S]``, ``sph_room [S]``, ``sph_mat [S]``.
    Materials ``[M]``: ``mat_tex [M]`` (index into the texture library), ``mat_tint [M,3]``,
    ``mat_scale [M]`` (metres per texture tile). Posters ``[P]`` lie on room walls:
    ``poster_room``, ``poster_axis``, ``poster_side`` (0: low wall, 1: high wall),
    ``poster_u [P,2]`` (span along the wall), ``poster_z [P,2]``, ``poster_image``.
    Lights: one lamp per room ``light_pos [R,3]``, ``light_rgb [R,3]``; ``ambient [3]``.
    """

    seed: int
    season: int
    room_lo: np.ndarray
    room_hi: np.ndarray
    room_mat: np.ndarray
    doors: list[Door]
    group_lo: np.ndarray
    group_hi: np.ndarray
    group_room: np.ndarray
    box_lo: np.ndarray
    box_hi: np.ndarray
    box_group: np.ndarray
    box_mat: np.ndarray
    sph_center: np.ndarray
    sph_radius: np.ndarray
    sph_room: np.ndarray
    sph_mat: np.ndarray
    mat_tex: np.ndarray
    mat_tint: np.ndarray
    mat_scale: np.ndarray
    poster_room: np.ndarray
    poster_axis: np.ndarray
    poster_side: np.ndarray
    poster_u: np.ndarray
    poster_z: np.ndarray
    poster_image: np.ndarray
    light_pos: np.ndarray
    light_rgb: np.ndarray
    ambient: np.ndarray
    floor_boxes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def num_rooms(self) -> int:
        return len(self.room_lo)

    def room_of(self, points: np.ndarray, eps: float = 1e-6) -> np.ndarray:
        """Room index of each point ``[N,3]`` (-1 outside every room)."""
        p = np.asarray(points, dtype=np.float64)[:, None, :]
        inside = np.all((p >= self.room_lo[None] - eps) & (p <= self.room_hi[None] + eps), -1)
        return np.where(inside.any(1), inside.argmax(1), -1)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.room_lo.min(0), self.room_hi.max(0)


# ----------------------------------------------------------------------------- layout


def _split_rooms(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray,
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


def _doors(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, ceiling: float) -> list[Door]:
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


# ----------------------------------------------------------------------------- materials


class _Materials:
    """Growing material table (texture id, tint, tile scale)."""

    def __init__(self) -> None:
        self.tex: list[int] = []
        self.tint: list[np.ndarray] = []
        self.scale: list[float] = []

    def add(self, rng: np.random.Generator, families: tuple[str, ...], pale: bool) -> int:
        family = str(rng.choice(families))
        choices = [i for i, n in enumerate(TEXTURE_NAMES) if n.rstrip("0123456789") == family]
        self.tex.append(int(rng.choice(choices)))
        base = rng.uniform(0.55, 1.0, 3) if pale else rng.uniform(0.2, 1.0, 3)
        self.tint.append(base / max(base.max(), 1e-3) * rng.uniform(0.7, 1.0))
        self.scale.append(float(rng.uniform(0.5, 1.5)))
        return len(self.tex) - 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.array(self.tex, dtype=np.int64), np.array(self.tint, dtype=np.float32),
                np.array(self.scale, dtype=np.float32))


# ----------------------------------------------------------------------------- furniture


def _furniture_boxes(rng: np.random.Generator, kind: str) -> tuple[list, np.ndarray]:
    """Boxes of one piece in a local frame (x along the wall, y away from it, z up).

    Returns the list of ``(lo, hi)`` and the footprint size ``[2]``.
    """
    if kind == "cabinet":
        w, d, h = rng.uniform(0.6, 1.6), rng.uniform(0.35, 0.6), rng.uniform(0.7, 2.0)
        return [((0, 0, 0), (w, d, h))], np.array([w, d])
    if kind == "table":
        w, d, h = rng.uniform(0.8, 1.6), rng.uniform(0.6, 0.9), rng.uniform(0.7, 0.8)
        leg = 0.06
        boxes = [((0, 0, h - 0.04), (w, d, h))]
        for x in (0.0, w - leg):
            for y in (0.0, d - leg):
                boxes.append(((x, y, 0.0), (x + leg, y + leg, h - 0.04)))
        return boxes, np.array([w, d])
    if kind == "shelf":
        w, d, h = rng.uniform(0.8, 1.4), 0.35, rng.uniform(1.4, 2.0)
        t = 0.03
        boxes = [((0, 0, 0), (t, d, h)), ((w - t, 0, 0), (w, d, h)), ((t, 0, 0), (w - t, t, h))]
        for z in np.linspace(0.05, h - t, int(rng.integers(3, 6))):
            boxes.append(((t, t, z), (w - t, d, z + t)))
        return boxes, np.array([w, d])
    if kind == "sofa":
        w, d = rng.uniform(1.2, 2.0), rng.uniform(0.7, 0.9)
        return [((0, 0, 0), (w, 0.2, 0.85)), ((0, 0.2, 0), (w, d, 0.42))], np.array([w, d])
    if kind == "pillar":
        s = rng.uniform(0.3, 0.5)
        return [((0, 0, 0), (s, s, 10.0))], np.array([s, s])  # clipped to the ceiling later
    raise ValueError(f"unknown furniture kind {kind!r}")


_WALL_KINDS = ("cabinet", "shelf", "sofa", "table")
_FREE_KINDS = ("table", "pillar", "cabinet")


def _place_furniture(rng: np.random.Generator, room: int, lo: np.ndarray, hi: np.ndarray,
                     doors: list[Door], count: int, mats: _Materials, out: dict) -> None:
    keepout = []
    for door in doors:
        if room not in (door.room_lo, door.room_hi):
            continue
        o = 1 - door.axis
        k_lo, k_hi = np.zeros(2), np.zeros(2)
        k_lo[o], k_hi[o] = door.span[0] - 0.3, door.span[1] + 0.3
        k_lo[door.axis], k_hi[door.axis] = door.coord - DOOR_KEEPOUT, door.coord + DOOR_KEEPOUT
        keepout.append((k_lo, k_hi))
    placed = [(g_lo[:2], g_hi[:2]) for g_lo, g_hi, g_room in
              zip(out["group_lo"], out["group_hi"], out["group_room"]) if g_room == room]
    for _ in range(count):
        for _attempt in range(20):
            against_wall = rng.random() < 0.7
            kind = str(rng.choice(_WALL_KINDS if against_wall else _FREE_KINDS))
            boxes, (w, d) = _furniture_boxes(rng, kind)
            if against_wall:
                wall = int(rng.integers(4))  # 0: -x wall, 1: +x, 2: -y, 3: +y
                along = 1 if wall < 2 else 0
                length = hi[along] - lo[along]
                if w > length - 0.4:
                    continue
                pos = rng.uniform(lo[along] + 0.1, hi[along] - 0.1 - w)
                gap = 0.02

                # local (x along wall, y away from wall) -> world, per wall side.
                def to_world(p, wall=wall, pos=pos, gap=gap):
                    x, y, z = p
                    if wall == 0:
                        return np.array([lo[0] + gap + y, pos + x, z])
                    if wall == 1:
                        return np.array([hi[0] - gap - y, pos + x, z])
                    if wall == 2:
                        return np.array([pos + x, lo[1] + gap + y, z])
                    return np.array([pos + x, hi[1] - gap - y, z])
            else:
                margin = 0.9
                if hi[0] - lo[0] < w + 2 * margin or hi[1] - lo[1] < d + 2 * margin:
                    continue
                ox = rng.uniform(lo[0] + margin, hi[0] - margin - w)
                oy = rng.uniform(lo[1] + margin, hi[1] - margin - d)

                def to_world(p, ox=ox, oy=oy):
                    return np.array([ox + p[0], oy + p[1], p[2]])
            world = []
            for b_lo, b_hi in boxes:
                a, b = to_world(b_lo), to_world(b_hi)
                w_lo, w_hi = np.minimum(a, b), np.maximum(a, b)
                w_hi[2] = min(w_hi[2], hi[2])
                world.append((w_lo, w_hi))
            g_lo = np.min([b[0] for b in world], axis=0)
            g_hi = np.max([b[1] for b in world], axis=0)

            def overlaps(a_lo, a_hi, pad=0.1):
                return bool(np.all(g_lo[:2] < a_hi + pad) and np.all(a_lo - pad < g_hi[:2]))

            if any(overlaps(k_lo, k_hi, 0.0) for k_lo, k_hi in keepout):
                continue
            if any(overlaps(p_lo, p_hi) for p_lo, p_hi in placed):
                continue
            group = len(out["group_lo"])
            mat = mats.add(rng, _OBJ_TEX, pale=False)
            for w_lo, w_hi in world:
                out["box_lo"].append(w_lo)
                out["box_hi"].append(w_hi)
                out["box_group"].append(group)
                out["box_mat"].append(mat)
            out["group_lo"].append(g_lo)
            out["group_hi"].append(g_hi)
            out["group_room"].append(room)
            out["group_top"].append((kind, g_lo, g_hi))
            placed.append((g_lo[:2], g_hi[:2]))
            break


# ----------------------------------------------------------------------------- scene


def _posters(rng: np.random.Generator, room: int, lo: np.ndarray, hi: np.ndarray,
             doors: list[Door], count: int, out: dict) -> None:
    _, aspects = poster_library()
    for _ in range(count):
        for _attempt in range(10):
            axis = int(rng.integers(2))
            side = int(rng.integers(2))
            o = 1 - axis
            image = int(rng.integers(len(POSTER_IMAGES)))
            h = rng.uniform(0.5, 1.1)
            w = h * float(aspects[image])
            if w > hi[o] - lo[o] - 0.4:
                continue
            u0 = rng.uniform(lo[o] + 0.2, hi[o] - 0.2 - w)
            zc = rng.uniform(1.1, min(1.9, hi[2] - 0.2 - h / 2))
            coord = hi[axis] if side else lo[axis]
            blocked = any(
                room in (d.room_lo, d.room_hi) and d.axis == axis and abs(d.coord - coord) < 1e-9
                and d.span[0] - 0.1 < u0 + w and u0 < d.span[1] + 0.1 for d in doors)
            z0, z1 = zc - h / 2, zc + h / 2
            blocked |= any(  # no two posters overlap on one wall
                r == room and a == axis and sd == side and pu[0] - 0.1 < u0 + w
                and u0 < pu[1] + 0.1 and pz[0] < z1 and z0 < pz[1]
                for r, a, sd, pu, pz in zip(out["poster_room"], out["poster_axis"],
                                            out["poster_side"], out["poster_u"], out["poster_z"]))
            if blocked:
                continue
            out["poster_room"].append(room)
            out["poster_axis"].append(axis)
            out["poster_side"].append(side)
            out["poster_u"].append((u0, u0 + w))
            out["poster_z"].append((zc - h / 2, zc + h / 2))
            out["poster_image"].append(image)
            break


def _small_objects(rng: np.random.Generator, tops: list, mats: _Materials, out: dict,
                   count: int) -> None:
    """Small boxes / spheres on top of tables and cabinets (the season-variable objects)."""
    surfaces = [(g_lo, g_hi, room) for (kind, g_lo, g_hi), room
                in zip(tops, out["group_room"]) if kind in ("table", "cabinet", "sofa")]
    if not surfaces:
        return
    for _ in range(count):
        g_lo, g_hi, room = surfaces[int(rng.integers(len(surfaces)))]
        size = rng.uniform(0.1, 0.35)
        if g_hi[0] - g_lo[0] < size + 0.05 or g_hi[1] - g_lo[1] < size + 0.05:
            continue
        x = rng.uniform(g_lo[0], g_hi[0] - size)
        y = rng.uniform(g_lo[1], g_hi[1] - size)
        z = g_hi[2]
        mat = mats.add(rng, _OBJ_TEX, pale=False)
        if rng.random() < 0.5:
            group = len(out["group_lo"])
            lo = np.array([x, y, z])
            hi = np.array([x + size, y + size, z + rng.uniform(0.1, 0.4)])
            out["box_lo"].append(lo)
            out["box_hi"].append(hi)
            out["box_group"].append(group)
            out["box_mat"].append(mat)
            out["group_lo"].append(lo)
            out["group_hi"].append(hi)
            out["group_room"].append(room)
            out["group_top"].append(("small", lo, hi))
        else:
            r = size / 2
            out["sph_center"].append(np.array([x + r, y + r, z + r]))
            out["sph_radius"].append(r)
            out["sph_room"].append(room)
            out["sph_mat"].append(mat)


def make_scene(seed: int, season: int = 0, preset: str = "default") -> Scene:
    """Build scene ``seed`` in appearance variant ``season`` (deterministic)."""
    if preset not in SCENE_PRESETS:
        raise ValueError(f"scene preset must be one of {sorted(SCENE_PRESETS)}, got {preset!r}")
    if season < 0:
        raise ValueError(f"season must be >= 0, got {season}")
    cfg = SCENE_PRESETS[preset]
    rng = np.random.default_rng([int(seed), 0])
    size = np.array([rng.uniform(*cfg["footprint_x"]), rng.uniform(*cfg["footprint_y"]), 0.0])
    ceiling = rng.uniform(*CEILING)
    rects = _split_rooms(rng, np.zeros(2), size[:2], cfg["max_rooms"])
    room_lo = np.array([[a[0], a[1], 0.0] for a, _ in rects])
    room_hi = np.array([[h[0], h[1], ceiling] for _, h in rects])
    doors = _doors(rng, room_lo, room_hi, ceiling)

    mats = _Materials()
    room_mat = np.array([[mats.add(rng, _WALL_TEX, pale=True), mats.add(rng, _FLOOR_TEX, False),
                          mats.add(rng, _CEIL_TEX, pale=True)] for _ in rects])
    out: dict[str, list] = {k: [] for k in (
        "group_lo", "group_hi", "group_room", "group_top", "box_lo", "box_hi", "box_group",
        "box_mat", "sph_center", "sph_radius", "sph_room", "sph_mat", "poster_room",
        "poster_axis", "poster_side", "poster_u", "poster_z", "poster_image")}
    for r in range(len(rects)):
        _place_furniture(rng, r, room_lo[r], room_hi[r], doors,
                         int(rng.integers(cfg["furniture"][0], cfg["furniture"][1] + 1)),
                         mats, out)
        _posters(rng, r, room_lo[r], room_hi[r], doors, int(rng.integers(1, 4)), out)
    num_large_boxes = len(out["box_lo"])
    light_pos = np.stack([(room_lo[:, 0] + room_hi[:, 0]) / 2, (room_lo[:, 1] + room_hi[:, 1]) / 2,
                          room_hi[:, 2] - 0.15], axis=1)
    light_rgb = np.ones((len(rects), 3)) * rng.uniform(0.8, 1.2, (len(rects), 1))
    ambient = np.full(3, 0.35)

    # ---- season: everything below may differ between appearance variants.
    srng = np.random.default_rng([int(seed), 1, int(season)])
    warm = srng.uniform(-1.0, 1.0)  # colour temperature: warm (+) to cool (-)
    colour = np.array([1.0 + 0.15 * warm, 1.0, 1.0 - 0.2 * warm])
    light_rgb = light_rgb * srng.uniform(0.6, 1.3, (len(rects), 1)) * colour
    light_pos = light_pos + np.concatenate(
        [srng.uniform(-0.25, 0.25, (len(rects), 2)) * (room_hi - room_lo)[:, :2],
         np.zeros((len(rects), 1))], axis=1)
    ambient = ambient * srng.uniform(0.5, 1.3) * colour
    for r in range(len(rects)):
        if srng.random() < 0.3:  # repaint the walls of this room
            room_mat[r, 0] = mats.add(srng, _WALL_TEX, pale=True)
        elif srng.random() < 0.3:  # same texture, new tint
            mats.tint[room_mat[r, 0]] = mats.tint[room_mat[r, 0]] * srng.uniform(0.8, 1.1, 3)
    for k in range(len(out["poster_image"])):
        if srng.random() < 0.3:
            out["poster_image"][k] = int(srng.integers(len(POSTER_IMAGES)))
    tops = list(out["group_top"])
    _small_objects(srng, tops, mats, out, int(srng.integers(2, 3 * len(rects) + 3)))

    mat_tex, mat_tint, mat_scale = mats.arrays()

    def arr(key, shape, dtype=np.float64):
        return np.array(out[key], dtype=dtype).reshape(shape)

    floor_boxes = np.zeros(len(out["box_lo"]), dtype=bool)
    floor_boxes[:num_large_boxes] = True
    return Scene(
        seed=int(seed), season=int(season), room_lo=room_lo, room_hi=room_hi, room_mat=room_mat,
        doors=doors,
        group_lo=arr("group_lo", (-1, 3)), group_hi=arr("group_hi", (-1, 3)),
        group_room=arr("group_room", (-1,), np.int64),
        box_lo=arr("box_lo", (-1, 3)), box_hi=arr("box_hi", (-1, 3)),
        box_group=arr("box_group", (-1,), np.int64), box_mat=arr("box_mat", (-1,), np.int64),
        sph_center=arr("sph_center", (-1, 3)), sph_radius=arr("sph_radius", (-1,)),
        sph_room=arr("sph_room", (-1,), np.int64), sph_mat=arr("sph_mat", (-1,), np.int64),
        mat_tex=mat_tex, mat_tint=mat_tint, mat_scale=mat_scale,
        poster_room=arr("poster_room", (-1,), np.int64),
        poster_axis=arr("poster_axis", (-1,), np.int64),
        poster_side=arr("poster_side", (-1,), np.int64),
        poster_u=arr("poster_u", (-1, 2)), poster_z=arr("poster_z", (-1, 2)),
        poster_image=arr("poster_image", (-1,), np.int64),
        light_pos=light_pos, light_rgb=light_rgb, ambient=ambient, floor_boxes=floor_boxes,
    )
