"""Furnishing of the procedural scenes: materials, furniture (boxes grouped under one bounding
box), posters on walls and small objects on top of furniture (the part a season may move)."""

from __future__ import annotations

import numpy as np

from g2g_model.data.sim.layout import Door
from g2g_model.data.sim.photos import CROPS_PER_PHOTO, PHOTO_TEXTURE_NAMES, PHOTOS
from g2g_model.data.sim.textures import POSTER_IMAGES, TEXTURE_NAMES, poster_library

DOOR_KEEPOUT = 1.1      # furniture keeps this far from a door opening (m)
_OBJ_TEX = ("planks", "plaster", "checker", "stripes", "dots", "carpet", "tiles")


class Materials:
    """Growing material table (texture id, tint, tile scale).

    ``photo_share``: the probability that a new material is a photograph (one of
    ``PHOTO_TEXTURE_NAMES``) instead of one of the asked families; 0 draws nothing extra, so
    scenes without photographs are exactly as before.
    """

    def __init__(self, photo_share: float = 0.0) -> None:
        if not 0.0 <= photo_share <= 1.0:
            raise ValueError(f"photo_share must be in [0, 1], got {photo_share}")
        self.photo_share = float(photo_share)
        self.tex: list[int] = []
        self.tint: list[np.ndarray] = []
        self.scale: list[float] = []

    def add(self, rng: np.random.Generator, families: tuple[str, ...], pale: bool) -> int:
        if self.photo_share > 0.0 and rng.random() < self.photo_share:
            return self._add_photo(rng)
        family = str(rng.choice(families))
        choices = [i for i, n in enumerate(TEXTURE_NAMES) if n.rstrip("0123456789") == family]
        self.tex.append(int(rng.choice(choices)))
        base = rng.uniform(0.55, 1.0, 3) if pale else rng.uniform(0.2, 1.0, 3)
        self.tint.append(base / max(base.max(), 1e-3) * rng.uniform(0.7, 1.0))
        self.scale.append(float(rng.uniform(0.5, 1.5)))
        return len(self.tex) - 1

    def _add_photo(self, rng: np.random.Generator) -> int:
        k = int(rng.integers(len(PHOTO_TEXTURE_NAMES)))
        self.tex.append(TEXTURE_NAMES.index(PHOTO_TEXTURE_NAMES[k]))
        if PHOTOS[k // CROPS_PER_PHOTO].colour:  # keep the photograph's colours, vary the level
            tint = rng.uniform(0.85, 1.0, 3) * rng.uniform(0.7, 1.1)
        else:
            tint = rng.uniform(0.3, 1.0, 3)
            tint = tint / max(tint.max(), 1e-3) * rng.uniform(0.7, 1.0)
        self.tint.append(np.minimum(tint, 1.0))
        self.scale.append(float(rng.uniform(0.7, 2.0)))
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


def _add_object(out: dict, boxes: list, mat: int, room: int, kind: str, g_lo: np.ndarray,
                g_hi: np.ndarray) -> None:
    """Append one object to the scene: its world boxes (one material) and its group (bounds
    ``g_lo``/``g_hi``, room, and the top that small objects may stand on)."""
    group = len(out["group_lo"])
    for b_lo, b_hi in boxes:
        out["box_lo"].append(b_lo)
        out["box_hi"].append(b_hi)
        out["box_group"].append(group)
        out["box_mat"].append(mat)
    out["group_lo"].append(g_lo)
    out["group_hi"].append(g_hi)
    out["group_room"].append(room)
    out["group_top"].append((kind, g_lo, g_hi))


def place_furniture(rng: np.random.Generator, room: int, lo: np.ndarray, hi: np.ndarray,
                    doors: list[Door], count: int, mats: Materials, out: dict,
                    scale: float = 1.0) -> None:
    """Place ``count`` pieces in room ``room`` (``scale``: size factor of every piece, e.g.
    3: blocks, canopies and columns of a street instead of cabinets, tables and pillars)."""
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
            if scale != 1.0:
                boxes = [(np.multiply(a, scale), np.multiply(b, scale)) for a, b in boxes]
                w, d = w * scale, d * scale
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
            _add_object(out, world, mats.add(rng, _OBJ_TEX, pale=False), room, kind, g_lo, g_hi)
            placed.append((g_lo[:2], g_hi[:2]))
            break


def place_posters(rng: np.random.Generator, room: int, lo: np.ndarray, hi: np.ndarray,
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


def place_small_objects(rng: np.random.Generator, tops: list, mats: Materials, out: dict,
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
            lo = np.array([x, y, z])
            hi = np.array([x + size, y + size, z + rng.uniform(0.1, 0.4)])
            _add_object(out, [(lo, hi)], mat, room, "small", lo, hi)
        else:
            r = size / 2
            out["sph_center"].append(np.array([x + r, y + r, z + r]))
            out["sph_radius"].append(r)
            out["sph_room"].append(room)
            out["sph_mat"].append(mat)
