"""Header fuzz: a map built as the demo builds its map (every camera of a simulated traversal,
encoded by the default model), its header mutated in hundreds of seeded ways (keys removed or
renamed, wrong types, NaN / Inf / huge values, truncated lists, non-rigid poses, bad K). Every
mutated file is either refused with a MapError that names the reason or, for the edits that
keep the header valid, loads with the edit in it; nothing else ever escapes the loader.

Each mutation is written twice: re-sealed (a valid checksum over the mutated header: the
schema must catch it) and with its original, now stale, checksum (the checksum must)."""

import collections
import copy
import math
import re

import numpy as np
import pytest

from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.maps.building import build_map_from_trajectory
from g2g_model.maps.format import MapError, load_map, read_map_header, save_map
from sim_fixtures import tiny_trajectories
from test_map_files import rewrite_map_header

SEED = 40
PER_KIND = 36
# Reasons a refusal may give; the loader's catch-all ("could not be loaded") is not one.
REASONS = re.compile(r"invalid header: .+|header checksum mismatch|image index does not match|"
                     r"format version")
WRONG_TYPES = [None, True, "x", 7, 2.5, [], {}, [[0]]]
HUGE = [math.nan, math.inf, -math.inf, 1e300, -1e300, 10**400, -10**400]


@pytest.fixture(scope="module")
def demo_map(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz")
    traj = tiny_trajectories(out, seed=20002, frames=4)[0]
    gmap = build_map_from_trajectory(traj, G2GPipeline.default("relocalization"), None,
                                     min_translation_m=0.1, min_rotation_deg=5.0,
                                     progress=False)
    return save_map(gmap, out / "demo.g2gmap")


def _nodes(node, path=()):
    """(path, value) of every node below ``node`` except the free-form rig and backbone."""
    yield path, node
    if path in (("rig",), ("backbone",)):
        return
    children = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from _nodes(child, path + (key,))


def _at(header, path):
    for key in path[:-1]:
        header = header[key]
    return header, path[-1]


def _same_kind(a, b) -> bool:
    number = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (isinstance(a, number) and isinstance(b, number)) or type(a) is type(b)


def _invalid_mutations(header, rng):
    """``(name, edit)`` of mutations that make the header invalid (the load must refuse)."""
    nodes = [(p, v) for p, v in _nodes(header) if p]
    keyed = [p for p, _ in nodes if isinstance(_at(header, p)[0], dict)]
    numbers = [p for p, v in nodes if isinstance(v, (int, float)) and not isinstance(v, bool)]
    lists = [p for p, v in nodes if isinstance(v, list) and v]
    n_frames = len(header["frames"])
    out = []

    def pick(seq):
        return seq[rng.integers(len(seq))]

    for _ in range(PER_KIND):
        path = pick(keyed)
        out.append((f"remove {path}", lambda h, p=path: _at(h, p)[0].pop(p[-1])))
        path = pick(keyed)

        def rename(h, p=path):
            parent, key = _at(h, p)
            parent[key + "_renamed"] = parent.pop(key)
        out.append((f"rename {path}", rename))

        path, value = pick(nodes)
        wrong = [w for w in WRONG_TYPES if not _same_kind(w, value)]
        bad = copy.deepcopy(pick(wrong))
        out.append((f"type {path} = {bad!r}",
                    lambda h, p=path, b=bad: _at(h, p)[0].__setitem__(p[-1], b)))

        path, bad = pick(numbers), pick(HUGE)
        out.append((f"value {path} = {bad!r:.20}",
                    lambda h, p=path, b=bad: _at(h, p)[0].__setitem__(p[-1], b)))

        path = pick(lists)
        keep = int(rng.integers(len(_at(header, path)[0][path[-1]])))
        out.append((f"truncate {path} to {keep}",
                    lambda h, p=path, k=keep: _at(h, p)[0].__setitem__(p[-1],
                                                                       _at(h, p)[0][p[-1]][:k])))
        frame = int(rng.integers(n_frames))
        out.append(_bad_pose(frame, int(rng.integers(5)), float(rng.uniform(0.01, 0.5))))
        out.append(_bad_k(frame, int(rng.integers(8))))
    out.append(("frames truncated", lambda h: h["frames"].pop()))  # the image index tells
    return out


def _bad_pose(i, how, eps):
    def edit(h):
        T = np.array(h["frames"][i]["world_T_cam"])
        if how == 0:
            T[:3, :3] *= 1 + eps                # scaled
        elif how == 1:
            T[:3, 0] *= -1                      # mirrored: det -1
        elif how == 2:
            T[0, 1] += eps                      # sheared
        elif how == 3:
            T[3, 2] = eps                       # projective last row
        else:
            T[:3, 3] = [2e6 * (1 + eps), 0, 0]  # beyond any site
        h["frames"][i]["world_T_cam"] = T.tolist()
    return f"pose {i} non-rigid ({how}, {eps:.3f})", edit


def _bad_k(i, how):
    def edit(h):
        K = np.array(h["frames"][i]["K"])
        height, width = h["frames"][i]["size_hw"]
        K[[(0, 0), (0, 0), (1, 1), (0, 2), (0, 2), (1, 2), (0, 1), (2, 2)][how]] = \
            [0.0, -K[0, 0], 0.0, -10.0, width + 10.0, 3.0 * height, 5.0, 2.0][how]
        h["frames"][i]["K"] = K.tolist()
    return f"K {i} bad ({how})", edit


def _valid_edits(header, rng):
    """``(name, edit, check)``: edits that keep the header valid, and how the map shows them."""
    out = []
    for _ in range(12):
        i = int(rng.integers(len(header["frames"])))
        shift = rng.uniform(-1.0, 1.0, 3)
        angle = float(rng.uniform(-1.0, 1.0))
        c, s = math.cos(angle), math.sin(angle)
        turn = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])

        def move(h, i=i, shift=shift, turn=turn):
            T = np.array(h["frames"][i]["world_T_cam"])
            T[:3, :3] = T[:3, :3] @ turn
            T[:3, 3] += shift
            h["frames"][i]["world_T_cam"] = T.tolist()

        def moved(gmap, h, i=i):
            np.testing.assert_array_equal(gmap.frames[i].world_T_cam,
                                          h["frames"][i]["world_T_cam"])
        out.append((f"move pose {i}", move, moved))

        def focal(h, i=i, f=float(rng.uniform(0.9, 1.1))):
            h["frames"][i]["K"][0][0] *= f
            h["frames"][i]["K"][1][1] *= f

        def focal_seen(gmap, h, i=i):
            assert gmap.frames[i].intrinsics[0, 0] == h["frames"][i]["K"][0][0]
        out.append((f"focal {i}", focal, focal_seen))
    out += [
        ("map_id", lambda h: h.__setitem__("map_id", "office-2"),
         lambda g, h: g.map_id == "office-2" or pytest.fail("map_id")),
        ("rig free-form", lambda h: h["rig"].__setitem__("note", [1, {"a": None}]),
         lambda g, h: g.rig["note"] == [1, {"a": None}] or pytest.fail("rig")),
        ("keys reordered", _reorder, lambda g, h: None),
        ("stamp later", lambda h: h["frames"][0].__setitem__("stamp_ns",
                                                             h["frames"][0]["stamp_ns"] + 1),
         lambda g, h: g.frames[0].stamp_ns == h["frames"][0]["stamp_ns"] or pytest.fail("t")),
    ]
    return out


