"""``g2g-eval``: evaluate checkpoints and / or the classical baseline on a pair index.

Examples::

    g2g-eval --task reloc --root data/sim_test --index pairs_w5.json \
        --checkpoint g2g_model/assets/g2g_reloc_mnv2.safetensors --classical default \
        --ablation --out outputs/eval_reloc
    g2g-eval --task rig --root data/sim_test --index rig_pairs.csv --checkpoint rig.safetensors \
        --mode noisy --out outputs/eval_rig_noisy
    g2g-eval --task rig --root data/sim_rw_test_street_car6 --index rig_car_steps.csv \
        --cameras front front_left front_right --checkpoint rig.safetensors --verify \
        --identity --out outputs/eval_car3

Writes, per method, ``metrics.md`` / ``metrics.csv`` (full metric suite with overlap bins),
``pairs.csv`` (per pair) and ``summary.json``; and ``comparison.md`` / ``.csv`` (B0 of every
method), ``paired.md`` (every method against the first plain checkpoint and each switch run
against the same run without it, pair by pair: mean difference, 95 % bootstrap interval, pairs
worse / better), ``maa_curve.png`` and ``error_vs_overlap.png`` for all methods together.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from g2g_model.training.evaluate import MODES, default_methods, evaluate_methods


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="g2g-eval", description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=("reloc", "rig"), required=True)
    p.add_argument("--root", required=True, help="collection root of the evaluation data")
    p.add_argument("--index", required=True, help="pair index, relative to --root")
    p.add_argument("--checkpoint", action="append", default=[], help="G2G checkpoint (repeat)")
    p.add_argument("--classical", nargs="?", const="default", default=None,
                   help="also evaluate the classical baseline (preset, default 'default')")
    p.add_argument("--ablation", action="store_true",
                   help="also evaluate every checkpoint without cross-group attention")
    p.add_argument("--directions", action="store_true",
                   help="also evaluate every checkpoint with its directions flipped: one way "
                   "where it runs both (relocalization), both where it runs one (rig odometry)")
    p.add_argument("--no-rotation-matching", action="store_true",
                   help="also evaluate every checkpoint with G2G's own pose where the "
                   "pipeline would take it from feature matches (relocalization; "
                   "g2g_model/estimation/rotation_matching.py)")
    p.add_argument("--identity", action="store_true",
                   help="also score the 'no motion' reference (B0 at A0)")
    p.add_argument("--constant-step", action="store_true",
                   help="also score one constant step, the per-axis median of the evaluated "
                   "pairs' true translations (chosen in hindsight: what a model that learnt "
                   "only the platform's usual motion would answer)")
    p.add_argument("--verify", action="store_true",
                   help="also score every checkpoint followed by geometric verification "
                   "('+verified') and the verification alone ('geometry'), with accepted share "
                   "and false accepts (verification.md)")
    p.add_argument("--relative-fallback", action="store_true",
                   help="with --verify on relocalization pairs: where the map window's "
                   "structure gives no pose, also try the query's anchor frame from its 2D-3D "
                   "and 2D-2D matches, then the relative pose between the windows (the "
                   "relocalize node's verify_relative_fallback, off by default)")
    p.add_argument("--mode", choices=MODES, default="clean", help="clean or noisy extrinsics")
    p.add_argument("--max-pairs", type=int, default=0, help="seeded subset (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reverse-fraction", type=float, default=0.0,
                   help="share of the pairs (seeded) with A and B exchanged, e.g. 1 for rig "
                   "odometry driving backwards (default 0: the index as it is)")
    p.add_argument("--cameras", nargs="+", metavar="NAME", default=None,
                   help="rig pairs: only these cameras of the rig, in this order (the first is "
                   "the anchor), e.g. a 3- or 5-camera subset of a 6-camera car rig "
                   "(default: all)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("-q", "--quiet", action="store_true")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    try:
        methods = default_methods(args.checkpoint, args.classical, args.ablation, args.identity,
                                  args.verify, args.directions, args.no_rotation_matching,
                                  args.constant_step, args.relative_fallback)
        results = evaluate_methods(args.task, args.root, args.index, methods, args.out,
                                   mode=args.mode, max_pairs=args.max_pairs, seed=args.seed,
                                   device=args.device,
                                   progress=not args.quiet and sys.stderr.isatty(),
                                   reverse_fraction=args.reverse_fraction,
                                   cameras=args.cameras)
    except ValueError as exc:
        print(f"g2g-eval: error: {exc}", file=sys.stderr)
        return 2
    for name in ("comparison.md", "paired.md", "verification.md"):
        if os.path.exists(os.path.join(args.out, name)):
            with open(os.path.join(args.out, name)) as fh:
                print(fh.read())
    print(json.dumps({k: v["b0"]["all"] for k, v in results.items()}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
