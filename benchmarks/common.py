"""Helpers shared by the benchmarks: machine description, timing, matmul peak, FLOP counting.

Every benchmark prints :func:`machine_info` with its figures and compares against a baseline
measured in the same run (a matmul peak, or another method), since these machines are noisy.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

import torch

#: The repository's root: commands written into results are shown relative to it.
ROOT = Path(__file__).resolve().parents[1]
DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    wanted = [f for f in flags if f.startswith(("avx512", "amx")) or f == "avx2"]
                    return " ".join(sorted(wanted)) or "none of avx2/avx512/amx"
    except OSError:
        pass
    return "unknown"


def machine_info() -> List[str]:
    bf16_native = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: "unknown")()
    return [
        f"- platform: {platform.platform()}; processor: {platform.processor() or 'n/a'}",
        f"- CPU model (/proc/cpuinfo): {cpu_model()}; logical CPUs: {os.cpu_count()}",
        f"- SIMD flags: {cpu_flags()}; torch CPU capability: "
        f"{torch.backends.cpu.get_cpu_capability()}; oneDNN native bf16: {bf16_native}",
        f"- torch {torch.__version__}, threads: {torch.get_num_threads()}, "
        f"python {platform.python_version()}",
    ]


def machine_line() -> str:
    """:func:`machine_info` in one line, with the load average (for console output)."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"{cpu_model()} x {os.cpu_count()} ({cpu_flags()}) | {platform.platform()} | "
            f"python {platform.python_version()} | torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads | load average {load}")


def cpu_sdpa_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FLOPs of the fused CPU attention kernel (QK^T and AV), which FlopCounterMode omits."""
    batch, heads, queries, head_dim = query_shape
    keys = key_shape[-2]
    return 2 * batch * heads * queries * keys * (head_dim + value_shape[-1])


FLOP_FORMULAS = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa_flops}


def timed(fn, warmup: int, reps: int, budget_s: float, min_runs: int = 3) -> List[float]:
    """Wall times (s) of ``fn()``; stops early after ``budget_s`` once ``min_runs`` are done."""
    for _ in range(warmup):
        fn()
    times: List[float] = []
    start = time.perf_counter()
    while len(times) < reps:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_runs and time.perf_counter() - start > budget_s:
            break
    return times


def matmul_peak(dtype: torch.dtype, reps: int, budget_s: float, size: int = 2048) -> float:
    """Best FLOP/s of a size x size matmul in ``dtype``."""
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    times = timed(lambda: torch.mm(a, b), warmup=1, reps=reps, budget_s=budget_s)
    return 2.0 * size ** 3 / min(times)


def from_root(text: str) -> str:
    """``text`` (a command line) with the repository's absolute path taken out of its paths, so
    that a command written into a results file is the one to type from the repository's root
    on any machine."""
    return text.replace(f"{ROOT}{os.sep}", "")


def emit_report(title: str, module: str, argv: Optional[Sequence[str]], body: str,
                output: Optional[str]) -> str:
    """``# title``, the command that produced it, then ``body``: printed, and written to
    ``output`` when given. Returns the text."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = f"# {title}\n\nCommand: `python -m {module} {' '.join(args)}`\n\n{body}\n"
    print(text)
    if output:
        with open(output, "w") as fh:
            fh.write(text)
    return text
