"""`make bench`: run every benchmark once with its default settings, one after the other.

Each benchmark prints its figures with the machine description; the committed results and the
exact commands that produced them are in `benchmarks/RESULTS_*.md`. The node benchmark runs for
10 minutes; pass `--quick` to give it 60 s.
"""

from __future__ import annotations

import argparse
import importlib
import sys

BENCHMARKS = ["bench_sim", "bench_compact", "bench_g2g", "bench_covisibility",
              "bench_backbones", "bench_nodes"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short node benchmark (60 s)")
    parser.add_argument("--only", nargs="*", choices=BENCHMARKS, default=None)
    opts = parser.parse_args(argv)
    failed = []
    for name in opts.only or BENCHMARKS:
        print(f"\n===== {name} =====", flush=True)
        args = ["--duration", "60"] if (name == "bench_nodes" and opts.quick) else []
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
