"""Collision-free traversals of a scene with walking-robot motion statistics.

A scene gets a fixed set of *places* (a few free points per room). Traversal k visits them in an
order of its own (traversal 1 runs traversal 0's order backwards, later ones draw new orders), so
traversals revisit the same places from different directions. Between places the path is the
shortest grid path that keeps away from obstacles (Dijkstra on the clearance-weighted occupancy
grid), smoothed and checked against the robot radius. Along it the body moves 0.1-0.3 m per
frame at 10 Hz with a smoothly varying speed, a heading that follows the path with a bounded turn
rate, a body height drawn per scene in 0.5-1.5 m, a small vertical bob and small roll / pitch.
``MOTION_PRESETS`` adds faster motion: ``speed_profile="stop_go"`` makes every traversal's speed
span its whole ``step_m`` range, standing still included (a smooth random profile, clipped at
both ends); ``car`` is a vehicle (``MotionConfig.vehicle``: it heads where it goes, brakes for
bends, accelerates like a car) that wants up to 3 m per frame with turns of up to 30 deg.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from g2g_model.data.sim.occupancy import Occupancy, build_occupancy
from g2g_model.data.sim.scene import Scene
from g2g_model.geometry import make_pose

START_NS = 1_600_000_000 * 10**9


@dataclass
class MotionConfig:
    """Motion statistics of the simulated robot (defaults: a walking robot at 10 Hz)."""

    rate_hz: float = 10.0
    step_m: tuple[float, float] = (0.1, 0.3)
    radius_m: float = 0.3
    height_m: tuple[float, float] = (0.5, 1.5)
    max_turn_deg: float = 20.0      # per frame
    places_per_room: int = 2
    speed_profile: str = "steady"   # "steady": about one speed; "stop_go": 0 to top speed
    bob_m: float = 0.01             # vertical bob amplitude (one per step)
    tilt_deg: float = 1.5           # roll / pitch noise (sigma before smoothing)
    # A vehicle: it heads where it goes (no sideways slip), slows down for bends so that its
    # heading turns at most max_turn_deg per frame, and changes its step by at most accel_m
    # per frame (0.1 m per frame per frame: 10 m/s^2 at 10 Hz).
    vehicle: bool = False
    accel_m: float = 0.1

    def __post_init__(self) -> None:
        if self.speed_profile not in ("steady", "stop_go"):
            raise ValueError(f"speed_profile must be 'steady' or 'stop_go', "
                             f"got {self.speed_profile!r}")
        if not 0.0 <= self.step_m[0] <= self.step_m[1]:
            raise ValueError(f"step_m must be 0 <= min <= max, got {self.step_m}")
        if not self.accel_m > 0:
            raise ValueError(f"accel_m must be > 0, got {self.accel_m}")


MOTION_PRESETS: dict[str, MotionConfig] = {
    "walk": MotionConfig(),
    # Indoors, from standing still to 1 m per frame (a running robot), any room layout, no bob
    # (a standstill stands still).
    "stop_go": MotionConfig(step_m=(0.0, 1.0), max_turn_deg=30.0, speed_profile="stop_go",
                            bob_m=0.0),
    # A car: a vehicle wanting standing still to 3 m per frame (30 m/s at 10 Hz), turns up to
    # 30 deg per frame, 2.5 m of clearance (the car rigs' cameras sit up to 2.4 m from the body
    # origin, and a car turns in place at a dead end), cameras 1.2-2 m high, no bob (hall,
    # street, courtyard).
    "car": MotionConfig(step_m=(0.0, 3.0), radius_m=2.5, height_m=(1.2, 2.0), max_turn_deg=30.0,
                        places_per_room=6, speed_profile="stop_go", bob_m=0.0, tilt_deg=0.5,
                        vehicle=True),
}


@dataclass
class Traversal:
    """``timestamps_ns [T]`` int64 and ``world_T_body [T,4,4]``."""

    timestamps_ns: np.ndarray
    world_T_body: np.ndarray


def _grid_graph(occ: Occupancy, radius: float) -> tuple[csr_matrix, np.ndarray]:
    free = occ.clearance >= radius
    h, w = free.shape
    ids = -np.ones((h, w), np.int64)
    ids[free] = np.arange(int(free.sum()))
    rows, cols, vals = [], [], []
    # Cost grows near obstacles so that paths keep to the middle of rooms and doors.
    cost = 1.0 + 3.0 * np.exp(-(occ.clearance - radius) / 0.2)
    for di, dj in ((0, 1), (1, 0), (1, 1), (1, -1)):
        a = ids[max(0, -di):h - max(0, di), max(0, -dj):w - max(0, dj)]
        b = ids[max(0, di):h - max(0, -di) or None, max(0, dj):w - max(0, -dj) or None]
        ca = cost[max(0, -di):h - max(0, di), max(0, -dj):w - max(0, dj)]
        cb = cost[max(0, di):h - max(0, -di) or None, max(0, dj):w - max(0, -dj) or None]
        ok = (a >= 0) & (b >= 0)
        length = np.hypot(di, dj) * occ.res
        rows.append(a[ok])
        cols.append(b[ok])
        vals.append(length * 0.5 * (ca[ok] + cb[ok]))
    n = int(free.sum())
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    graph = csr_matrix((np.concatenate([v, v]), (np.concatenate([r, c]), np.concatenate([c, r]))),
                       shape=(n, n))
    return graph, ids


def scene_places(scene: Scene, occ: Occupancy, ids: np.ndarray, cfg: MotionConfig,
                 rng: np.random.Generator) -> np.ndarray:
    """Node ids ``[P]`` of free places (a few per room, in the largest connected free region)."""
    free = ids >= 0
    labels, _ = ndimage.label(free)
    main = np.argmax(np.bincount(labels[free]))
    good = (labels == main) & (occ.clearance >= cfg.radius_m + 0.2)
    centres = occ.to_xy(np.argwhere(np.ones_like(good)))
    places = []
    for r_lo, r_hi in zip(scene.room_lo, scene.room_hi):
        in_room = ((centres[:, 0] > r_lo[0]) & (centres[:, 0] < r_hi[0])
                   & (centres[:, 1] > r_lo[1]) & (centres[:, 1] < r_hi[1]))
        in_room = in_room.reshape(good.shape) & good
        cells = np.argwhere(in_room)
        if len(cells):
            pick = rng.choice(len(cells), size=min(cfg.places_per_room, len(cells)), replace=False)
            places.extend(ids[cells[pick, 0], cells[pick, 1]])
    if len(places) < 2:
        raise ValueError(f"scene {scene.seed}: fewer than two reachable places")
    return np.array(places, np.int64)


def _path_xy(pred: np.ndarray, src_row: int, dst: int, xy_of_node: np.ndarray) -> np.ndarray:
    nodes = [dst]
    while pred[src_row, nodes[-1]] >= 0:
        nodes.append(pred[src_row, nodes[-1]])
    return xy_of_node[np.array(nodes[::-1])]


def _smooth_path(xy: np.ndarray, occ: Occupancy, radius: float) -> np.ndarray:
    """Resample at 5 cm and smooth as much as the clearance allows."""
    seg = np.linalg.norm(np.diff(xy, axis=0), axis=1)
    keep = np.concatenate([[True], seg > 1e-9])
    xy = xy[keep]
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))])
    grid = np.arange(0.0, s[-1], 0.05)
    path = np.stack([np.interp(grid, s, xy[:, 0]), np.interp(grid, s, xy[:, 1])], -1)
    for sigma_m in (0.6, 0.4, 0.25, 0.1):
        smooth = ndimage.gaussian_filter1d(path, sigma_m / 0.05, axis=0, mode="nearest")
        if occ.clearance_at(smooth).min() >= radius * 0.9:
            return smooth
    return path


def make_traversals(scene: Scene, num: int, frames: int,
                    cfg: MotionConfig | None = None) -> list[Traversal]:
    """``num`` traversals of ``frames`` frames each through ``scene`` (deterministic)."""
    cfg = cfg or MotionConfig()
    if num < 1 or frames < 2:
        raise ValueError(f"need num >= 1 and frames >= 2, got {num}, {frames}")
    rng = np.random.default_rng([scene.seed, 3])
    occ = build_occupancy(scene)
    graph, ids = _grid_graph(occ, cfg.radius_m)
    places = scene_places(scene, occ, ids, cfg, rng)
    _, pred = dijkstra(graph, directed=False, indices=places, return_predecessors=True)
    xy_of_node = occ.to_xy(np.argwhere(ids >= 0)[np.argsort(ids[ids >= 0])])
    height = rng.uniform(*cfg.height_m)
    orders: list[np.ndarray] = []
    out = []
    for k in range(num):
        trng = np.random.default_rng([scene.seed, 4, k])
        need = frames * cfg.step_m[1] + 5.0
        if k == 1:
            order = orders[0][::-1]
        else:
            order = trng.permutation(len(places))
        seq = list(order)
        while len(seq) < 200 * len(places):  # enough rounds for any length; new order per round
            seq += list(trng.permutation(len(places)))
        pieces, length = [], 0.0
        for a, b in zip(seq[:-1], seq[1:]):
            if length >= need:
                break
            if a == b or pred[a, places[b]] < 0:
                continue
            piece = _path_xy(pred, a, places[b], xy_of_node)
            pieces.append(piece)
            length += float(np.linalg.norm(np.diff(piece, axis=0), axis=1).sum())
        orders.append(order)
        path = _smooth_path(np.concatenate(pieces), occ, cfg.radius_m)
        out.append(_walk(path, frames, height, cfg, trng, k))
    return out


def frames_for_length(scene: Scene, length_m: float, cfg: MotionConfig | None = None,
                      traversal: int = 0) -> int:
    """A frame count whose traversal ``traversal`` of ``scene`` covers at least ``length_m``
    metres of path (a few frames more than the fewest at most): pass it as ``frames`` to
    :func:`make_traversals` / ``SimConfig`` for a traversal of a guaranteed length. A
    traversal's speed profile depends on its frame count, so each guess is measured: the
    first at the fastest step (too few frames), the next ones adding the missing metres at the
    measured mean step."""
    cfg = cfg or MotionConfig()
    if not length_m > 0:
        raise ValueError(f"length_m must be > 0, got {length_m}")
    frames = max(2, int(np.ceil(length_m / cfg.step_m[1])) + 1)
    while True:
        poses = make_traversals(scene, traversal + 1, frames, cfg)[traversal].world_T_body
        length = float(np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=1).sum())
        if length >= length_m:
            return frames
        frames += max(1, int(np.ceil((length_m - length) / (length / (frames - 1)))))


def _walk(path: np.ndarray, frames: int, height: float, cfg: MotionConfig,
          rng: np.random.Generator, index: int) -> Traversal:
    s_path = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))])
    lo, hi = cfg.step_m
    if cfg.speed_profile == "stop_go":
        steps = _stop_go_steps(rng, frames, lo, hi)
    else:
        base = rng.uniform(lo + 0.03, hi - 0.05)
        wiggle = ndimage.gaussian_filter1d(rng.normal(0, 1, frames + 20), 5.0)[10:frames + 10]
        wiggle = wiggle / (np.abs(wiggle).max() + 1e-9)
        steps = np.clip(base * (1.0 + 0.4 * wiggle), lo, hi)
    if cfg.vehicle:
        s = _vehicle_positions(path, s_path, steps, cfg)
    else:
        s = np.concatenate([[0.0], np.cumsum(steps[:-1])])
    s = np.minimum(s, s_path[-1])
    xy = np.stack([np.interp(s, s_path, path[:, 0]), np.interp(s, s_path, path[:, 1])], -1)
    target = _path_heading(path, s_path, s)
    yaw = np.empty(frames)
    yaw[0] = target[0]
    max_turn = np.radians(cfg.max_turn_deg)
    for i in range(1, frames):
        delta = (target[i] - yaw[i - 1] + np.pi) % (2 * np.pi) - np.pi
        yaw[i] = yaw[i - 1] + np.clip(delta, -max_turn, max_turn)
    roll = ndimage.gaussian_filter1d(rng.normal(0, cfg.tilt_deg, frames), 3.0)
    pitch = ndimage.gaussian_filter1d(rng.normal(0, cfg.tilt_deg, frames), 3.0)
    phase = rng.uniform(0, 2 * np.pi)
    z = height + cfg.bob_m * np.sin(np.pi * np.arange(frames) + phase)  # one bob per step
    cy, sy = np.cos(yaw), np.sin(yaw)
    cp, sp = np.cos(np.radians(pitch)), np.sin(np.radians(pitch))
    cr, sr = np.cos(np.radians(roll)), np.sin(np.radians(roll))
    # R = Rz(yaw) Ry(pitch) Rx(roll)
    rot = np.stack([
        cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,
        sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr,
        -sp, cp * sr, cp * cr], -1).reshape(frames, 3, 3)
    poses = make_pose(rot, np.concatenate([xy, z[:, None]], -1))
    period = int(round(1e9 / cfg.rate_hz))
    stamps = START_NS + index * 10**12 + period * np.arange(frames, dtype=np.int64)
    return Traversal(timestamps_ns=stamps, world_T_body=poses)


def _path_heading(path: np.ndarray, s_path: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Heading (rad) of the path at arc lengths ``s``: its direction over +-0.3 m."""
    ahead = np.stack([np.interp(s + 0.3, s_path, path[:, 0]),
                      np.interp(s + 0.3, s_path, path[:, 1])], -1)
    behind = np.stack([np.interp(s - 0.3, s_path, path[:, 0]),
                       np.interp(s - 0.3, s_path, path[:, 1])], -1)
    tangent = ahead - behind
    return np.arctan2(tangent[:, 1], tangent[:, 0])


