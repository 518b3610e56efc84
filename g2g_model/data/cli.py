"""``g2g-data``: convert real datasets, label overlap, mine pairs, summarise.

Subcommands (all resumable: finished outputs are skipped unless ``--overwrite``)::

    g2g-data convert-nclt --root /data/nclt --date 2012-01-08 --out data/nclt/2012-01-08
    g2g-data convert-zjh --root /data/zjh --floor Floor_01 --traj traj_1 --out data/zjh/f01_t1
    g2g-data convert-tum --src /data/rgbd_dataset_freiburg3_x --camera fr3 --out data/tum/fr3_x
    g2g-data overlap data/sim            # per scene: overlap matrices of trajectory pairs
    g2g-data mine data/sim --window 5    # window pairs index (JSON / CSV) + score histogram
    g2g-data rig-pairs data/sim --max-distance 1.0
    g2g-data stats data/sim              # counts + overlap histogram PNG
    g2g-data merge data/a data/b --out data/ab --index rig_odom_pairs.csv   # one training root

Overlap matrices are stored next to the trajectories as
``<scene>/overlap/<traj_a>__<traj_b>__<cam_a>__<cam_b>.npy`` (float16, ``[T_A,T_B]``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

from g2g_model.data.format import TrajectoryReader, find_trajectories
from g2g_model.data.mining import RigPair, WindowPair, mine_windows, rig_pairs, write_index
from g2g_model.data.overlap import DEFAULT_SIZE, DEFAULT_TOLERANCE_M, load_depth_stack
from g2g_model.data.overlap import overlap_matrix
from g2g_model.data.stats import overlap_summary, save_histogram

OVERLAP_DIR = "overlap"


def _groups(root: Path) -> dict[Path, list[Path]]:
    """Trajectories under ``root`` grouped by their parent directory (a scene / a site)."""
    groups: dict[Path, list[Path]] = defaultdict(list)
    for traj in find_trajectories(root):
        groups[traj.parent].append(traj)
    if not groups:
        raise SystemExit(f"no complete trajectory under {root}")
    return groups


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _overlap_name(a: str, b: str, ca: str, cb: str) -> str:
    return f"{a}__{b}__{ca}__{cb}.npy"


def _parse_overlap_name(path: Path) -> tuple[str, str, str, str]:
    parts = path.stem.split("__")
    if len(parts) != 4:
        raise ValueError(f"{path}: not an overlap file name")
    return parts[0], parts[1], parts[2], parts[3]


def cmd_overlap(args: argparse.Namespace) -> dict:
    jobs = []
    for parent, trajs in _groups(args.root).items():
        pairs = list(itertools.combinations(trajs, 2))
        if args.include_self:
            pairs += [(t, t) for t in trajs]
        for ta, tb in pairs:
            jobs.append((parent, ta, tb))
    written, skipped, values = 0, 0, []
    readers: dict[Path, TrajectoryReader] = {}
    depth_cache: dict[tuple[Path, str], np.ndarray] = {}

    def reader(p: Path) -> TrajectoryReader:
        if p not in readers:
            readers[p] = TrajectoryReader(p)
        return readers[p]

    def depth(p: Path, cam: str) -> np.ndarray:
        if (p, cam) not in depth_cache:
            if len(depth_cache) > 16:  # bounded memory: trajectories come grouped by scene
                depth_cache.clear()
            depth_cache[(p, cam)] = load_depth_stack(reader(p), cam)
        return depth_cache[(p, cam)]

    bar = tqdm(jobs, desc="overlap", unit="traj-pair", disable=None)
    for parent, ta, tb in bar:
        ra, rb = reader(ta), reader(tb)
        for r in (ra, rb):
            if not r.has_depth:
                raise SystemExit(f"{r.path}: has no depth; overlap labels need depth maps")
        if args.cam_pairs == "same":
            cams = [(c, c) for c in ra.cameras if c in rb.cameras]
        else:
            cams = list(itertools.product(ra.cameras, rb.cameras))
        out_dir = parent / OVERLAP_DIR
        out_dir.mkdir(exist_ok=True)
        for ca, cb in cams:
            path = out_dir / _overlap_name(ta.name, tb.name, ca, cb)
            if path.exists() and not args.overwrite:
                skipped += 1
                values.append(np.load(path).astype(np.float32).ravel())
                continue
            mat = overlap_matrix(depth(ta, ca), ra.rig[ca].K, ra.world_T_cam(ca),
                                 depth(tb, cb), rb.rig[cb].K, rb.world_T_cam(cb),
                                 tol=args.tol, size=args.size)
            tmp = path.with_name(path.stem + ".tmp.npy")
            np.save(tmp, mat.astype(np.float16))
            tmp.replace(path)
            written += 1
            values.append(mat.ravel())
            bar.set_postfix(written=written, skipped=skipped)
    allv = np.concatenate(values) if values else np.zeros(0)
    hist = save_histogram(allv, args.root / "overlap_hist.png", "frame-pair overlap",
                          "symmetric overlap")
    return {"matrices_written": written, "matrices_skipped": skipped,
            "frame_pairs": overlap_summary(allv), "histogram_png": str(hist)}


def cmd_mine(args: argparse.Namespace) -> dict:
    pairs: list[WindowPair] = []
    files = sorted(args.root.rglob(f"{OVERLAP_DIR}/*__*__*__*.npy"))
    if not files:
        raise SystemExit(f"no overlap matrices under {args.root}; run `g2g-data overlap` first")
    for path in tqdm(files, desc="mine", unit="matrix", disable=None):
        ta, tb, ca, cb = _parse_overlap_name(path)
        mat = np.load(path).astype(np.float32)
        if min(mat.shape) < args.window:
            continue
        scene = path.parent.parent
        for i, j, s in mine_windows(mat, args.window, args.top_k, args.min_score, args.nms):
            rel = scene.relative_to(args.root) if scene != args.root else Path(".")
            pairs.append(WindowPair(str(rel / ta), ca, i, str(rel / tb), cb, j, args.window,
                                    round(s, 4)))
    out = args.out or args.root / f"pairs_w{args.window}.json"
    write_index(pairs, out)
    hist = save_histogram([p.score for p in pairs], Path(out).with_suffix(".png"),
                          f"mined window scores (W = {args.window})", "max-mean score",
                          bins=np.linspace(0, 1, 21))
    return {"matrices": len(files), "pairs": len(pairs), "index": str(out),
            "histogram_png": str(hist)}


def cmd_rig_pairs(args: argparse.Namespace) -> dict:
    pairs: list[RigPair] = []
    for parent, trajs in _groups(args.root).items():
        readers = [TrajectoryReader(t) for t in trajs]
        for ra, rb in itertools.combinations_with_replacement(readers, 2):
            same = ra.path == rb.path
            if args.max_frame_gap is not None and not same:
                continue
            for i, j, d, y in rig_pairs(ra.world_T_body, rb.world_T_body, args.max_distance,
                                        args.min_distance, same_trajectory=same,
                                        min_frame_gap=args.min_frame_gap,
                                        max_pairs=args.max_pairs, seed=args.seed,
                                        max_frame_gap=args.max_frame_gap):
                pair = RigPair(str(ra.path.relative_to(args.root)), i,
                               str(rb.path.relative_to(args.root)), j, round(d, 4), round(y, 2))
                # Standstill rows (the same frame twice) repeated: training weight, in order.
                pairs.extend([pair] * (args.standstill_repeat if same and i == j else 1))
    out = args.out or args.root / "rig_pairs.csv"
    if not pairs:
        raise SystemExit("no rig pair within the distance bounds")
    write_index(pairs, out)
    hist = save_histogram([p.distance_m for p in pairs], Path(out).with_suffix(".png"),
                          "rig pairs", "body distance (m)")
    return {"pairs": len(pairs), "index": str(out), "histogram_png": str(hist)}


def cmd_stats(args: argparse.Namespace) -> dict:
    trajs = find_trajectories(args.root)
    frames = cam_frames = 0
    for t in trajs:
        r = TrajectoryReader(t)
        frames += r.num_frames
        cam_frames += r.num_frames * len(r.cameras)
    values = [np.load(p).astype(np.float32).ravel()
              for p in sorted(args.root.rglob(f"{OVERLAP_DIR}/*__*__*__*.npy"))]
    allv = np.concatenate(values) if values else np.zeros(0)
    out = {"trajectories": len(trajs), "frames": frames, "camera_frames": cam_frames,
           "overlap_matrices": len(values), "frame_pairs": overlap_summary(allv)}
    if len(allv):
        out["histogram_png"] = str(save_histogram(allv, args.root / "overlap_hist.png",
                                                  "frame-pair overlap", "symmetric overlap"))
    return out


def cmd_convert_nclt(args: argparse.Namespace) -> dict:
    from g2g_model.data.convert_nclt import convert_nclt

    bar = tqdm(desc=f"nclt {args.date}", unit="frame", disable=None)

    def tick(n: int, total: int) -> None:
        bar.total = total
        bar.update(1)

    path = convert_nclt(args.root, args.date, args.out, cameras=args.cams, scale=args.scale,
                        stride=args.stride, max_frames=args.max_frames,
                        overwrite=args.overwrite, on_frame=tick)
    bar.close()
    return {"trajectory": str(path), "frames": TrajectoryReader(path).num_frames}


def cmd_convert_zjh(args: argparse.Namespace) -> dict:
    from g2g_model.data.convert_zjh import convert_zjh

    bar = tqdm(desc=f"zjh {args.floor}/{args.traj}", unit="frame", disable=None)

    def tick(n: int, total: int) -> None:
        bar.total = total
        bar.update(1)

    path = convert_zjh(args.root, args.floor, args.traj, args.out, calib=args.calib,
                       scale=args.scale, stride=args.stride, max_frames=args.max_frames,
                       overwrite=args.overwrite, on_frame=tick)
    bar.close()
    return {"trajectory": str(path), "frames": TrajectoryReader(path).num_frames}


def cmd_convert_tum(args: argparse.Namespace) -> dict:
    from g2g_model.data.convert_tum import convert_tum

    try:
        path = convert_tum(args.src, args.out, camera=None if args.intrinsics else args.camera,
                           intrinsics=args.intrinsics, dist=args.dist, stride=args.stride,
                           max_frames=args.max_frames, overwrite=args.overwrite,
                           world_up=args.world_up)
    except ValueError as exc:
        raise SystemExit(f"g2g-data convert-tum: error: {exc}")
    return {"trajectory": str(path), "frames": TrajectoryReader(path).num_frames}


def cmd_merge(args: argparse.Namespace) -> dict:
    from g2g_model.data.merge import merge_collections

    try:
        return merge_collections(args.out, args.roots, args.index)
    except ValueError as exc:
        raise SystemExit(f"g2g-data merge: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="g2g-data", description=__doc__.split("\n")[0])
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("convert-nclt", help="NCLT raw layout -> dataset format")
    c.add_argument("--root", type=Path, required=True)
    c.add_argument("--date", required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--cams", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    c.add_argument("--scale", type=float, default=0.25)
    c.add_argument("--stride", type=int, default=1)
    c.add_argument("--max-frames", type=int)
    c.add_argument("--overwrite", action="store_true")
    c.set_defaults(func=cmd_convert_nclt, skip_if=lambda a: a.out)

    z = sub.add_parser("convert-zjh", help="ZJH layout -> dataset format")
    z.add_argument("--root", type=Path, required=True)
    z.add_argument("--floor", required=True)
    z.add_argument("--traj", required=True)
    z.add_argument("--out", type=Path, required=True)
    z.add_argument("--calib", type=Path)
    z.add_argument("--scale", type=float, default=1.0)
    z.add_argument("--stride", type=int, default=1)
    z.add_argument("--max-frames", type=int)
    z.add_argument("--overwrite", action="store_true")
    z.set_defaults(func=cmd_convert_zjh, skip_if=lambda a: a.out)

    t = sub.add_parser("convert-tum", help="TUM RGB-D layout (rgb.txt or rgb/, "
                       "groundtruth.txt) -> format")
    t.add_argument("--src", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--camera", choices=("fr1", "fr2", "fr3"), default="fr3")
    t.add_argument("--intrinsics", type=float, nargs=4, metavar=("FX", "FY", "CX", "CY"),
                   help="instead of --camera")
    t.add_argument("--dist", type=float, nargs="+", help="OpenCV distortion coefficients")
    t.add_argument("--stride", type=int, default=1)
    t.add_argument("--max-frames", type=int)
    t.add_argument("--world-up", choices=("z-up", "y-down"), default="z-up",
                   help="the ground truth's world: z-up (taken as is) or y-down (camera axes: "
                        "rotated to z-up, new x = old z, new y = -old x, new z = -old y)")
    t.add_argument("--overwrite", action="store_true")
    t.set_defaults(func=cmd_convert_tum, skip_if=lambda a: a.out)

    o = sub.add_parser("overlap", help="overlap matrices for trajectory pairs (needs depth)")
    o.add_argument("root", type=Path)
    o.add_argument("--tol", type=float, default=DEFAULT_TOLERANCE_M)
    o.add_argument("--size", type=int, default=DEFAULT_SIZE, help="depth subsampling (0: none)")
    o.add_argument("--cam-pairs", choices=("same", "all"), default="same")
    o.add_argument("--include-self", action="store_true", help="also a trajectory with itself")
    o.add_argument("--overwrite", action="store_true")
    o.set_defaults(func=cmd_overlap)

    m = sub.add_parser("mine", help="mine W x W window pairs from overlap matrices")
    m.add_argument("root", type=Path)
    m.add_argument("--window", type=int, default=5)
    m.add_argument("--top-k", type=int, default=10)
    m.add_argument("--min-score", type=float, default=0.1)
    m.add_argument("--nms", type=int, help="suppression radius in frames (default: window)")
    m.add_argument("--out", type=Path, help="index path (.json or .csv)")
    m.set_defaults(func=cmd_mine)

    r = sub.add_parser("rig-pairs", help="rig observation pairs with bounded body distance")
    r.add_argument("root", type=Path)
    r.add_argument("--max-distance", type=float, default=1.0)
    r.add_argument("--min-distance", type=float, default=0.0)
    r.add_argument("--min-frame-gap", type=int, default=1)
    r.add_argument("--max-frame-gap", type=int,
                   help="odometry pairs: same traversal only, at most this many frames apart")
    r.add_argument("--max-pairs", type=int, default=2000, help="per trajectory pair")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--standstill-repeat", type=_positive_int, default=1,
                   help="write each standstill pair (a frame with itself, --min-frame-gap 0) "
                        "this many times: its weight in training")
    r.add_argument("--out", type=Path, help="index path (.csv or .json)")
    r.set_defaults(func=cmd_rig_pairs)

    s = sub.add_parser("stats", help="counts and overlap histogram")
    s.add_argument("root", type=Path)
    s.set_defaults(func=cmd_stats)

    g = sub.add_parser("merge", help="one training root from several collections (scene links "
                                     "+ concatenated pair indexes)")
    g.add_argument("roots", type=Path, nargs="+")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--index", action="append", default=[],
                   help="index file every root holds (.csv / .json); repeat for several")
    g.set_defaults(func=cmd_merge)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    if getattr(args, "size", None) == 0:
        args.size = None
    skip_if = getattr(args, "skip_if", None)
    if skip_if is not None and not args.overwrite:
        from g2g_model.data.format import is_complete

        if is_complete(skip_if(args)):
            print(json.dumps({"skipped": str(skip_if(args)), "reason": "already complete"}))
            return 0
    summary = args.func(args)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
