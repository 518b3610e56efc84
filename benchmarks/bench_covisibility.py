"""Covisibility scoring throughput (pairs/s) and window-selection time on this machine.

Scores a ``T_A x T_B`` block of random cached tokens with :func:`score_matrix` (the per-frame
embedding is included, as at run time) for each decoder preset, dtype and batch size, and
times max-mean window selection on a 3,000 x 30 score matrix. Weights are random: throughput
does not depend on them.

    python -m benchmarks.bench_covisibility
    python -m benchmarks.bench_covisibility --presets paper --dtypes bf16 --batch-sizes 128
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import List, Optional

import numpy as np
import torch

from g2g_model.covisibility.front_end import select_map_windows
from g2g_model.covisibility.model import COVISIBILITY_PRESETS, build_covisibility_model
from g2g_model.covisibility.retrieval import select_windows
from g2g_model.covisibility.scoring import score_matrix


def machine_info() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        cpu = f"{names[0]} x {len(names)}" if names else cpu
    except OSError:
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            line = next((ln for ln in fh if ln.startswith("flags")), "")
        simd = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {f}" in line]
        flags = f" ({', '.join(simd) or 'no AVX2'})"
    except OSError:
        pass
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.system()} {platform.machine()}, {cpu}{flags}, python "
            f"{platform.python_version()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads, load average {load}")


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
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine_info())
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
