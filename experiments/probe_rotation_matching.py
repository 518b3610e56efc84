"""The pose from feature matches against G2G's own, on relocalization pairs, per setting.

For every pair (the selection and seed of `g2g-eval`), "no motion", the shipped pipeline's
T_{A0<-B0} without rotation matching, and
:class:`g2g_model.estimation.rotation_matching.RotationMatcher`
for every ``--describe-px`` x ``--inlier-deg`` x ``--subcell`` x ``--final-scale-deg`` x
``--translation-prior`` x ``--parallax-share`` x ``--parallax-gain`` on the groups as the
pipeline gives them (loaded at the model's input size, clean input poses; G2G's pose as the
prior and where the matcher declines, as the pipeline does; ``--prior none`` puts "no motion"
in G2G's place: what matching gives without the trained modules). Prints rotation error mean /
median / RRA@5 / worst and translation error mean / median per setting, how often the matcher
declined (then G2G's pose counts), how often it took the pose solved with parallax, and its
time per pair. Settings are chosen on training scenes and measured on the test scenes
(docs/TRAINING.md, "Pose from feature matches"):

    .venv/bin/python experiments/probe_rotation_matching.py --root data/sim_train168 \
        --index pairs_w5_all.json --max-pairs 200
"""

import argparse
import itertools
import time

import numpy as np
import torch

from g2g_model.metrics.errors import rotation_error_deg
from g2g_model.estimation.match_geometry import with_pose
from g2g_model.estimation.rotation_matching import MatchingConfig, RotationMatcher
from g2g_model.training.evaluate import G2GMethod
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.trajectory_groups import TrajectoryStore


def summary(name: str, errors, metres, extra: str = "") -> str:
    e, m = np.asarray(errors, float), np.asarray(metres, float)
    return (f"{name:34s} rot mean {e.mean():5.2f} median {np.median(e):5.2f}  "
            f"RRA@5 {100 * (e < 5).mean():3.0f} %  worst {e.max():5.1f}  "
            f"trans mean {m.mean():.3f} median {np.median(m):.3f}{extra}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--checkpoint", default="g2g_model/assets/g2g_reloc_mnv2.safetensors")
    p.add_argument("--max-pairs", type=int, default=100)
    p.add_argument("--describe-px", type=int, nargs="+", default=[112, 160, 192])
    p.add_argument("--inlier-deg", type=float, nargs="+", default=[6.0, 8.0, 10.0])
    p.add_argument("--subcell", type=int, nargs="+", default=[1], choices=[0, 1])
    p.add_argument("--final-scale-deg", type=float, nargs="+", default=[4.0])
    p.add_argument("--translation-prior", type=float, nargs="+", default=[1.0])
    p.add_argument("--prior", nargs="+", default=["g2g"], choices=["g2g", "none"])
    p.add_argument("--parallax-share", type=float, nargs="+",
                   default=[MatchingConfig.parallax_share])
    p.add_argument("--parallax-gain", type=float, nargs="+",
                   default=[MatchingConfig.parallax_gain])
    p.add_argument("--features", nargs="+", default=["mobilenetv2"],
                   choices=["mobilenetv2", "aliked_t16"])
    p.add_argument("--match-px", type=int, default=0,
                   help="load the frames the matcher describes at this square size (default: "
                        "the model's input size, as the pipeline gives them)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    items = read_pairs("reloc", args.root, args.index, 0.0, args.max_pairs, 0, 0.0)
    method = G2GMethod(args.checkpoint, no_rotation_matching=True)
    targets = PairDataset(items, TrajectoryStore(args.root, (1, 1)))
    store = TrajectoryStore(args.root, method.image_size)
    match_store = (TrajectoryStore(args.root, (args.match_px, args.match_px)) if args.match_px
                   else store)
    settings = list(itertools.product(args.describe_px, args.inlier_deg, args.subcell,
                                      args.final_scale_deg, args.translation_prior,
                                      args.parallax_share, args.parallax_gain, args.features,
                                      args.prior))
    matchers = {k: RotationMatcher(MatchingConfig(
        describe_px=k[0], inlier_deg=k[1], subcell=bool(k[2]), final_scale_deg=k[3],
        translation_prior=k[4], parallax_share=k[5], parallax_gain=k[6], features=k[7]))
        for k in settings}
    for k in settings:  # one matcher per setting but the prior, which is not the matcher's
        matchers[k] = matchers.get(k[:8] + ("g2g",), matchers[k])
    err = {k: [] for k in ["none", "g2g", *settings]}
    metres = {k: [] for k in err}
    declined = {k: 0 for k in settings}
    parallax = {k: 0 for k in settings}
    seconds = {k: 0.0 for k in settings}
    for i, item in enumerate(items):
        truth = targets.targets(i)[1][0]
        a, b = store.load(item.spec_a), store.load(item.spec_b)
        g2g = method.prediction(a, b, a.cam_to_anchor, b.cam_to_anchor).a0_T_b0
        if match_store is not store:
            a, b = match_store.load(item.spec_a), match_store.load(item.spec_b)
        for key, (rotation, position) in (("none", (np.eye(3), np.zeros(3))),
                                          ("g2g", (g2g[:3, :3], g2g[:3, 3]))):
            err[key].append(rotation_error_deg(rotation, truth[:3, :3]))
            metres[key].append(float(np.linalg.norm(position - truth[:3, 3])))
        for key in settings:
            t0 = time.perf_counter()
            prior = g2g if key[8] == "g2g" else np.eye(4)
            out = matchers[key].match(a.images, a.intrinsics, a.cam_to_anchor,
                                      b.images, b.intrinsics, b.cam_to_anchor, prior)
            seconds[key] += time.perf_counter() - t0
            declined[key] += out.rotation is None
            parallax[key] += out.parallax
            pose = prior if out.rotation is None else with_pose(prior, np.eye(4)[None],
                                                                out.rotation, out.translation)[0]
            err[key].append(rotation_error_deg(pose[:3, :3], truth[:3, :3]))
            metres[key].append(float(np.linalg.norm(pose[:3, 3] - truth[:3, 3])))
    print(f"{len(items)} pairs of {args.root}/{args.index}; errors of T_A0<-B0 (deg, m)")
    print(summary("no motion", err["none"], metres["none"]))
    print(summary("G2G (both ways, shipped)", err["g2g"], metres["g2g"]))
    for key in settings:
        name = (f"{key[0]} px {key[1]:g} deg sub {key[2]} fin {key[3]:g} w {key[4]:g} "
                f"par {key[5]:g}/{key[6]:g} {key[7]}" + ("" if key[8] == "g2g" else " prior none"))
        print(summary(name, err[key], metres[key],
                      f"  declined {declined[key]}  parallax {parallax[key]}  "
                      f"{1e3 * seconds[key] / len(items):.0f} ms"))


if __name__ == "__main__":
    main()
