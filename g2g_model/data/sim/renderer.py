"""CPU ray caster for :class:`~g2g_model.data.sim.scene.Scene`: RGB + metric depth.

Why analytic ray casting in numpy (and not a mesh ray tracer such as trimesh + embreex): every
surface of the procedural world is an axis-aligned box face or a sphere, so a ray's first hit has
a closed form, and the rooms form a cell-and-portal structure. A ray starts in the room holding
the camera; it can only hit that room's six faces, its furniture and its spheres, and it leaves
the room only through a door opening, where it continues in the neighbouring room. Per ray the
work is therefore one box exit test plus slab tests against the boxes of the furniture pieces
whose projected screen rectangle contains the ray's pixel (a per-camera cull computed from the 8
corners of each piece's bounding box), with no acceleration structure to build and no
triangulation, texture-coordinate or mesh bookkeeping.
The hit's face, material and metric surface coordinates come out of the same computation, which
makes texture lookup a single gather. It needs nothing beyond numpy, is bit-for-bit deterministic
and measured well above the 50 camera-frames/s target (benchmarks/RESULTS_sim.md).

Conventions: cameras are pinhole, OpenCV axes, pixel centres at integer coordinates; ray
directions are ``R @ K^-1 [u, v, 1]`` (camera z component 1), so the ray parameter of a hit *is*
its depth along the optical axis. Shading: texture (or poster photograph) x material tint x
(ambient + a per-room point lamp with Lambert falloff + an optional directional sun), no shadows;
outdoors the ceiling is a self-lit sky; an optional per-camera exposure (gain, gamma).
"""

from __future__ import annotations

import numpy as np

from g2g_model.data.sim.exposure import apply_exposure
from g2g_model.data.sim.intersect import ray_box_entry, ray_sphere_hit
from g2g_model.data.sim.scene import Scene
from g2g_model.data.sim.textures import MIP_LEVELS, POSTER_SIZE, TEX_SIZE, poster_library
from g2g_model.data.sim.textures import BASE_TEXTURE_NAMES, texture_library

MAX_PORTAL_HOPS = 16  # doors a ray may pass; rays still travelling after that get depth 0

# Hit kinds
_ROOM, _BOX, _SPHERE, _NONE = 0, 1, 2, 3


