"""The paper's model on a GPU, in one run of at most a few minutes, results written as files.

Full-size MapAnything V1 (random weights: the speed does not depend on them) + the paper preset
(W = 5), in fp32 and bf16:

* 5+5 latency: encode group A, encode group B, run the G2G modules (the paper: 49.8 ms end to
  end on an RTX 4090, 2-4 ms for the modules; the issue's goal: bf16 within 1.5x of 49.8 ms);
* features per second: single frames through the backbone in batches (how maps are encoded);
* covisibility scoring pairs per second: the covisibility decoder over map x query token pairs;
* peak memory of each precision.

    python -m benchmarks.gpu_check --out outputs/gpu_check            # on the GPU machine
    python -m benchmarks.gpu_check --dry-run --out /tmp/gpu_check       # tiny sizes on the CPU

Writes ``gpu_check.json`` and ``RESULTS_gpu.md`` (the card named) under ``--out``; stops timing
a measurement once ``--budget-s`` of the run is spent (what was skipped is written down).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from benchmarks.bench_backbones import example_group, random_backbone
from benchmarks.common import machine_line
from g2g_model.backbones.mapanything.config import MapAnythingV1Config, preset
from g2g_model.covisibility.model import CovisibilityConfig, CovisibilityDecoder
from g2g_model.covisibility.scoring import score_matrix
from g2g_model.estimation.groups import PreparedGroup
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.model.config import preset as g2g_preset
from g2g_model.model.g2g import G2GModel

PAPER_MS = 49.8  # 5+5 end to end, RTX 4090 (the paper)
GOAL_FACTOR = 1.5
TINY_BACKBONE = MapAnythingV1Config(
    image_size=(112, 112), encoder_dim=64, encoder_depth=2, encoder_heads=2,
    ray_intermediate_dims=(8, 12, 16), global_intermediate_dims=(8, 16, 32), info_dim=32,
    info_depth=4, info_heads=2)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{props.name} ({props.total_memory / 2**30:.0f} GiB), CUDA {torch.version.cuda}"
    return f"CPU: {machine_line()}"


class Clock:
    """Wall time of a callable, synchronised with the device."""

    def __init__(self, device: torch.device):
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def time(self, fn: Callable[[], object]) -> float:
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - start


def summary_ms(times: List[float]) -> Dict[str, float]:
    ms = sorted(1e3 * t for t in times)
    return {"median_ms": statistics.median(ms), "mean_ms": statistics.fmean(ms),
            "p90_ms": ms[min(len(ms) - 1, int(0.9 * len(ms)))], "min_ms": ms[0], "n": len(ms)}


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    # Process high-water mark (KiB on Linux); on the CPU it covers the whole run so far.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def groups(frames: int, size: int, device: torch.device):
    out = []
    for seed in (0, 1):
        images, intrinsics, poses = example_group(frames, size, seed)
        out.append(PreparedGroup(images=images.to(device), intrinsics=intrinsics.to(device),
                                 cam_to_anchor=poses.to(device), anchor_to_world=np.eye(4)))
    return out


def run_check(out: pathlib.Path, device: str = "cuda", dry_run: bool = False,
              frames: int = 5, warmup: int = 5, reps: int = 30, budget_s: float = 240.0,
              map_frames: int = 64, query_frames: int = 5) -> dict:
    dev = torch.device(device)
    started = time.perf_counter()
    config = TINY_BACKBONE if dry_run else preset("full")
    backbone = random_backbone(config).to(dev)
    g2g = G2GModel(g2g_preset("tiny" if dry_run else "paper", max_frames=frames,
                              input_dim=backbone.feature_dim))
    pipe = G2GPipeline(backbone, g2g, device=device, bf16=False, untrained=True)
    size = config.image_size[0]
    group_a, group_b = groups(frames, size, dev)
    covis = CovisibilityDecoder(CovisibilityConfig(
        in_dim=backbone.feature_dim, grid_hw=(size // 14, size // 14))).to(dev).eval()
    clock = Clock(dev)
    result = {"device": device_name(dev), "dry_run": dry_run, "frames": frames,
              "image_size": size, "backbone_config": config.to_dict(),
              "g2g_preset": "tiny" if dry_run else "paper", "precisions": {}, "skipped": []}

    def left() -> float:
        return budget_s - (time.perf_counter() - started)

    for precision in ("fp32", "bf16"):
        if left() <= 0:
            result["skipped"].append(f"{precision}: budget of {budget_s:.0f} s spent")
            continue
        pipe.bf16 = precision == "bf16"
        reset_peak(dev)
        row: Dict[str, object] = {}
        stages: Dict[str, List[float]] = {"backbone": [], "modules": [], "total": []}
        features = {}

        def step() -> None:
            t0 = clock.time(lambda: features.update(a=pipe.encode(group_a),
                                                    b=pipe.encode(group_b)))
            t1 = clock.time(lambda: pipe.run_features(features["a"], features["b"]))
            stages["backbone"].append(t0)
            stages["modules"].append(t1)
            stages["total"].append(t0 + t1)

        for _ in range(warmup):
            step()
        for key in stages:
            stages[key].clear()
        while len(stages["total"]) < reps and (left() > 0 or len(stages["total"]) < 3):
            step()
        row["latency_5p5"] = {k: summary_ms(v) for k, v in stages.items()}

        frames_in = [group_a.images[0, i % frames].permute(1, 2, 0).mul(255).byte().cpu()
                     .numpy() for i in range(map_frames)]
        k = group_a.intrinsics[0, 0].cpu().numpy()
        pipe.encode_frames(frames_in[:4], k)  # warm-up of the batch shapes
        seconds = clock.time(lambda: features.update(map=pipe.encode_frames(frames_in, k)))
        row["features_per_s"] = map_frames / seconds

        tokens_map = features["map"].to(dev)
        tokens_query = tokens_map[:query_frames]
        score_matrix(covis, tokens_map[:8], tokens_query, bf16=pipe.bf16)  # warm-up
        seconds = clock.time(lambda: score_matrix(covis, tokens_map, tokens_query,
                                                  bf16=pipe.bf16))
        row["covisibility_pairs_per_s"] = map_frames * query_frames / seconds
        row["peak_memory_mib"] = peak_mib(dev)
        result["precisions"][precision] = row
    bf16 = result["precisions"].get("bf16")
    if bf16 is not None and not dry_run:
        median = bf16["latency_5p5"]["total"]["median_ms"]
        result["goal"] = {"paper_ms": PAPER_MS, "factor": median / PAPER_MS,
                          "met": median <= GOAL_FACTOR * PAPER_MS}
    result["wall_s"] = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "RESULTS_gpu.md").write_text(render(result, sys.argv[1:]))
    return result


def render(result: dict, argv: Sequence[str]) -> str:
    lines = [
        "# GPU check: the paper's model (random weights, full size)" if not result["dry_run"]
        else "# GPU check: DRY RUN (tiny sizes; the figures say nothing about speed)",
        "", f"Command: `python -m benchmarks.gpu_check {' '.join(argv)}`", "",
        f"Device: {result['device']}", "",
        f"{result['frames']}+{result['frames']} frames at {result['image_size']} px, "
        f"G2G preset {result['g2g_preset']}.", "",
        "| precision | 5+5 total ms (median / p90) | backbone ms | modules ms | features/s "
        "| covisibility pairs/s | peak memory MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in result["precisions"].items():
        lat = row["latency_5p5"]
        lines.append(
            f"| {name} | {lat['total']['median_ms']:.1f} / {lat['total']['p90_ms']:.1f} | "
            f"{lat['backbone']['median_ms']:.1f} | {lat['modules']['median_ms']:.2f} | "
            f"{row['features_per_s']:.1f} | {row['covisibility_pairs_per_s']:.0f} | "
            f"{row['peak_memory_mib']:.0f} |")
    if "goal" in result:
        goal = result["goal"]
        lines += ["", f"Paper: {goal['paper_ms']} ms (RTX 4090, 5+5 end to end). bf16 here: "
                  f"{goal['factor']:.2f}x of it; goal (within {GOAL_FACTOR}x): "
                  f"{'met' if goal['met'] else 'NOT met'}."]
    for note in result["skipped"]:
        lines.append(f"\nSkipped: {note}")
    lines.append(f"\nWall time of the check: {result['wall_s']:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for gpu_check.json, RESULTS_gpu.md")
    parser.add_argument("--device", default=None, help="default cuda (cpu with --dry-run)")
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny sizes: checks the script, not the speed")
    parser.add_argument("--frames", type=int, default=5, help="frames per group (paper: 5)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--budget-s", type=float, default=240.0,
                        help="stop timing once the run has taken this long")
    parser.add_argument("--map-frames", type=int, default=64,
                        help="frames for features/s and map rows for covisibility pairs/s")
    args = parser.parse_args(argv)
    device = args.device or ("cpu" if args.dry_run else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("no CUDA device here; use --dry-run (tiny sizes on the CPU)")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (MapAnything turns TF32 on)
    result = run_check(pathlib.Path(args.out), device, args.dry_run, args.frames, args.warmup,
                       args.reps, args.budget_s, args.map_frames)
    print((pathlib.Path(args.out) / "RESULTS_gpu.md").read_text())
    return 0 if result["precisions"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
