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
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Dict, List, Optional

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import DTYPES, FLOP_FORMULAS, emit_report, machine_info, timed
from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.compact_config import compact_config
from g2g_model.model.config import preset as g2g_preset
from g2g_model.model.g2g import G2GModel


def matmul_peak(dtype: torch.dtype, budget_s: float, size: int = 2048) -> Dict[str, float]:
    """Best FLOP/s of a size x size product in ``dtype`` via ``torch.mm`` and ``F.linear``.

    Both are reported because without native bf16 (AVX2 only) ``torch.mm`` on bf16 takes a slow
    reference path while ``F.linear`` (what ``nn.Linear`` runs) goes through oneDNN.
    """
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    peaks = {}
    for label, fn in (("mm", lambda: torch.mm(a, b)),
                      ("linear", lambda: torch.nn.functional.linear(a, b))):
        times = timed(fn, warmup=0, reps=10, budget_s=budget_s, min_runs=1)
        peaks[label] = 2.0 * size ** 3 / min(times)
    return peaks


def make_inputs(groups: int, frames: int, size: int = 224):
    gen = torch.Generator().manual_seed(0)
    images = torch.rand(groups, frames, 3, size, size, generator=gen)
    k = torch.tensor([[0.8 * size, 0, size / 2], [0, 0.8 * size, size / 2], [0, 0, 1]])
    intrinsics = k.expand(groups, frames, 3, 3).contiguous()
    poses = torch.eye(4).repeat(groups, frames, 1, 1)
    poses[:, 1:, 0, 3] = torch.linspace(0.2, 1.0, frames - 1) if frames > 1 else 0
    return images, intrinsics, poses


class Setting:
    """One (preset, frames, dtype) measurement: inputs, FLOPs and the collected wall times."""

    def __init__(self, preset: str, model: CompactBackbone, groups: int, frames: int,
                 dtype_name: str, g2g: Optional[G2GModel] = None) -> None:
        if g2g is not None and groups != 2:
            raise ValueError(f"--with-g2g needs two groups (frames 10 = 5 + 5), got {groups}")
        self.preset, self.model, self.dtype_name = preset, model, dtype_name
        self.groups, self.frames, self.g2g = groups, frames, g2g
        self.inputs = make_inputs(groups, frames, model.image_size[0])
        self.times: List[float] = []
        with self._context():
            counter = FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)
            with counter:
                self._forward()
        self.flops = float(counter.get_total_flops())

    def _forward(self) -> None:
        """Backbone on all groups; with ``g2g``, then the G2G modules on group 0 vs group 1."""
        features = self.model(*self.inputs)
        if self.g2g is not None:
            self.g2g(features[0:1].clone(), features[1:2].clone())

    def _context(self):
        dtype = DTYPES[self.dtype_name]
        stack = contextlib.ExitStack()
        stack.enter_context(torch.inference_mode())
        stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None))
        return stack

    def run_once(self) -> float:
        with self._context():
            start = time.perf_counter()
            self._forward()
            return time.perf_counter() - start


def run(presets: List[str], frames_list: List[int], dtypes: List[str], reps: int, warmup: int,
        budget_s: float, overrides: Dict[str, object], peak_budget_s: float = 5.0,
        with_g2g: Optional[str] = None) -> str:
    """Markdown report (``with_g2g``: a G2G preset timed together with the backbone).

    Settings are timed round-robin (one run each per round) so that load from other processes
    affects all of them alike; rounds stop after ``reps`` or once the total time exceeds
    ``budget_s`` times the number of settings (at least 3 rounds)."""
    lines = ["## Machine", *machine_info(),
             f"- load average before: {os.getloadavg()[0]:.2f} (1 min)", ""]
    peaks = {}
    lines.append("## Matmul peak (2048x2048, best run; % below is of the better of the two)")
    for name in dtypes:
        found = matmul_peak(DTYPES[name] or torch.float32, budget_s=peak_budget_s)
        peaks[name] = max(found.values())
        lines.append(f"- {name}: torch.mm {found['mm'] / 1e9:.1f} GFLOP/s, F.linear "
                     f"{found['linear'] / 1e9:.1f} GFLOP/s")
    settings = []
    params = {}
    for preset in presets:
        torch.manual_seed(0)
        model = CompactBackbone(compact_config(preset, **overrides)).eval()
        params[preset] = sum(p.numel() for p in model.parameters())
        for frames in frames_list:
            groups, per_group = (frames // 5, 5) if frames % 5 == 0 else (1, frames)
            g2g = None
            if with_g2g:
                torch.manual_seed(0)
                g2g = G2GModel(g2g_preset(with_g2g, input_dim=model.feature_dim)).eval()
                g2g.requires_grad_(False)
            for name in dtypes:
                settings.append(Setting(preset, model, groups, per_group, name, g2g))
    for setting in settings:
        for _ in range(warmup):
            setting.run_once()
    start = time.perf_counter()
    for round_index in range(reps):
        for setting in settings:
            setting.times.append(setting.run_once())
        elapsed = time.perf_counter() - start
        if round_index >= 2 and elapsed > budget_s * len(settings):
            break
    what = f"compact backbone + G2G `{with_g2g}` (A vs B)" if with_g2g else "Compact backbone"
    lines += ["", f"## {what}, 224x224, inference_mode, settings timed round-robin",
              "| preset | params | groups x frames | dtype | GFLOP | median ms | min ms | runs | "
              "GFLOP/s (median) | % of matmul peak |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for setting in settings:
        median = statistics.median(setting.times)
        rate = setting.flops / median
        lines.append(
            f"| {setting.preset} | {params[setting.preset] / 1e6:.2f} M | "
            f"{setting.groups}x{setting.frames} | {setting.dtype_name} | "
            f"{setting.flops / 1e9:.2f} | {median * 1e3:.1f} | {min(setting.times) * 1e3:.1f} | "
            f"{len(setting.times)} | {rate / 1e9:.1f} | "
            f"{100 * rate / peaks[setting.dtype_name]:.0f} % |"
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
                        help="time budget per setting in seconds (at least 3 rounds run)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--override", nargs="*", type=parse_override, default=[],
                        help="config overrides applied to every preset, e.g. depth=4")
    parser.add_argument("--output", default=None, help="also write the report to this file")
    parser.add_argument("--with-g2g", default=None, metavar="PRESET",
                        help="also run this G2G preset on group 0 vs group 1 (frames 10)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    report = run(args.presets, args.frames, args.dtypes, args.reps, args.warmup, args.budget_s,
                 dict(args.override), with_g2g=args.with_g2g)
    emit_report("compact backbone benchmark", "benchmarks.bench_compact", argv, report,
                args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
