"""The rotation from feature matches against G2G's own, on relocalization pairs, per setting.

For every pair (the selection and seed of `g2g-eval`), "no motion", the shipped pipeline's
T_{A0<-B0} without rotation matching, and :class:`g2g_model.rotation_matching.RotationMatcher`
for every ``--describe-px`` x ``--inlier-deg`` on the groups as the pipeline gives them (loaded
at the model's input size, clean input poses). Prints rotation error mean / median / RRA@5 /
worst per setting, how often the matcher declined (then G2G's rotation counts) and its time
per pair. Settings are chosen on training scenes and measured on the test scenes
(docs/TRAINING.md, "Session 23"):

    .venv/bin/python experiments/probe_rotation_matching.py --root data/sim_train168 \
        --index pairs_w5_all.json --max-pairs 200
"""

import argparse
import time

import numpy as np
import torch

from g2g_model.metrics.errors import rotation_error_deg
from g2g_model.rotation_matching import MatchingConfig, RotationMatcher
from g2g_model.training.evaluate import G2GMethod
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.trajectory_groups import TrajectoryStore


def summary(name: str, errors, extra: str = "") -> str:
    e = np.asarray(errors, float)
    return (f"{name:28s} mean {e.mean():5.2f}  median {np.median(e):5.2f}  "
            f"RRA@5 {100 * (e < 5).mean():3.0f} %  worst {e.max():6.1f}{extra}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--checkpoint", default="g2g_model/assets/g2g_reloc_mnv2.safetensors")
    p.add_argument("--max-pairs", type=int, default=100)
    p.add_argument("--describe-px", type=int, nargs="+", default=[112, 160, 192])
    p.add_argument("--inlier-deg", type=float, nargs="+", default=[6.0, 8.0, 10.0])
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    items = read_pairs("reloc", args.root, args.index, 0.0, args.max_pairs, 0, 0.0)
    method = G2GMethod(args.checkpoint, no_rotation_matching=True)
    targets = PairDataset(items, TrajectoryStore(args.root, (1, 1)))
    store = TrajectoryStore(args.root, method.image_size)
    settings = [(s, d) for s in args.describe_px for d in args.inlier_deg]
    matchers = {k: RotationMatcher(MatchingConfig(describe_px=k[0], inlier_deg=k[1]))
                for k in settings}
    err = {k: [] for k in ["none", "g2g", *settings]}
    declined = {k: 0 for k in settings}
    seconds = {k: 0.0 for k in settings}
    for i, item in enumerate(items):
        truth = targets.targets(i)[1][0][:3, :3]
        a, b = store.load(item.spec_a), store.load(item.spec_b)
        g2g = method.prediction(a, b, a.cam_to_anchor, b.cam_to_anchor).a0_T_b0[:3, :3]
        err["none"].append(rotation_error_deg(np.eye(3), truth))
        err["g2g"].append(rotation_error_deg(g2g, truth))
        for key in settings:
            t0 = time.perf_counter()
            out = matchers[key].match(a.images, a.intrinsics, a.cam_to_anchor,
                                      b.images, b.intrinsics, b.cam_to_anchor)
            seconds[key] += time.perf_counter() - t0
            declined[key] += out.rotation is None
            err[key].append(rotation_error_deg(g2g if out.rotation is None else out.rotation,
                                               truth))
    print(f"{len(items)} pairs of {args.root}/{args.index}; rotation error of T_A0<-B0, deg")
    print(summary("no motion", err["none"]))
    print(summary("G2G (both ways, shipped)", err["g2g"]))
    for key in settings:
        print(summary(f"matched at {key[0]} px, {key[1]:g} deg", err[key],
                      f"  declined {declined[key]}  {1e3 * seconds[key] / len(items):.0f} ms"))


if __name__ == "__main__":
    main()
