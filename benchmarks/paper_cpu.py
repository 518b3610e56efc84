"""The paper's model at full size on this CPU, once: time and peak memory.

Full-size MapAnything V1 (random weights, built on the meta device and filled in place, as
``bench_backbones`` does) + the paper preset (W = 5) behind ``G2GPipeline``:

* ``G2GPipeline.predict`` on a 5+5 pair of 224x224 groups (prepare, encode both, modules);
* ``G2GPipeline.encode_frames`` on single frames: what ``g2g-map build`` and ``map_builder``
  spend per keyframe.

Not part of the test suite (minutes on 2 cores, about 3 GB of memory).

    python -m benchmarks.paper_cpu --precision fp32 --repeats 2 --map-frames 8
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Optional, Sequence

import numpy as np

from benchmarks.bench_backbones import random_backbone
from benchmarks.common import machine_line
from g2g_model.backbones.mapanything.config import preset
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.model.config import preset as g2g_preset
from g2g_model.model.g2g import G2GModel


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def group(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    poses = np.tile(np.eye(4), (n, 1, 1))
    poses[:, 0, 3] = np.arange(n) * 0.5
    k = np.array([[200.0, 0, 112], [0, 200.0, 112], [0, 0, 1]])
    return {"images": rng.integers(0, 255, (n, 224, 224, 3), dtype=np.uint8),
            "intrinsics": np.broadcast_to(k, (n, 3, 3)).copy(), "cam_to_world": poses}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--repeats", type=int, default=2, help="timed predict calls")
    parser.add_argument("--map-frames", type=int, default=8, help="frames for encode_frames")
    args = parser.parse_args(argv)
    print(f"machine: {machine_line()}")
    t0 = time.perf_counter()
    backbone = random_backbone(preset("full"))
    model = G2GModel(g2g_preset("paper", max_frames=5))
    pipe = G2GPipeline(backbone, model, bf16=args.precision == "bf16", untrained=True)
    params = sum(p.numel() for p in pipe.backbone.parameters())
    print(f"built in {time.perf_counter() - t0:.1f} s: backbone {params:,} parameters, "
          f"G2G {sum(p.numel() for p in model.parameters()):,}; peak RSS "
          f"{peak_rss_mib():.0f} MiB")
    a, b = group(5, 0), group(5, 1)
    for index in range(args.repeats + 1):
        pred = pipe.predict(a, b)
        label = "warm-up" if index == 0 else f"run {index}"
        print(f"predict 5+5 {args.precision} ({label}): " + ", ".join(
            f"{k} {v / 1e3:.2f} s" for k, v in pred.timing_ms.items())
            + f"; peak RSS {peak_rss_mib():.0f} MiB")
    frames = list(group(args.map_frames, 2)["images"])
    k = group(1, 0)["intrinsics"][0]
    start = time.perf_counter()
    pipe.encode_frames(frames, k, batch_size=4)
    elapsed = time.perf_counter() - start
    print(f"encode_frames {args.map_frames} frames {args.precision}: {elapsed:.1f} s "
          f"({args.map_frames / elapsed:.2f} frames/s, what map building spends per keyframe); "
          f"peak RSS {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