def _reorder(header):
    items = list(header.items())
    header.clear()
    header.update(reversed(items))


def _outcome(path, read):
    """``"loaded"`` or ``"refused: <reason>"``; any other exception propagates (a crash)."""
    try:
        read(path)
    except MapError as exc:
        assert REASONS.search(str(exc)), f"refused without a known reason: {exc}"
        return f"refused: {REASONS.search(str(exc)).group(0).split(':')[0]}"
    return "loaded"


def test_mutated_headers_are_refused_with_a_reason_or_load_only_when_valid(demo_map, tmp_path):
    rng = np.random.default_rng(SEED)
    original = read_map_header(demo_map)
    original.pop("header_sha256", None)
    invalid = _invalid_mutations(original, rng)
    valid = _valid_edits(original, rng)
    assert len(invalid) + len(valid) >= 200
    tally = collections.Counter()
    for k, (name, edit) in enumerate(invalid):
        for reseal in (True, False):
            path = rewrite_map_header(demo_map, tmp_path / f"m{k}_{reseal}.g2gmap", edit, reseal)
            full = _outcome(path, load_map)
            assert full.startswith("refused"), (name, reseal, full)
            if not reseal:  # the stale checksum (or, first, a broken version) refuses it
                assert full in ("refused: header checksum mismatch",
                                "refused: format version"), (name, full)
            # The header alone: refused too, or (a truncated frame list) refused at load only.
            header_only = _outcome(path, read_map_header)
            assert header_only.startswith("refused") or "image index" in full, name
            tally[full] += 1
            path.unlink()
    for k, (name, edit, check) in enumerate(valid):
        path = rewrite_map_header(demo_map, tmp_path / f"v{k}.g2gmap", edit, reseal=True)
        gmap = load_map(path)
        header = read_map_header(path)
        check(gmap, header)
        tally["loaded (valid edit)"] += 1
        stale = rewrite_map_header(demo_map, tmp_path / f"s{k}.g2gmap", edit, reseal=False)
        expected = "loaded" if name == "keys reordered" else "refused: header checksum mismatch"
        assert _outcome(stale, load_map) == expected, name
        tally[expected + " (valid edit, stale checksum)"] += 1
    print(f"\n{sum(tally.values())} mutated headers: {dict(tally)}")
    assert sum(tally.values()) >= 400
