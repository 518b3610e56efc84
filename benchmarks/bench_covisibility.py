"""Covisibility scoring throughput (pairs/s) and window-selection time on this machine.

Scores a ``T_A x T_B`` block of random cached tokens with :func:`score_matrix` (the per-frame
embedding is included, as at run time) for each decoder preset, dtype and batch size, and
times max-mean window selection on a 3,000 x 30 score matrix. Weights are random: throughput
does not depend on them.

Two measurements with the shipped weights on a simulated map (:mod:`benchmarks.sim_map`,
generated once under ``--cache-dir``), both opt-in:

* ``--vs-g2g``: one query window against a small one-camera map: covisibility scoring of the
  whole ``T_A x T_B`` matrix + max-mean selection, against running the G2G model on every
  candidate map window (from cached group features, and from raw images), round-robin in the
  same run; pairs/s, per-window costs and the ratio.
* ``--end-to-end``: a 30-frame query in a 3,000-frame map (:mod:`benchmarks.covis_end_to_end`,
  each case in a fresh subprocess for its peak RSS): encode the query, score (full and
  coarse-to-fine), select, run G2G; and encoding all map frames, for the paper's 9 s figure.

    python -m benchmarks.bench_covisibility
    python -m benchmarks.bench_covisibility --presets paper --dtypes bf16 --batch-sizes 128
    python -m benchmarks.bench_covisibility --presets cpu_fast --dtypes fp32 --batch-sizes 256 \\
        --vs-g2g --end-to-end
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import List, Optional

import numpy as np
import torch

from benchmarks.common import machine_info as common_machine_info
from benchmarks.common import machine_line
from benchmarks.covis_end_to_end_report import bench_end_to_end
from benchmarks.sim_map import DEFAULT_CACHE
from g2g_model.covisibility.front_end import select_map_windows
from g2g_model.covisibility.model import COVISIBILITY_PRESETS, build_covisibility_model
from g2g_model.covisibility.retrieval import select_windows, window_scores
from g2g_model.covisibility.scoring import score_matrix


def bench_scoring(preset: str, bf16: bool, batch_size: int, budget_s: float,
                  t_b: int = 16) -> dict:
    torch.manual_seed(0)
    model = build_covisibility_model(preset).eval()
    c = model.config
    tokens_b = torch.randn(t_b, c.num_patches, c.in_dim).half()
    # Warm-up and size the run so that it takes about budget_s.
    tokens_a = torch.randn(max(1, batch_size // t_b), c.num_patches, c.in_dim).half()
    score_matrix(model, tokens_a, tokens_b, batch_size=batch_size, bf16=bf16)
    t0 = time.perf_counter()
    score_matrix(model, tokens_a, tokens_b, batch_size=batch_size, bf16=bf16)
    warm = time.perf_counter() - t0
    per_pair = warm / (tokens_a.shape[0] * t_b)
    t_a = int(np.clip(budget_s / per_pair / t_b, 1, 4096))
    tokens_a = torch.randn(t_a, c.num_patches, c.in_dim).half()
    t0 = time.perf_counter()
    score_matrix(model, tokens_a, tokens_b, batch_size=batch_size, bf16=bf16)
    elapsed = time.perf_counter() - t0
    rate = t_a * t_b / elapsed
    return {"preset": preset, "params": model.num_parameters(),
            "tokens": 2 * c.pooled_hw[0] * c.pooled_hw[1], "dtype": "bf16" if bf16 else "fp32",
            "batch": batch_size, "pairs": t_a * t_b, "pairs_per_s": rate,
            "s_per_90k": 90_000 / rate}


def bench_selection(t_a: int = 3000, t_b: int = 30, window: int = 5, reps: int = 20) -> float:
    scores = np.random.default_rng(0).random((t_a, t_b)).astype(np.float32)
    positions = np.random.default_rng(1).normal(size=(t_a, 3)) * 50
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        select_windows(scores, window, top_k=1, threshold=0.1, map_positions=positions,
                       hint_position=np.zeros(3), radius=60.0)
        best = min(best, time.perf_counter() - t0)
    return best


def bench_front_end(preset: str, t_a: int, t_b: int, window: int, coarse_stride: int) -> dict:
    """One query against a map with coarse-to-fine scoring (tokens precomputed, random)."""
    torch.manual_seed(0)
    model = build_covisibility_model(preset).eval()
    c = model.config
    map_tokens = torch.randn(t_a, c.num_patches, c.in_dim).half()
    query = torch.randn(t_b, c.num_patches, c.in_dim).half()
    t0 = time.perf_counter()
    wins, scores = select_map_windows(model, map_tokens, query, window,
                                      coarse_stride=coarse_stride)
    elapsed = time.perf_counter() - t0
    rows = int(scores.score.any(axis=1).sum())
    return {"seconds": elapsed, "rows": rows, "pairs": rows * t_b}


def _median_ms(times: List[float]) -> float:
    return 1e3 * statistics.median(times)


def bench_vs_g2g(frames: int, rounds: int, cache_dir, batch_size: int = 256, window: int = 5,
                 camera: str = "cam0") -> List[str]:
    """Covisibility selection against G2G on every candidate window of a small map (shipped
    weights); returns the report lines.

    The map is one camera's ``frames`` consecutive frames of traversal 0 of the simulated scene
    (tokens cached in the map file), the query ``window`` consecutive frames of the same camera
    in traversal 1 (those that overlap the map most). Timed, round-robin (the order rotates
    every round): (a) scoring the ``T_A x W`` matrix from cached tokens plus max-mean selection
    of the best ``W x W`` window; (b) one G2G pass per candidate map window with cached group
    features (map windows encoded offline, the query group once); (c) ``G2GPipeline.predict``
    per candidate window from the images (both groups prepared and encoded every time, as
    without any cache).
    """
    from g2g_model.covisibility.checkpoint import load_checkpoint
    from g2g_model.estimation.groups import Group
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.assets import default_checkpoint
    from g2g_model.maps.format import load_map

    from benchmarks.sim_map import SimMapSpec, build_map, generate, query_group, trajectory
    from benchmarks.sim_map import true_overlap

    spec = SimMapSpec(frames=frames)
    scene, _ = generate(spec, cache_dir)
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    covis, _ = load_checkpoint(default_checkpoint("covisibility"),
                               expect_encoder=pipeline.backbone_id())
    covis.eval()
    gmap = load_map(build_map(scene, pipeline)[0], expect_backbone=pipeline.backbone_id())
    rows = gmap.camera_indices(camera)
    map_tokens = gmap.features[torch.from_numpy(rows)]
    images = [gmap.frames[i].decode() for i in rows]
    k = np.stack([gmap.frames[i].intrinsics for i in rows])
    poses = np.stack([gmap.frames[i].world_T_cam for i in rows])
    starts = range(len(rows) - window + 1)
    groups_a = [Group(images[s:s + window], k[s:s + window], poses[s:s + window])
                for s in starts]
    reader_b = trajectory(scene, 1)
    # The query: the traversal-1 window that overlaps the small map most (true overlap), so that
    # there is something to find; the timings do not depend on it.
    true_all = window_scores(true_overlap(trajectory(scene, 0), camera, reader_b, camera,
                                          range(reader_b.num_frames)), window)
    q_start = int(np.argmax(true_all.max(axis=0)))
    q_frames = list(range(q_start, q_start + window))
    group_b = query_group(reader_b, camera, q_frames)

    t0 = time.perf_counter()
    query_tokens = pipeline.encode_frames(group_b.images, group_b.intrinsics)
    t_query_tokens = time.perf_counter() - t0
    t0 = time.perf_counter()
    feats_b = pipeline.encode(pipeline.prepare(group_b))
    t_query_group = time.perf_counter() - t0
    t0 = time.perf_counter()
    feats_a = [pipeline.encode(pipeline.prepare(g)) for g in groups_a]
    t_map_groups = time.perf_counter() - t0

    picked = {}
    score_times: List[float] = []

    def covisibility() -> None:
        t_start = time.perf_counter()
        scores = score_matrix(covis, map_tokens, query_tokens, batch_size=batch_size)
        score_times.append(time.perf_counter() - t_start)
        picked["window"] = select_windows(scores.score, window, top_k=1, threshold=-np.inf)[0]

    def g2g_cached() -> None:
        for fa in feats_a:
            pipeline.run_features(fa, feats_b)

    def g2g_images() -> None:
        for group_a in groups_a:
            pipeline.predict(group_a, group_b)

    methods = {"covisibility": covisibility, "g2g_cached": g2g_cached, "g2g_images": g2g_images}
    covisibility()  # warm-up: first passes allocate and pick kernels
    pipeline.run_features(feats_a[0], feats_b)
    pipeline.predict(groups_a[0], group_b)
    score_times.clear()
    times: dict = {name: [] for name in methods}
    names = list(methods)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            methods[name]()
            times[name].append(time.perf_counter() - t0)
    n_win, pairs = len(groups_a), len(rows) * window
    ms = {name: _median_ms(t) for name, t in times.items()}
    score_ms = _median_ms(score_times)
    # Ratios within each round (the methods ran back to back there) are less exposed to load
    # that changes between rounds than the ratio of medians.
    per_round = {name: sorted(g / c for g, c in zip(times[name], times["covisibility"]))
                 for name in ("g2g_cached", "g2g_images")}
    true_ws = true_all[:, q_start]
    pick = picked["window"]
    return [
        f"small map: {len(rows)} consecutive frames of {camera} (scene {spec.seed}, traversal "
        f"0, {spec.image_size} px); query: {window} frames of {camera}, traversal 1 (frames "
        f"{q_frames[0]}-{q_frames[-1]}); W = {window}: {n_win} candidate map windows; "
        f"{rounds} rounds, round-robin, medians",
        f"one-off: query per-frame tokens (covisibility input) {1e3 * t_query_tokens:.1f} ms; "
        f"query group features (G2G input) {1e3 * t_query_group:.1f} ms; group features of "
        f"all {n_win} map windows (offline) {1e3 * t_map_groups:.0f} ms "
        f"({1e3 * t_map_groups / n_win:.1f} ms per window)",
        "",
        "| method | what is timed | total ms | ms per candidate window | x covisibility |",
        "|---|---|---|---|---|",
        f"| covisibility (shipped decoder, fp32, batch {batch_size}) | score {len(rows)} x "
        f"{window} = {pairs} pairs + select | {ms['covisibility']:.1f} | "
        f"{ms['covisibility'] / n_win:.2f} | 1.0 |",
        f"| G2G, cached features | {n_win} passes of the G2G modules | {ms['g2g_cached']:.0f} | "
        f"{ms['g2g_cached'] / n_win:.2f} | {ms['g2g_cached'] / ms['covisibility']:.1f} |",
        f"| G2G from images | {n_win} x `predict` (prepare + encode both groups + G2G) | "
        f"{ms['g2g_images']:.0f} | {ms['g2g_images'] / n_win:.2f} | "
        f"{ms['g2g_images'] / ms['covisibility']:.1f} |",
        "",
        f"scalar scoring alone: {score_ms:.1f} ms for {pairs} pairs = "
        f"{pairs / score_ms * 1e3:,.0f} pairs/s (selection: "
        f"{ms['covisibility'] - score_ms:.2f} ms)",
        "per-round ratios to covisibility (min / median / max): " + "; ".join(
            f"{name} {r[0]:.1f} / {statistics.median(r):.1f} / {r[-1]:.1f}"
            for name, r in per_round.items()),
        f"picked map window {pick.map_start}-{pick.map_start + window - 1} (score "
        f"{pick.score:.3f}); its true overlap {true_ws[pick.map_start]:.3f}, best window "
        f"{int(np.argmax(true_ws))} with {true_ws.max():.3f}",
    ]


def random_weight_tables(args) -> None:
    """The preset throughput table, window selection and the optional front-end timing."""
    print()
    print("| preset | params | tokens/pair | dtype | batch | pairs timed | pairs/s | "
          "s per 90k pairs |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in args.presets:
        for dtype in args.dtypes:
            for bs in args.batch_sizes:
                r = bench_scoring(preset, dtype == "bf16", bs, args.budget_s)
                print(f"| {r['preset']} | {r['params']:,} | {r['tokens']} | {r['dtype']} | "
                      f"{r['batch']} | {r['pairs']} | {r['pairs_per_s']:,.0f} | "
                      f"{r['s_per_90k']:.1f} |", flush=True)
    print()
    sel = bench_selection()
    print(f"window selection (3000 x 30 scores, W=5, top-1, radius filter): "
          f"{sel * 1e3:.2f} ms (best of 20)")
    if args.front_end:
        t_a, t_b = args.front_end
        for preset in args.presets:
            r = bench_front_end(preset, t_a, t_b, args.window, args.coarse_stride)
            print(f"front end {preset}: {t_b}-frame query in a {t_a}-frame map, W="
                  f"{args.window}, coarse stride {args.coarse_stride}: {r['seconds']:.1f} s, "
                  f"{r['rows']} map rows / {r['pairs']} pairs scored (full: {t_a * t_b})")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["paper", "compact", "cpu_fast"],
                        choices=sorted(COVISIBILITY_PRESETS))
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"],
                        choices=["fp32", "bf16"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--budget-s", type=float, default=4.0,
                        help="approximate seconds per measurement")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--front-end", nargs=2, type=int, metavar=("T_A", "T_B"),
                        help="also time one coarse-to-fine query of T_B frames in a T_A map")
    parser.add_argument("--coarse-stride", type=int, default=8)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE),
                        help="where the simulated maps are generated and kept")
    parser.add_argument("--vs-g2g", action="store_true",
                        help="covisibility selection vs G2G on every window of a small map")
    parser.add_argument("--small-frames", type=int, default=100,
                        help="--vs-g2g: frames of the one-camera small map")
    parser.add_argument("--rounds", type=int, default=5, help="--vs-g2g: round-robin rounds")
    parser.add_argument("--end-to-end", action="store_true",
                        help="a 30-frame query in a 3,000-frame simulated map")
    parser.add_argument("--map-frames", type=int, default=750,
                        help="--end-to-end: rig frames per camera (ring4: x 4 map frames)")
    parser.add_argument("--query-camera", default="cam0")
    parser.add_argument("--query-start", type=int, default=300)
    parser.add_argument("--query-frames", type=int, default=30)
    parser.add_argument("--e2e-strides", nargs="+", type=int, default=[1, 8],
                        help="--end-to-end: coarse strides (1 = full scoring)")
    parser.add_argument("--no-map-relative", action="store_true",
                        help="--end-to-end: skip the embedding and map-whitened cases")
    parser.add_argument("--encode-batch", type=int, default=16,
                        help="--end-to-end: frames per encoder pass")
    parser.add_argument("--only-shipped", action="store_true",
                        help="skip the random-weight preset table and selection timing")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine_line())
    if not args.only_shipped:
        random_weight_tables(args)
    if args.vs_g2g or args.end_to_end:
        print()
        print("\n".join(common_machine_info()))
    if args.vs_g2g:
        load = os.getloadavg()
        lines = bench_vs_g2g(args.small_frames, args.rounds, args.cache_dir,
                             window=args.window)
        print(f"\n## covisibility vs G2G on every candidate window (load average before "
              f"{load[0]:.2f}, after {os.getloadavg()[0]:.2f})\n")
        print("\n".join(lines), flush=True)
    if args.end_to_end:
        print(f"\n## {args.query_frames}-frame query in a {args.map_frames}-frame x 4-camera "
              "map, end to end\n")
        print("\n".join(bench_end_to_end(
            args.map_frames, args.cache_dir, args.query_camera, args.query_start,
            args.query_frames, args.window, args.e2e_strides, 256, args.encode_batch,
            args.threads, map_relative=not args.no_map_relative)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
