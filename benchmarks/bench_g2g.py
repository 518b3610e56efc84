"""G2G trainable modules and the whole pipeline on this CPU.

1. Trainable modules only (resampler + bridge + pose head), 5+5 frames, presets ``paper``
   (P=256, D=768: MapAnything features) and ``small`` (P=196, D=192: compact features), fp32
   and bf16 autocast: median latency, FLOPs (torch's FlopCounterMode, plus the fused CPU
   attention kernel it omits), achieved FLOP/s as a fraction of a 2048x2048 matmul peak measured
   in the same run and dtype.
2. One G2G pass (compact backbone + small G2G, 5+5 frames of 224x224 simulator images) versus
   the classical baseline (SIFT + RANSAC on all 25 cross pairs) on the same input: ratio.
3. ``--pipelines``: whole 5+5 predictions of the default and given checkpoints, and the frozen
   MobileNetV2 trunk under them (batch norms folded, channels last, as it runs) against the
   plain network as the baseline, on the same frames.
4. ``--pairs ROOT INDEX``: whole predictions of the relocalization default on the groups of a
   ``g2g-eval`` pair index (e.g. the real validation pairs of ``tools/make_real_val.py``, where
   the joint solve runs), against the same pipeline with the plain trunk, pair by pair.

    python -m benchmarks.bench_g2g --output benchmarks/RESULTS_g2g.md
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import List, Optional

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.common import (DTYPES, FLOP_FORMULAS, emit_report, machine_info, matmul_peak,
                               timed)
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel

CASES = {"paper": (256, 768), "small": (196, 192)}
# What previous_version() undoes.
PREVIOUS = "the trunk's convolutions and ReLU6 apart, torch's batch-first attention layout"


def bench_modules(name: str, dtype_name: str, reps: int, budget_s: float) -> dict:
    patches, dim = CASES[name]
    model = G2GModel(preset(name, input_dim=dim, max_frames=5)).eval()
    fa, fb = torch.randn(1, 5, patches, dim), torch.randn(1, 5, patches, dim)
    dtype = DTYPES[dtype_name]
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None)
    # FLOPs are counted with autograd on: FlopCounterMode's module tracker needs grad_fns, which
    # inference mode does not create. Timing runs in inference mode.
    counter = FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)
    with autocast, counter:
        model(fa, fb)
    with torch.inference_mode(), autocast:
        times = timed(lambda: model(fa, fb), warmup=1, reps=reps, budget_s=budget_s)
    return {"flops": float(counter.get_total_flops()), "median_s": statistics.median(times),
            "runs": len(times)}


def sim_groups(seed: int = 20010):
    """Two 5-frame groups of one simulated camera, a few metres apart, from a test scene."""
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.data.sim.generate import SimConfig, generate_trajectory

    out = tempfile.mkdtemp(prefix="g2g_bench_")
    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=1, frames=30,
                    with_depth=False)
    reader = TrajectoryReader(generate_trajectory(out, seed=seed, traversal=0, cfg=cfg)["path"])
    k = reader.rig["cam0"].K
    poses = reader.world_T_cam("cam0")

    def group(idx):
        return {"images": [reader.image("cam0", i) for i in idx], "intrinsics": k,
                "cam_to_world": poses[idx]}

    return group(list(range(0, 10, 2))), group(list(range(12, 22, 2)))


def bench_pipeline_vs_classical(reps: int, budget_s: float) -> List[str]:
    from g2g_model.assets import default_checkpoint
    from g2g_model.baseline.classical import ClassicalBaseline
    from g2g_model.estimation.pipeline import G2GPipeline

    ga, gb = sim_groups()
    pipeline = G2GPipeline.default("relocalization")
    baseline = ClassicalBaseline()
    g2g = timed(lambda: pipeline.predict(ga, gb), warmup=1, reps=reps, budget_s=budget_s)
    both = pipeline.both_directions
    pipeline.both_directions = False  # the baseline of the second direction's cost
    one_way = timed(lambda: pipeline.predict(ga, gb), warmup=1, reps=reps, budget_s=budget_s)
    pipeline.both_directions = both
    before = previous_version(str(default_checkpoint("relocalization"))) \
        if not pipeline.untrained else None
    previous = (timed(lambda: before.predict(ga, gb), warmup=1, reps=reps, budget_s=budget_s)
                if before is not None else None)
    cls = timed(lambda: baseline.predict((ga["images"], ga["intrinsics"], ga["cam_to_world"]),
                                         (gb["images"], gb["intrinsics"], gb["cam_to_world"])),
                warmup=0, reps=max(3, reps // 2), budget_s=budget_s)
    g, c = statistics.median(g2g), statistics.median(cls)
    weights = ("RANDOM weights (no default checkpoint)" if pipeline.untrained
               else "embedded default")
    return [
        "## One G2G pass vs the classical baseline (5+5 frames, 224x224, same input)",
        f"- G2G (compact backbone + small head, {weights}, bf16={pipeline.bf16}): "
        f"median {1e3 * g:.0f} ms over {len(g2g)} runs ({'both ways' if both else 'one way'})",
        f"- the same, one way: median {1e3 * statistics.median(one_way):.0f} ms over "
        f"{len(one_way)} runs; ratio {g / statistics.median(one_way):.2f}x",
        *([f"- the same as it ran before 2026-11-30 ({PREVIOUS}): median "
           f"{1e3 * statistics.median(previous):.0f} ms over {len(previous)} runs; ratio "
           f"{statistics.median(previous) / g:.2f}x"] if previous else []),
        f"- classical (SIFT + RANSAC essential matrix on 25 pairs): median {1e3 * c:.0f} ms "
        f"over {len(cls)} runs",
        f"- ratio classical / G2G: {c / g:.1f}x",
    ]


def bench_pipelines(checkpoints: List[str], reps: int, budget_s: float) -> List[str]:
    """5+5 predictions of the embedded default and of candidate checkpoints, timed round-robin
    on the same input (each as the product loads it: ``bf16="auto"``), with the default as the
    baseline of the ratios; a checkpoint that matches its rotation also runs without
    (``rotation_matching=False``) and with the joint (parallax) solve run on every pair
    (``parallax_share=1``: its cost where groups stand far apart; these groups do not) and with
    the frozen trunk run as the plain network (the baseline of its folded, channels-last copy);
    every checkpoint also runs as before 2026-11-30 (:func:`previous_version`), and the
    matching's own share is a column."""
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.assets import default_checkpoint
    from g2g_model.estimation.rotation_matching import MatchingConfig

    ga, gb = sim_groups()
    names = [str(default_checkpoint("relocalization"))] + list(checkpoints)
    runs = []
    for name in names:
        pipe = G2GPipeline.from_checkpoint(name)
        runs.append((name, "", pipe))
        if pipe.rotation_matcher is not None:
            runs.append((name, " without rotation matching",
                         G2GPipeline.from_checkpoint(name, rotation_matching=False)))
            always = MatchingConfig(**{**vars(pipe.rotation_matcher.config),
                                       "parallax_share": 1.0})
            runs.append((name, " with the parallax solve on every pair",
                         G2GPipeline.from_checkpoint(name, rotation_matching=always)))
            plain = G2GPipeline.from_checkpoint(name)
            trunk = plain.rotation_matcher.trunk  # shared with the backbone
            trunk.forward = trunk.plain_forward
            runs.append((name, " with the plain trunk (batch norms, channels first)", plain))
        runs.append((name, f" as before 2026-11-30 ({PREVIOUS})", previous_version(name)))
    for _, _, pipe in runs:  # warm-up
        pipe.predict(ga, gb)
    times: List[List[float]] = [[] for _ in runs]
    match: List[List[float]] = [[] for _ in runs]
    start = time.perf_counter()
    for _ in range(reps):
        for (_, _, pipe), row, m in zip(runs, times, match):
            t0 = time.perf_counter()
            pred = pipe.predict(ga, gb)
            row.append(time.perf_counter() - t0)
            m.append(pred.timing_ms.get("match", 0.0))
        if len(times[0]) >= 3 and time.perf_counter() - start > budget_s * len(runs):
            break
    base = statistics.median(times[0])
    lines = ["## Whole predictions, 5+5 frames of 224x224 simulator images (round-robin)",
             "| checkpoint | backbone | image px | bf16 | median ms | min ms | of it rotation "
             "matching (median ms) | runs | vs default |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (name, what, pipe), row, m in zip(runs, times, match):
        cfg = (pipe.header or {}).get("backbone", {}).get("config", {})
        lines.append(f"| `{'/'.join(pathlib.Path(name).parts[-2:])}`{what} | "
                     f"{cfg.get('stem', '?')} | {cfg.get('image_size', '?')} | {pipe.bf16} | "
                     f"{1e3 * statistics.median(row):.1f} | {1e3 * min(row):.1f} | "
                     f"{statistics.median(m):.1f} | {len(row)} | "
                     f"{statistics.median(row) / base:.2f}x |")
    return lines


def previous_version(checkpoint: str):
    """The pipeline of ``checkpoint`` as it ran before 2026-11-30, the baseline of that day's
    two changes: its trunk's convolutions and ReLU6 as separate ops
    (``fast_features(fused=False)``) and the modules' attention on torch's own batch-first
    layout (``nn.MultiheadAttention.forward``)."""
    import functools

    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.model.layers import BatchFirstAttention

    pipe = G2GPipeline.from_checkpoint(checkpoint)
    for module in pipe.model.modules():
        if isinstance(module, BatchFirstAttention):
            module.forward = functools.partial(torch.nn.MultiheadAttention.forward, module)
    trunk = getattr(getattr(pipe.backbone, "stem", None), "trunk", None)
    if trunk is not None:
        trunk.forward = functools.partial(folded_forward, trunk)
    return pipe


def folded_forward(trunk, images: torch.Tensor) -> torch.Tensor:
    """The trunk's folded, channels-last copy with convolutions and ReLU6 as separate ops (under
    autocast, the convolutions cast their fp32 weights): the fast path before 2026-11-30."""
    return trunk.fast_features(fused=False)(trunk.normalized(images))


def bench_trunk(reps: int, budget_s: float) -> List[str]:
    """The frozen MobileNetV2 trunk on 10 frames (5+5) at the backbone's 112 px and the rotation
    matcher's 160 px, fp32 and bf16 autocast: as it runs (folded, channels last) against the
    plain network (the baseline of the ratio), interleaved."""
    from g2g_model.backbones.mobilenet_v2 import MobileNetV2Trunk

    trunk = MobileNetV2Trunk(16)
    lines = ["## Frozen MobileNetV2 trunk, 10 frames (interleaved runs)",
             "| frames | dtype | plain network ms | folded, channels last, separate ops ms | "
             "as it runs (also fused) ms | speed-up over plain / over separate | max abs "
             "difference from fp32 plain: plain / separate / as it runs |",
             "|---|---|---|---|---|---|---|"]
    for size in (112, 160):
        images = torch.rand(10, 3, size, size, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            reference = trunk.plain_forward(images)
        for dtype_name in ("fp32", "bf16"):
            cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype_name == "bf16")
            with torch.inference_mode(), cast:
                ways = (lambda: trunk.plain_forward(images),
                        lambda: folded_forward(trunk, images), lambda: trunk(images))
                diffs = [float((fn().float() - reference).abs().max()) for fn in ways]
                rows: List[List[float]] = [[] for _ in ways]
                start = time.perf_counter()
                while len(rows[0]) < reps:
                    for row, fn in zip(rows, ways):
                        t0 = time.perf_counter()
                        fn()
                        row.append(time.perf_counter() - t0)
                    if len(rows[0]) >= 3 and time.perf_counter() - start > budget_s:
                        break
            base, separate, fast = (statistics.median(row) for row in rows)
            lines.append(f"| {size} x {size} | {dtype_name} | {1e3 * base:.1f} | "
                         f"{1e3 * separate:.1f} | {1e3 * fast:.1f} | {base / fast:.2f}x / "
                         f"{separate / fast:.2f}x | "
                         + " / ".join(f"{d:.1e}" for d in diffs) + " |")
    return lines


def bench_pairs(root: str, index: str, max_pairs: int) -> List[str]:
    """Whole predictions of the relocalization default (as the product loads it) on the groups
    of a pair index (at the model's input size, as maps store keyframes), against the same
    pipeline with the plain trunk, interleaved pair by pair (alternating which runs first)."""
    from g2g_model.estimation.groups import PreparedGroup
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.assets import default_checkpoint
    from g2g_model.training.pair_dataset import read_pairs
    from g2g_model.training.trajectory_groups import TrajectoryStore

    fast, plain = (G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
                   for _ in range(2))
    trunk = plain.rotation_matcher.trunk  # shared with the backbone
    trunk.forward = trunk.plain_forward
    items = read_pairs("reloc", root, index, 0.0, max_pairs, 0, 0.0)
    store = TrajectoryStore(root, fast.image_size)

    def prepared(spec):
        group = store.load(spec)
        return PreparedGroup(group.images[None], group.intrinsics[None],
                             group.cam_to_anchor[None].float(), np.eye(4))

    rows = {"fast": [], "plain": [], "match": [], "parallax": 0}
    sizes = set()
    first = prepared(items[0].spec_a), prepared(items[0].spec_b)
    fast.predict_prepared(*first)  # warm-up of both
    plain.predict_prepared(*first)
    for n, item in enumerate(items):
        a, b = prepared(item.spec_a), prepared(item.spec_b)
        sizes.add((a.images.shape[1], b.images.shape[1], *a.images.shape[-2:]))
        order = (("fast", fast), ("plain", plain))
        for name, pipe in order if n % 2 == 0 else order[::-1]:  # alternate who goes first
            t0 = time.perf_counter()
            pred = pipe.predict_prepared(a, b)
            rows[name].append(time.perf_counter() - t0)
            if pipe is fast:
                rows["match"].append(pred.timing_ms.get("match", 0.0))
                rows["parallax"] += bool(pred.rotation_match is not None
                                         and pred.rotation_match.parallax)
    q = {k: np.percentile(np.asarray(rows[k]) * 1e3, [50, 90]) for k in ("fast", "plain")}
    return [f"## Whole predictions on {len(items)} pairs of {root}/{index} "
            f"(frames A + B, h x w: {sorted(sizes)}; bf16={fast.bf16})",
            "| pipeline | median ms | p90 ms | max ms |", "|---|---|---|---|",
            f"| default | {q['fast'][0]:.1f} | {q['fast'][1]:.1f} | "
            f"{1e3 * max(rows['fast']):.1f} |",
            f"| default with the plain trunk (baseline) | {q['plain'][0]:.1f} | "
            f"{q['plain'][1]:.1f} | {1e3 * max(rows['plain']):.1f} |",
            f"- ratio of medians {q['fast'][0] / q['plain'][0]:.2f}x; rotation matching's "
            f"median {np.median(rows['match']):.1f} ms; pose solved with parallax on "
            f"{rows['parallax']} of {len(items)} pairs"]


def run(reps: int, budget_s: float, dtypes: List[str]) -> str:
    lines = ["## Machine", *machine_info(),
             f"- load average before: {os.getloadavg()[0]:.2f} (1 min)", ""]
    peaks = {name: matmul_peak(DTYPES[name] or torch.float32, reps=10, budget_s=budget_s)
             for name in dtypes}
    lines.append("## Matmul peak (2048x2048, best run)")
    lines += [f"- {name}: {peaks[name] / 1e9:.1f} GFLOP/s" for name in dtypes]
    lines += ["", "## Trainable modules, 5+5 frames",
              "| preset | P x D | dtype | GFLOP | median ms | GFLOP/s | % of matmul peak |",
              "|---|---|---|---|---|---|---|"]
    for name in CASES:
        for dtype_name in dtypes:
            r = bench_modules(name, dtype_name, reps, budget_s)
            rate = r["flops"] / r["median_s"]
            lines.append(f"| {name} | {CASES[name][0]} x {CASES[name][1]} | {dtype_name} | "
                         f"{r['flops'] / 1e9:.2f} | {1e3 * r['median_s']:.1f} | "
                         f"{rate / 1e9:.1f} | {100 * rate / peaks[dtype_name]:.0f} % |")
    if "bf16" in dtypes and peaks["bf16"] < 0.2 * peaks.get("fp32", peaks["bf16"]):
        lines += ["", "Note: this CPU has no native bf16 (AVX2 only): the bf16 matmul peak is "
                  "emulated and tiny, so bf16 percentages are not utilisation (they can exceed "
                  "100 % because autocast keeps many ops in fp32). Use fp32 here."]
    lines += ["", *bench_pipeline_vs_classical(reps, budget_s), "",
              f"load average after: {os.getloadavg()[0]:.2f} (1 min)"]
    return "\n".join(lines) + "\n"


def with_machine(sections) -> str:
    """Report body: the machine and its load, the lines of ``sections()``, the load after."""
    before = os.getloadavg()[0]
    lines = sections()
    after = os.getloadavg()[0]
    return "\n".join(["## Machine", *machine_info(),
                      f"- load average before: {before:.2f} (1 min)", "", *lines, "",
                      f"load average after: {after:.2f} (1 min)"]) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=20.0)
    parser.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=list(DTYPES))
    parser.add_argument("--output", default=None, help="also write the report here")
    parser.add_argument("--pipelines", nargs="*", default=None, metavar="CKPT",
                        help="only time whole 5+5 predictions: the embedded default, then these "
                             "checkpoints, round-robin")
    parser.add_argument("--pairs", nargs=2, default=None, metavar=("ROOT", "INDEX"),
                        help="only time whole predictions of the relocalization default on the "
                             "groups of this g2g-eval pair index (section 4)")
    parser.add_argument("--max-pairs", type=int, default=60)
    opts = parser.parse_args(argv)
    if opts.pairs is not None:
        body = with_machine(lambda: bench_pairs(*opts.pairs, opts.max_pairs))
    elif opts.pipelines is not None:
        body = with_machine(lambda: [*bench_pipelines(opts.pipelines, opts.reps, opts.budget_s),
                                     "", *bench_trunk(opts.reps, opts.budget_s)])
    else:
        body = run(opts.reps, opts.budget_s, opts.dtypes)
    emit_report("G2G benchmark", "benchmarks.bench_g2g", argv, body, opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
