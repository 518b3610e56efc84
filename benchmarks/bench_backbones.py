"""Backbone latency and FLOPs on this machine (currently: the ``mapanything_v1`` part only).

For one group of N frames the features-only forward pass is timed in float32 and under bf16
autocast, its FLOPs are counted with ``torch.utils.flop_counter.FlopCounterMode`` (matmuls,
convolutions, attention; one multiply-add = 2 FLOPs), and the achieved FLOP/s is compared with
a 2048x2048 matmul peak measured in the same run and dtype. Weights are random (the speed does
not depend on them), so no checkpoint is needed.

    python -m benchmarks.bench_backbones --views 5 --size 224          # full V1 size
    python -m benchmarks.bench_backbones --preset-json tiny_config.json  # any other config
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Dict, List, Optional, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import machine_line
from g2g_model.backbones.mapanything.config import MapAnythingV1Config, preset
from g2g_model.backbones.mapanything_v1 import MapAnythingV1Backbone

DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def matmul_peak(dtype: torch.dtype, size: int = 2048, repeats: int = 10,
                budget_s: float = 5.0) -> float:
    """Best FLOP/s of a ``size x size`` matmul in ``dtype`` (up to ``repeats`` timed runs).

    Stops early once ``budget_s`` is spent: CPUs without native bf16 run bf16 matmuls hundreds of
    times slower than float32, and one run is then enough to show it.
    """
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    best = float("inf")
    spent = 0.0
    for index in range(repeats + 1):  # the first run is a warm-up unless it is already slow
        start = time.perf_counter()
        torch.mm(a, b)
        elapsed = time.perf_counter() - start
        spent += elapsed
        if index > 0 or elapsed > budget_s / 5:
            best = min(best, elapsed)
        if spent > budget_s and best < float("inf"):
            break
    return 2.0 * size ** 3 / best


def random_backbone(config: MapAnythingV1Config, autocast_dtype=None,
                    seed: int = 0) -> MapAnythingV1Backbone:
    """A backbone with small random weights, built without the slow default initialisers."""
    with torch.device("meta"):
        model = MapAnythingV1Backbone(config, autocast_dtype=autocast_dtype)
    model = model.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if tensor.dim() == 1:  # norms, biases, layer scales, scale token
                tensor.fill_(1.0 if name.endswith("weight") or "gamma" in name else 0.0)
            else:
                fan_in = tensor[0].numel()
                tensor.normal_(0.0, fan_in ** -0.5, generator=generator)
        model.info_sharing.view_pos_table.zero_()[:, 1::2] = 1.0
        model.image_mean.copy_(torch.tensor(config.image_mean).view(3, 1, 1))
        model.image_std.copy_(torch.tensor(config.image_std).view(3, 1, 1))
    return model.eval().requires_grad_(False)


def example_group(views: int, size: int, seed: int = 0):
    """``(images [1, N, 3, S, S], intrinsics [1, N, 3, 3], cam_to_anchor [1, N, 4, 4])``."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.rand(1, views, 3, size, size, generator=generator)
    k = torch.tensor([[size * 0.9, 0.0, size / 2], [0.0, size * 0.9, size / 2], [0, 0, 1.0]])
    intrinsics = k.expand(1, views, 3, 3).clone()
    poses = torch.eye(4).repeat(1, views, 1, 1)
    poses[0, :, 0, 3] = torch.arange(views) * 0.5  # a sideways track, frame 0 at the origin
    return images, intrinsics, poses


def count_flops(model: MapAnythingV1Backbone, inputs) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*inputs)
    return int(counter.get_total_flops())


def time_forward(model: MapAnythingV1Backbone, inputs, repeats: int,
                 warmup: bool = True) -> List[float]:
    """Seconds per forward pass (after one untimed warm-up pass if ``warmup``)."""
    with torch.no_grad():
        if warmup:
            model(*inputs)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - start)
    return times


def bench_mapanything_v1(
    config: MapAnythingV1Config,
    views: int = 5,
    dtypes: Sequence[str] = ("fp32", "bf16"),
    repeats: int = 2,
    max_seconds: float = 60.0,
) -> List[Dict[str, object]]:
    """Latency, FLOPs and achieved / peak FLOP/s of the V1 feature path, one row per dtype.

    A dtype whose estimated pass (FLOPs / matmul peak) exceeds ``max_seconds`` is not timed; its
    row carries ``skipped`` with the reason and the estimate instead of a latency.
    """
    size = config.image_size[0]
    inputs = example_group(views, size)
    model = random_backbone(config)
    flops = count_flops(model, inputs)
    rows: List[Dict[str, object]] = []
    for name in dtypes:
        peak = matmul_peak(DTYPES[name] or torch.float32)
        row: Dict[str, object] = {
            "backbone": "mapanything_v1", "dtype": name, "views": views, "size": size,
            "gflops": flops / 1e9, "matmul_peak_gflops_s": peak / 1e9,
        }
        estimate = flops / peak
        # The FLOP-counting pass already warmed up the float32 path.
        warmup = DTYPES[name] is not None
        if estimate * (repeats + warmup) > max_seconds:
            row["skipped"] = (f"estimated {estimate:.0f} s per pass at the measured {name} "
                              f"matmul peak (budget {max_seconds:.0f} s)")
            rows.append(row)
            continue
        model.autocast_dtype = DTYPES[name]
        latency = statistics.median(time_forward(model, inputs, repeats, warmup))
        row.update(latency_s=latency, achieved_gflops_s=flops / latency / 1e9,
                   fraction_of_peak=flops / latency / peak)
        rows.append(row)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=5, help="frames per group")
    parser.add_argument("--size", type=int, default=224, help="square image side, pixels")
    parser.add_argument("--preset-json", default=None,
                        help="fixture tiny_config.json instead of the full V1 sizes")
    parser.add_argument("--dtypes", default="fp32,bf16", help="comma list of fp32,bf16")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per dtype")
    parser.add_argument("--max-seconds", type=float, default=60.0,
                        help="skip a dtype whose timed passes would take longer than this")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.preset_json:
        with open(args.preset_json) as handle:
            config = MapAnythingV1Config.from_fixture_config(json.load(handle))
    else:
        config = preset("full")
    config = MapAnythingV1Config.from_dict({**config.to_dict(),
                                            "image_size": (args.size, args.size)})
    dtypes = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        parser.error(f"unknown dtypes {unknown}; choose from {sorted(DTYPES)}")
    print(f"machine: {machine_line()}")
    rows = bench_mapanything_v1(config, args.views, dtypes, args.repeats, args.max_seconds)
    print(f"{'backbone':16s} {'dtype':5s} {'N':>2s} {'size':>4s} {'latency':>9s} {'GFLOP':>8s} "
          f"{'GFLOP/s':>8s} {'peak':>8s} {'of peak':>7s}")
    for r in rows:
        head = f"{r['backbone']:16s} {r['dtype']:5s} {r['views']:2d} {r['size']:4d}"
        if "skipped" in r:
            print(f"{head} {'-':>9s} {r['gflops']:8.1f} {'-':>8s} "
                  f"{r['matmul_peak_gflops_s']:8.1f}   skipped: {r['skipped']}")
            continue
        print(f"{head} {r['latency_s']:8.3f}s {r['gflops']:8.1f} {r['achieved_gflops_s']:8.1f} "
              f"{r['matmul_peak_gflops_s']:8.1f} {100 * r['fraction_of_peak']:6.1f}%")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"machine": machine_line(), "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
