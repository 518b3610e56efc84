"""`make bench`: run every benchmark once with its default settings, one after the other.

Each benchmark prints its figures with the machine description; the committed results and the
exact commands that produced them are in `benchmarks/RESULTS_*.md`. The node benchmark runs for
2 minutes per rate (5 and 10 Hz), the memory soak (needs `make demo` first) for 8 minutes, the
long traversals about 25 minutes (2 cores); `--quick` gives them 60 s per rate, 3 minutes and
50 m traversals.
"""

from __future__ import annotations

import argparse
import importlib
import sys

BENCHMARKS = ["bench_sim", "bench_compact", "bench_g2g", "bench_covisibility",
              "bench_backbones", "bench_nodes", "bench_soak", "bench_replay_dds",
              "bench_real_reloc", "bench_long_traversal"]
QUICK = {"bench_nodes": ["--duration", "60"], "bench_soak": ["--duration", "180"],
         "bench_replay_dds": ["--repeats", "1"], "bench_long_traversal": ["--length", "50"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="short node benchmark, soak and traversals (60 s per rate, "
                        "3 min, 50 m)")
    parser.add_argument("--only", nargs="*", choices=BENCHMARKS, default=None)
    opts = parser.parse_args(argv)
    failed = []
    for name in opts.only or BENCHMARKS:
        print(f"\n===== {name} =====", flush=True)
        args = QUICK.get(name, []) if opts.quick else []
        try:
            code = importlib.import_module(f"benchmarks.{name}").main(args)
        except Exception as exc:  # one broken benchmark must not hide the others' figures
            print(f"{name} failed: {exc!r}")
            code = 1
        if code:
            failed.append(name)
    if failed:
        print(f"\nfailed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