class Renderer:
    """Render a fixed scene from arbitrary pinhole cameras.

    Args:
        scene: the scene (appearance variant included).
    """

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        f32 = np.float32
        self.room_lo = scene.room_lo.astype(f32)
        self.room_hi = scene.room_hi.astype(f32)
        self.box_lo = scene.box_lo.astype(f32)
        self.box_hi = scene.box_hi.astype(f32)
        self.sph_c = scene.sph_center.astype(f32)
        self.sph_r = scene.sph_radius.astype(f32)
        nroom = scene.num_rooms
        self.room_groups = [np.flatnonzero(scene.group_room == r) for r in range(nroom)]
        self.group_boxes = [np.flatnonzero(scene.box_group == g)
                            for g in range(len(scene.group_lo))]
        self.room_spheres = [np.flatnonzero(scene.sph_room == r) for r in range(nroom)]
        # Portals per room: (axis, side, span_lo, span_hi, top, neighbour)
        self.room_doors: list[list[tuple]] = [[] for _ in range(nroom)]
        for d in scene.doors:
            self.room_doors[d.room_lo].append((d.axis, 1, *d.span, d.height, d.room_hi))
            self.room_doors[d.room_hi].append((d.axis, 0, *d.span, d.height, d.room_lo))
        # Material of every hit primitive in one table: room faces (3 per room: walls, floor,
        # ceiling), then boxes, then spheres.
        self._nroom, self._nbox = nroom, len(scene.box_lo)
        self._prim_mat = np.concatenate([scene.room_mat.ravel(), scene.box_mat,
                                         scene.sph_mat]).astype(np.int64)
        self._mat_base = (scene.mat_tex * MIP_LEVELS * TEX_SIZE * TEX_SIZE).astype(np.int64)
        self._mat_inv_scale = (1.0 / scene.mat_scale).astype(f32)
        self._mat_tint = [np.ascontiguousarray(scene.mat_tint[:, c], dtype=f32) for c in range(3)]
        # Textures packed as RGBA8 in one uint32 per texel: one gather per pixel, not three.
        photos = bool(np.any(scene.mat_tex >= len(BASE_TEXTURE_NAMES)))
        tex8 = np.round(texture_library(photos) * 255.0).astype(np.uint8)
        tex8 = np.concatenate([tex8, np.zeros(tex8.shape[:-1] + (1,), np.uint8)], axis=-1)
        self._tex32 = np.ascontiguousarray(tex8).view(np.uint32).reshape(-1)
        self.posters, _ = poster_library()
        self._light_pos = [scene.light_pos[:, a].astype(f32) for a in range(3)]
        self._light_rgb = [scene.light_rgb[:, c].astype(f32) for c in range(3)]
        self._ambient = scene.ambient.astype(f32)
        sun_dir = np.asarray(scene.sun_dir, np.float64)
        self._sun_dir = (sun_dir / max(np.linalg.norm(sun_dir), 1e-12)).astype(f32)
        self._sun_rgb = np.asarray(scene.sun_rgb).astype(f32)
        self._sky_rgb = np.asarray(scene.sky_rgb).astype(f32)

    # ------------------------------------------------------------------ culling

    @staticmethod
    def _screen_rects(pose: np.ndarray, K: np.ndarray, width: int, height: int,
                      lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Pixel rectangles ``[B,4]`` (u0, u1, v0, v1; half-open) covering boxes ``lo/hi [B,3]``.

        A box reaching behind the camera plane gets the whole image (conservative); a box
        entirely behind the camera or off-screen gets an empty rectangle.
        """
        if not len(lo):
            return np.zeros((0, 4), np.int64)
        corners = np.stack([np.stack([np.where(c & 1, hi[:, 0], lo[:, 0]),
                                      np.where(c & 2, hi[:, 1], lo[:, 1]),
                                      np.where(c & 4, hi[:, 2], lo[:, 2])], -1)
                            for c in range(8)], 1)          # [B,8,3]
        cam = (corners - pose[:3, 3]) @ pose[:3, :3]          # world -> camera
        z = cam[..., 2]
        zs = np.maximum(z, 1e-6)
        u = K[0, 0] * cam[..., 0] / zs + K[0, 2]
        v = K[1, 1] * cam[..., 1] / zs + K[1, 2]
        rect = np.stack([np.floor(u.min(1)) - 1, np.ceil(u.max(1)) + 2,
                         np.floor(v.min(1)) - 1, np.ceil(v.max(1)) + 2], -1)
        rect = np.clip(rect, 0, [width, width, height, height]).astype(np.int64)
        straddle = (z <= 1e-3).any(1) & (z > 1e-3).any(1)
        rect[straddle] = [0, width, 0, height]
        behind = (z <= 1e-3).all(1)
        rect[behind] = 0
        return rect

    # ------------------------------------------------------------------ tracing

    def trace(self, origin: np.ndarray, dirs: np.ndarray, room: int,
              group_rects: np.ndarray, sphere_rects: np.ndarray, width: int) -> dict:
        """First hits of the rays of one camera.

        Args:
            origin: ``[3]`` camera centre (inside ``room``).
            dirs: ``[N,3]`` ray directions in pixel order (``N = H * width``).
            group_rects, sphere_rects: screen rectangles from :meth:`_screen_rects`.

        Returns a dict of ``[N]`` arrays: ``t`` (ray parameter, inf when lost), ``kind``
        (room face / box / sphere / none), ``prim`` (room, box or sphere index), ``axis`` and
        ``side`` of the hit face (room faces and boxes), ``room`` (room of the hit).
        """
        n = len(dirs)
        d = dirs.astype(np.float32, copy=True)
        d[np.abs(d) < 1e-9] = 1e-9
        # Structure of arrays: 1-D per-axis arrays keep every numpy op a fast contiguous loop.
        dc = [np.ascontiguousarray(d[:, a]) for a in range(3)]
        inv = [np.float32(1.0) / x for x in dc]
        o = np.asarray(origin, dtype=np.float32)
        res = {
            "t": np.full(n, np.inf, np.float32), "kind": np.full(n, _NONE, np.int8),
            "prim": np.zeros(n, np.int64), "axis": np.zeros(n, np.int8),
            "side": np.zeros(n, np.int8), "room": np.zeros(n, np.int64),
        }
        ctx = (o, group_rects, sphere_rects, width, res)
        active = np.arange(n)
        cur = np.full(n, int(room), np.int64)
        for hop in range(MAX_PORTAL_HOPS):
            if not len(active):
                break
            next_active = []
            act_rooms = cur[active]
            for r in (np.unique(act_rooms) if hop else [room]):
                idx = active if hop == 0 else active[act_rooms == r]
                sub_d = [x[idx] for x in dc] if hop else dc
                sub_i = [x[idx] for x in inv] if hop else inv
                next_active.append(self._trace_room(int(r), idx, hop == 0, sub_d, sub_i, cur, ctx))
            active = np.concatenate(next_active) if next_active else np.zeros(0, np.int64)
        return res

    def _trace_room(self, r: int, idx: np.ndarray, all_rays: bool, d: list, inv: list,
                    cur: np.ndarray, ctx: tuple) -> np.ndarray:
        """Trace rays ``idx`` inside room ``r``; fill the result; return rays leaving ``r``."""
        o, group_rects, sphere_rects, width, res = ctx
        m = len(idx)
        # Exit through the room's far faces.
        tf = [np.where(d[a] > 0, self.room_hi[r, a] - o[a], self.room_lo[r, a] - o[a]) * inv[a]
              for a in range(3)]
        t = np.minimum(np.minimum(tf[0], tf[1]), tf[2])
        axis = np.where(t == tf[0], 0, np.where(t == tf[1], 1, 2)).astype(np.int8)
        side = np.where(axis == 0, d[0] > 0, np.where(axis == 1, d[1] > 0, d[2] > 0))
        side = side.astype(np.int8)
        kind = np.full(m, _ROOM, np.int8)
        prim = np.full(m, r, np.int64)
        if not all_rays:
            pu, pv = idx % width, idx // width

        def candidates(rect: np.ndarray) -> np.ndarray:
            u0, u1, v0, v1 = rect
            if u1 <= u0 or v1 <= v0:
                return np.zeros(0, np.int64)
            if all_rays:
                return (np.arange(v0, v1)[:, None] * width + np.arange(u0, u1)).ravel()
            return np.flatnonzero((pu >= u0) & (pu < u1) & (pv >= v0) & (pv < v1))

        # Furniture: only the rays inside each group's screen rectangle are tested.
        for g in self.room_groups[r]:
            sel = candidates(group_rects[g])
            if not len(sel):
                continue
            sub_inv = [x[sel] for x in inv]
            boxes = self.group_boxes[g]
            t_box = ray_box_entry(o, sub_inv, self.box_lo[boxes], self.box_hi[boxes])
            if len(boxes) > 1:
                best = t_box.argmin(0)
                tb = t_box.min(0)
            else:
                best = np.zeros(len(sel), np.int64)
                tb = t_box[0]
            better = tb < t[sel]
            if not better.any():
                continue
            s = sel[better]
            b = boxes[best[better]]
            t[s] = tb[better]
            kind[s] = _BOX
            prim[s] = b
            # Entry face: the axis whose near-plane parameter is the largest.
            near = [np.where(d[a][s] > 0, self.box_lo[b, a] - o[a],
                             self.box_hi[b, a] - o[a]) * inv[a][s] for a in range(3)]
            ax_b = np.where(near[0] >= np.maximum(near[1], near[2]), 0,
                            np.where(near[1] >= near[2], 1, 2))
            axis[s] = ax_b
            side[s] = np.choose(ax_b, [d[0][s], d[1][s], d[2][s]]) < 0  # hi face entered
        for s_i in self.room_spheres[r]:
            sel = candidates(sphere_rects[s_i])
            if not len(sel):
                continue
            ts = ray_sphere_hit(o, [x[sel] for x in d], self.sph_c[s_i], self.sph_r[s_i])
            better = ts < t[sel]
            s = sel[better]
            t[s] = ts[better]
            kind[s] = _SPHERE
            prim[s] = s_i
        # Portals: rays leaving through a door opening continue in the neighbour room.
        cont_mask = np.zeros(m, bool)
        for axis_d, side_d, u0, u1, top, nb in self.room_doors[r]:
            cand = np.flatnonzero((kind == _ROOM) & (axis == axis_d) & (side == side_d))
            if not len(cand):
                continue
            o_ax = 1 - axis_d
            u = o[o_ax] + t[cand] * d[o_ax][cand]
            z = o[2] + t[cand] * d[2][cand]
            through = (u > u0) & (u < u1) & (z < top)
            hit = cand[through]
            cont_mask[hit] = True
            cur[idx[hit]] = nb
        if cont_mask.any():
            done = ~cont_mask
            gi = idx[done]
            t, kind, prim, axis, side = t[done], kind[done], prim[done], axis[done], side[done]
        else:
            gi = idx if not all_rays else slice(None)
        res["t"][gi] = t
        res["kind"][gi] = kind
        res["prim"][gi] = prim
        res["axis"][gi] = axis
        res["side"][gi] = side
        res["room"][gi] = r
        return idx[cont_mask]

    # ------------------------------------------------------------------ shading

    def shade(self, origin: np.ndarray, dirs: np.ndarray, hits: dict,
              focal: float) -> np.ndarray:
        """RGB float ``[N,3]`` in [0,1] for traced rays (``focal`` in pixels sets mip levels)."""
        sc = self.scene
        t = hits["t"]
        kind = hits["kind"]
        valid = np.isfinite(t)
        all_valid = bool(valid.all())
        tt = t if all_valid else np.where(valid, t, np.float32(0.0))
        p = [np.float32(origin[a]) + tt * dirs[:, a] for a in range(3)]
        axis = hits["axis"]
        side = hits["side"]
        prim = hits["prim"]
        is_room = kind == _ROOM
        # Room faces face into the room (hi face -> -axis); box faces face out (hi face -> +axis).
        sign = np.where(is_room == (side == 1), np.float32(-1.0), np.float32(1.0))
        normal = [np.where(axis == a, sign, np.float32(0.0)) for a in range(3)]
        # Surface coordinates (metres): the two world axes spanning the face.
        u = np.where(axis == 0, p[1], p[0])
        v = np.where(axis == 2, p[1], p[2])
        slot = np.where(axis == 2, side.astype(np.int64) + 1, 0)
        key = np.where(is_room, prim * 3 + slot,
                       np.where(kind == _BOX, 3 * self._nroom + prim,
                                3 * self._nroom + self._nbox + prim))
        is_sph = kind == _SPHERE
        if is_sph.any():
            c = self.sph_c[prim[is_sph]]
            r = self.sph_r[prim[is_sph]]
            nn = [(p[a][is_sph] - c[:, a]) / r for a in range(3)]
            for a in range(3):
                normal[a][is_sph] = nn[a]
            u[is_sph] = np.arctan2(nn[1], nn[0]) * r
            v[is_sph] = p[2][is_sph]
        mat = self._prim_mat[np.minimum(key, len(self._prim_mat) - 1)]
        # Texture lookup with a mip level from the pixel footprint (t / focal metres).
        inv_scale = self._mat_inv_scale[mat]
        texel = tt * np.float32(1.0 / focal)
        foot = texel * inv_scale * TEX_SIZE
        level = (foot > 1.0).astype(np.int64) + (foot > 2.0)
        iu = np.floor(u * inv_scale * TEX_SIZE).astype(np.int64) & (TEX_SIZE - 1)
        iv = np.floor(v * inv_scale * -TEX_SIZE).astype(np.int64) & (TEX_SIZE - 1)
        flat = self._mat_base[mat] + ((level * TEX_SIZE + iv) * TEX_SIZE + iu)
        texels = self._tex32[flat].view(np.uint8).reshape(-1, 4)
        rgb = [texels[:, c] * (self._mat_tint[c][mat] * np.float32(1.0 / 255.0))
               for c in range(3)]
        # Posters on room walls.
        walls = np.flatnonzero(is_room & (axis < 2))
        w_prim, w_axis, w_side = prim[walls], axis[walls], side[walls]
        for k in range(len(sc.poster_room)):
            ax_k = int(sc.poster_axis[k])
            sel = walls[(w_prim == sc.poster_room[k]) & (w_axis == ax_k)
                        & (w_side == sc.poster_side[k])]
            if not len(sel):
                continue
            pu, pz = p[1 - ax_k][sel], p[2][sel]
            (u0, u1), (z0, z1) = sc.poster_u[k], sc.poster_z[k]
            inside = (pu >= u0) & (pu < u1) & (pz >= z0) & (pz < z1)
            sel = sel[inside]
            if not len(sel):
                continue
            # Seen from inside the room the wall's u axis may point left: mirror so the photo
            # reads correctly.
            frac_u = (pu[inside] - u0) / (u1 - u0)
            if (ax_k == 0) == (sc.poster_side[k] == 1):
                frac_u = 1.0 - frac_u
            frac_v = (z1 - pz[inside]) / (z1 - z0)
            pi = np.clip((frac_u * POSTER_SIZE).astype(np.int64), 0, POSTER_SIZE - 1)
            pj = np.clip((frac_v * POSTER_SIZE).astype(np.int64), 0, POSTER_SIZE - 1)
            foot_p = texel[sel] * POSTER_SIZE / np.float32(z1 - z0)
            plev = np.clip((foot_p > 1.0).astype(np.int64) + (foot_p > 2.0), 0, MIP_LEVELS - 1)
            photo = self.posters[sc.poster_image[k], plev, pj, pi]
            for c in range(3):
                rgb[c][sel] = photo[:, c]
        # Lighting: ambient + lamp of the room the surface is in (Lambert, soft falloff).
        room = hits["room"]
        one_room = bool((room == room[0]).all())
        to_l = [(self._light_pos[a][room[0]] if one_room else self._light_pos[a][room]) - p[a]
                for a in range(3)]
        dist2 = to_l[0] * to_l[0] + to_l[1] * to_l[1] + to_l[2] * to_l[2]
        ndl = normal[0] * to_l[0] + normal[1] * to_l[1] + normal[2] * to_l[2]
        lam = np.maximum(ndl, 0.0) / (np.sqrt(dist2) * (1.0 + 0.08 * dist2) + 1e-6) * 1.1
        sun = None
        if self._sun_rgb.any():  # directional light (scenes built with random lighting)
            sun = np.maximum(sum(normal[a] * self._sun_dir[a] for a in range(3)), 0.0)
        out = np.empty((len(t), 3), np.float32)
        for c in range(3):
            lamp = self._light_rgb[c][room[0]] if one_room else self._light_rgb[c][room]
            if sun is None:
                out[:, c] = rgb[c] * (self._ambient[c] + lamp * lam)
            else:
                out[:, c] = rgb[c] * (self._ambient[c] + lamp * lam + self._sun_rgb[c] * sun)
        if self._sky_rgb.any():  # outdoor scenes: the ceiling is a sky that shines by itself
            sky = np.flatnonzero(is_room & (axis == 2) & (side == 1))
            for c in range(3):
                out[sky, c] = rgb[c][sky] * self._sky_rgb[c]
        np.clip(out, 0.0, 1.0, out=out)
        if not all_valid:
            out[~valid] = 0.0
        return out

    # ------------------------------------------------------------------ cameras

    def render(self, world_T_cam: np.ndarray, K: np.ndarray, width: int, height: int,
               exposure: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Render cameras ``world_T_cam [N,4,4]`` with ``K [N,3,3]`` (or one ``[3,3]``).

        ``exposure``: optional ``[N,2]`` (gain, gamma) per camera, applied to the linear
        colour before quantisation (:func:`~g2g_model.data.sim.exposure.apply_exposure`).
        Returns ``rgb [N,H,W,3]`` uint8 and metric z-depth ``[N,H,W]`` float32 (0 = no hit).
        """
        world_T_cam = np.asarray(world_T_cam, dtype=np.float64)
        if world_T_cam.ndim == 2:
            world_T_cam = world_T_cam[None]
        K = np.broadcast_to(np.asarray(K, dtype=np.float64), (len(world_T_cam), 3, 3))
        centers = world_T_cam[:, :3, 3]
        rooms = self.scene.room_of(centers)
        if np.any(rooms < 0):
            bad = int(np.flatnonzero(rooms < 0)[0])
            raise ValueError(f"camera {bad} at {centers[bad].tolist()} is outside every room")
        vv, uu = np.mgrid[0:height, 0:width].astype(np.float64)
        pix = np.stack([uu.ravel(), vv.ravel(), np.ones(uu.size)], axis=0)  # [3,HW]
        rgb = np.zeros((len(world_T_cam), height, width, 3), np.uint8)
        depth = np.zeros((len(world_T_cam), height, width), np.float32)
        sc = self.scene
        sph_lo = sc.sph_center - sc.sph_radius[:, None]
        sph_hi = sc.sph_center + sc.sph_radius[:, None]
        for i, (pose, k) in enumerate(zip(world_T_cam, K)):
            rays_cam = np.linalg.inv(k) @ pix             # z component is 1
            dirs = (pose[:3, :3] @ rays_cam).T.astype(np.float32)
            g_rects = self._screen_rects(pose, k, width, height, sc.group_lo, sc.group_hi)
            s_rects = self._screen_rects(pose, k, width, height, sph_lo, sph_hi)
            hits = self.trace(pose[:3, 3], dirs, int(rooms[i]), g_rects, s_rects, width)
            col = self.shade(pose[:3, 3], dirs, hits, float(k[0, 0]))
            if exposure is not None:
                col = apply_exposure(col, *exposure[i])
            rgb[i] = (col * 255.0 + 0.5).astype(np.uint8).reshape(height, width, 3)
            t = hits["t"]
            depth[i] = np.where(np.isfinite(t), t, 0.0).reshape(height, width)
        return rgb, depth


def _mip_level(footprint_texels: np.ndarray) -> np.ndarray:
    """Mip level ``[n]`` for a pixel covering ``footprint_texels`` texels."""
    lev = np.floor(np.log2(np.maximum(footprint_texels, 1e-6)) + 1.0)
    return np.clip(lev, 0, MIP_LEVELS - 1).astype(np.int64)
