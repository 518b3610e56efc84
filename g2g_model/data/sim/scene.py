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

Floor plans are :mod:`.layout`; materials, furniture, posters and small objects
:mod:`.furnishing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from g2g_model.data.sim.furnishing import (Materials, place_furniture, place_posters,
                                           place_small_objects)
from g2g_model.data.sim.layout import Door, make_doors, split_rooms
from g2g_model.data.sim.lighting import random_lighting
from g2g_model.data.sim.textures import POSTER_IMAGES, TEXTURE_NAMES

SCENE_PRESETS: dict[str, dict] = {
    "small": dict(footprint_x=(6.0, 8.0), footprint_y=(5.0, 6.5), max_rooms=3, furniture=(1, 3)),
    "default": dict(footprint_x=(8.0, 13.0), footprint_y=(6.0, 10.0), max_rooms=6,
                    furniture=(2, 4)),
    "large": dict(footprint_x=(12.0, 18.0), footprint_y=(10.0, 14.0), max_rooms=10,
                  furniture=(2, 5)),
    # One hall that a car-sized rig can drive through (benchmarks at car scale). Its texture
    # tiles are 4x larger (2-6 m): a tiled floor that repeats within a 1-3 m step aliases the
    # motion (matches one tile off agree on a wrong step length).
    "hall": dict(footprint_x=(22.0, 28.0), footprint_y=(16.0, 20.0), max_rooms=1,
                 furniture=(6, 10), texture_scale=4.0),
    # Outdoor-like: one long street or a wide courtyard between high facades (the "ceiling" is
    # a pale blue sky, the sun the main light: ``outdoor``), large texture tiles as in the hall,
    # furniture 3x larger (blocks, canopies and columns along the facades and in the open).
    "street": dict(footprint_x=(60.0, 90.0), footprint_y=(12.0, 18.0), max_rooms=1,
                   furniture=(14, 24), texture_scale=4.0, ceiling=(8.0, 14.0), outdoor=True,
                   furniture_scale=3.0),
    "courtyard": dict(footprint_x=(30.0, 40.0), footprint_y=(24.0, 32.0), max_rooms=1,
                      furniture=(10, 16), texture_scale=4.0, ceiling=(10.0, 16.0),
                      outdoor=True, furniture_scale=3.0),
}
CEILING = (2.5, 3.2)    # ceiling height range (m)

_WALL_TEX = ("plaster", "stripes", "bricks", "dots", "tiles", "brick")
_FLOOR_TEX = ("planks", "tiles", "checker", "carpet", "grass", "gravel")
_CEIL_TEX = ("plaster", "tiles")
_SKY_TINT = np.array([0.75, 0.85, 1.0], np.float32)


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
    Lights: one lamp per room ``light_pos [R,3]``, ``light_rgb [R,3]``; ``ambient [3]``; a
    directional light ``sun_dir [3]`` (towards the light) of colour ``sun_rgb [3]`` (zero: none);
    ``sky_rgb [3]``: outdoors, the ceilings shine with this light instead of being lit (zero:
    indoors).
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
    sun_dir: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    sun_rgb: np.ndarray = field(default_factory=lambda: np.zeros(3))
    sky_rgb: np.ndarray = field(default_factory=lambda: np.zeros(3))

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


def make_scene(seed: int, season: int = 0, preset: str = "default", photo_share: float = 0.0,
               random_light: bool = False) -> Scene:
    """Build scene ``seed`` in appearance variant ``season`` (deterministic).

    ``photo_share``: probability that a material (walls, floors, furniture, small objects) is a
    photograph (:mod:`.photos`) instead of a procedural texture. ``random_light``: add a sun and
    vary lamp and ambient gains (:mod:`.lighting`; always on for ``outdoor`` presets). With the
    defaults a scene is exactly what it was before these options existed.
    """
    if preset not in SCENE_PRESETS:
        raise ValueError(f"scene preset must be one of {sorted(SCENE_PRESETS)}, got {preset!r}")
    if season < 0:
        raise ValueError(f"season must be >= 0, got {season}")
    cfg = SCENE_PRESETS[preset]
    rng = np.random.default_rng([int(seed), 0])
    size = np.array([rng.uniform(*cfg["footprint_x"]), rng.uniform(*cfg["footprint_y"]), 0.0])
    ceiling = rng.uniform(*cfg.get("ceiling", CEILING))
    rects = split_rooms(rng, np.zeros(2), size[:2], cfg["max_rooms"])
    room_lo = np.array([[a[0], a[1], 0.0] for a, _ in rects])
    room_hi = np.array([[h[0], h[1], ceiling] for _, h in rects])
    doors = make_doors(rng, room_lo, room_hi, ceiling)

    mats = Materials(photo_share)
    room_mat = np.array([[mats.add(rng, _WALL_TEX, pale=True), mats.add(rng, _FLOOR_TEX, False),
                          mats.add(rng, _CEIL_TEX, pale=True)] for _ in rects])
    out: dict[str, list] = {k: [] for k in (
        "group_lo", "group_hi", "group_room", "group_top", "box_lo", "box_hi", "box_group",
        "box_mat", "sph_center", "sph_radius", "sph_room", "sph_mat", "poster_room",
        "poster_axis", "poster_side", "poster_u", "poster_z", "poster_image")}
    for r in range(len(rects)):
        place_furniture(rng, r, room_lo[r], room_hi[r], doors,
                        int(rng.integers(cfg["furniture"][0], cfg["furniture"][1] + 1)),
                        mats, out, cfg.get("furniture_scale", 1.0))
        place_posters(rng, r, room_lo[r], room_hi[r], doors, int(rng.integers(1, 4)), out)
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
    place_small_objects(srng, tops, mats, out, int(srng.integers(2, 3 * len(rects) + 3)))

    outdoor = bool(cfg.get("outdoor", False))
    if outdoor:  # the sky: a pale, nearly uniform blue (no rng draw: seasons stay aligned)
        for r in range(len(rects)):
            mats.tex[room_mat[r, 2]] = TEXTURE_NAMES.index("plaster0")
            mats.tint[room_mat[r, 2]] = _SKY_TINT
    sun_dir, sun_rgb, sky_rgb = np.array([0.0, 0.0, 1.0]), np.zeros(3), np.zeros(3)
    if random_light or outdoor:
        light = random_lighting(seed, season, len(rects), outdoor)
        sun_dir, sun_rgb = light.sun_dir, light.sun_rgb
        if outdoor:
            sky_rgb = light.sky_rgb
        ambient = ambient * light.ambient_gain
        light_rgb = light_rgb * light.lamp_gain[:, None]
    mat_tex, mat_tint, mat_scale = mats.arrays()
    mat_scale = mat_scale * cfg.get("texture_scale", 1.0)

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
        sun_dir=sun_dir, sun_rgb=sun_rgb, sky_rgb=sky_rgb,
    )