def _vehicle_positions(path: np.ndarray, s_path: np.ndarray, steps: np.ndarray,
                       cfg: MotionConfig) -> np.ndarray:
    """Arc lengths ``[frames]`` of a vehicle that wants to move ``steps`` per frame: at most
    ``max_turn_deg`` of heading per frame (the speed allowed by the bend ahead, reached with
    ``accel_m`` per frame per frame at most, like a driver braking before a corner), and its
    step changes by at most ``accel_m`` per frame. In a hairpin it creeps (2 cm per frame)."""
    creep = 0.02
    grid = np.arange(0.0, s_path[-1] + 0.05, 0.05)
    heading = np.unwrap(_path_heading(path, s_path, grid))
    bend = np.abs(np.gradient(heading, grid))                       # rad per metre
    bend = ndimage.maximum_filter1d(bend, 7)                        # the whole bend
    limit = np.clip(np.radians(cfg.max_turn_deg) / np.maximum(bend, 1e-9), creep, cfg.step_m[1])
    # Braking before a bend and accelerating after it: v^2 <= v_next^2 + 2 a ds both ways.
    reach = 2 * cfg.accel_m * np.diff(grid)
    for k in range(len(grid) - 2, -1, -1):
        limit[k] = min(limit[k], np.sqrt(limit[k + 1] ** 2 + reach[k]))
    for k in range(1, len(grid)):
        limit[k] = min(limit[k], np.sqrt(limit[k - 1] ** 2 + reach[k - 1]))
    s, prev = np.zeros(len(steps)), 0.0
    for i in range(1, len(steps)):
        wish = float(np.clip(steps[i - 1], prev - cfg.accel_m, prev + cfg.accel_m))
        prev = max(0.0, min(wish, float(np.interp(s[i - 1], grid, limit))))
        s[i] = s[i - 1] + prev
    return s


def _stop_go_steps(rng: np.random.Generator, frames: int, lo: float, hi: float) -> np.ndarray:
    """Per-frame steps ``[frames]`` whose smooth random profile spans ``[lo, hi]``: rescaled to
    [0, 1] and stretched by 1.3 around its middle before clipping, so every traversal stands
    (``lo``) and runs at top speed (``hi``) for stretches of a few frames."""
    g = ndimage.gaussian_filter1d(rng.normal(0, 1, frames + 40), 6.0)[20:frames + 20]
    g = (g - g.min()) / max(float(g.max() - g.min()), 1e-9)
    return lo + (hi - lo) * np.clip(1.3 * g - 0.15, 0.0, 1.0)
