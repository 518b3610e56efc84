"""Latency, FLOPs and matmul-peak utilisation of the compact backbone on this CPU.

Measures, for each preset, the median wall time of one forward pass for 5 frames (one group) and
10 frames (two groups of 5) at 224x224 in float32 and in bfloat16 autocast, under
``torch.inference_mode``; counts FLOPs with ``torch.utils.flop_counter.FlopCounterMode``; and
divides the achieved FLOP/s by the peak of a 2048x2048 matmul measured in the same run and dtype.
Prints a Markdown report (machine info first).

Example::

    python -m benchmarks.bench_compact --presets compact_s compact_m --output \
        benchmarks/RESULTS_compact.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Dict, List, Optional

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import DTYPES, FLOP_FORMULAS, machine_info, matmul_peak, timed
from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.compact_config import compact_config


def make_inputs(groups: int, frames: int, size: int = 224):
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(groups, frames, 3, size, size, generator=gen)
    k = torch.tensor([[0.8 * size, 0, size / 2], [0, 0.8 * size, size / 2], [0, 0, 1]])
    intrinsics = k.expand(groups, frames, 3, 3).contiguous()
    poses = torch.eye(4).repeat(groups, frames, 1, 1)
    poses[:, 1:, 0, 3] = torch.linspace(0.2, 1.0, frames - 1) if frames > 1 else 0
    return images, intrinsics, poses


def bench_model(model: CompactBackbone, groups: int, frames: int, dtype_name: str,
                warmup: int, reps: int, budget_s: float) -> Dict[str, float]:
    inputs = make_inputs(groups, frames, model.image_size[0])
    dtype = DTYPES[dtype_name]
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                enabled=dtype is not None):
        counter = FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)
        with counter:
            model(*inputs)
        times = timed(lambda: model(*inputs), warmup, reps, budget_s)
    return {"flops": float(counter.get_total_flops()), "median_s": statistics.median(times),
            "min_s": min(times), "runs": len(times)}


def run(presets: List[str], frames_list: List[int], dtypes: List[str], reps: int, warmup: int,
        budget_s: float, overrides: Dict[str, object]) -> str:
    lines = ["## Machine", *machine_info(),
             f"- load average before: {os.getloadavg()[0]:.2f} (1 min)", ""]
    peaks = {}
    lines.append("## Matmul peak (2048x2048, best run)")
    for name in dtypes:
        peaks[name] = matmul_peak(DTYPES[name] or torch.float32, reps=10, budget_s=budget_s)
        lines.append(f"- {name}: {peaks[name] / 1e9:.1f} GFLOP/s")
    lines += ["", "## Compact backbone, 224x224, inference_mode",
              "| preset | params | frames | dtype | GFLOP | median ms | min ms | runs | "
              "GFLOP/s | % of matmul peak |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for preset in presets:
        torch.manual_seed(0)
        model = CompactBackbone(compact_config(preset, **overrides)).eval()
        params = sum(p.numel() for p in model.parameters())
        for frames in frames_list:
            groups, per_group = (frames // 5, 5) if frames % 5 == 0 else (1, frames)
            for name in dtypes:
                result = bench_model(model, groups, per_group, name, warmup, reps, budget_s)
                rate = result["flops"] / result["median_s"]
                lines.append(
                    f"| {preset} | {params / 1e6:.2f} M | {groups}x{per_group} | {name} | "
                    f"{result['flops'] / 1e9:.2f} | {result['median_s'] * 1e3:.1f} | "
                    f"{result['min_s'] * 1e3:.1f} | {result['runs']} | {rate / 1e9:.1f} | "
                    f"{100 * rate / peaks[name]:.0f} % |"
                )
    lines.append(f"\nload average after: {os.getloadavg()[0]:.2f} (1 min)")
    return "\n".join(lines)


def parse_override(text: str):
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"override must be key=value, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=["compact_s"])
    parser.add_argument("--frames", nargs="+", type=int, default=[5, 10],
                        help="total frames; multiples of 5 run as groups of 5")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["fp32", "bf16"])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=30.0,
                        help="stop timing a setting after this many seconds (>= 3 runs)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--override", nargs="*", type=parse_override, default=[],
                        help="config overrides applied to every preset, e.g. depth=4")
    parser.add_argument("--output", default=None, help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    report = run(args.presets, args.frames, args.dtypes, args.reps, args.warmup, args.budget_s,
                 dict(args.override))
    command = "python -m benchmarks.bench_compact " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = f"# compact backbone benchmark\n\nCommand: `{command}`\n\n{report}\n"
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
