"""Does combining a relocalization checkpoint's outputs improve its B0 estimate?

G2G predicts every frame of group B relative to A0. With B's intra-group poses known, each
prediction T_{A0<-Bj} composed with T_{Bj<-B0} is an estimate of T_{A0<-B0}; a second pass with
the groups exchanged (B anchors) gives T_{B0<-Aj}, whose inverses are more estimates. This
probe scores, on the pairs `g2g-eval` uses (same selection and seed), frame B0's own prediction
("raw"), the mean over B's frames ("b frames"), raw averaged with the swapped pass's A0 ("swap")
and the mean over all estimates of both passes ("both"). The pipeline's answer, and so what the
nodes use and `g2g-eval` scores, is "raw" for a checkpoint that runs one way and "both" for one
that runs both; the other estimates only enter the nodes' spread checks (why not "b frames" one
way: docs/TRAINING.md, "Rig odometry").
Rotations are averaged with the chordal mean (`geometry.fuse_poses`), translations
arithmetically.

    .venv/bin/python experiments/probe_consensus.py --root data/sim_test --index pairs_w5.json \
        --checkpoint g2g_model/assets/g2g_reloc_mnv2.safetensors
"""

import argparse

import numpy as np
import torch

from g2g_model.geometry import fuse_poses, invert_pose
from g2g_model.metrics.errors import rotation_error_deg, translation_error_m
from g2g_model.training.evaluate import G2GMethod
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.trajectory_groups import TrajectoryStore


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--task", default="reloc", choices=("reloc", "rig"))
    p.add_argument("--max-pairs", type=int, default=100)
    p.add_argument("--reverse-fraction", type=float, default=0.0,
                   help="share of the pairs with A and B exchanged, as g2g-eval's")
    args = p.parse_args()
    torch.set_num_threads(1)
    items = read_pairs(args.task, args.root, args.index, 0.0, args.max_pairs, 0,
                       args.reverse_fraction)
    method = G2GMethod(args.checkpoint)
    method.pipeline.both_directions = False  # each pass as the model predicts it
    store = TrajectoryStore(args.root, method.image_size)
    dataset = PairDataset(items, TrajectoryStore(args.root, (1, 1)))
    errors = {"raw": [], "b frames": [], "swap": [], "both": []}
    for i, item in enumerate(items):
        gt_b0 = dataset.targets(i)[1][0]
        ga, gb = store.load(item.spec_a), store.load(item.spec_b)
        intra_a, intra_b = ga.cam_to_anchor, gb.cam_to_anchor
        from_b = method.prediction(ga, gb, intra_a, intra_b).b0_estimates
        from_a = invert_pose(method.prediction(gb, ga, intra_b, intra_a).b0_estimates)
        estimates = {"raw": from_b[0], "b frames": fuse_poses(from_b),
                     "swap": fuse_poses([from_b[0], from_a[0]]),
                     "both": fuse_poses(np.concatenate([from_b, from_a]))}
        for name, pose in estimates.items():
            errors[name].append((float(rotation_error_deg(pose, gt_b0)),
                                 float(translation_error_m(pose, gt_b0))))
    print(f"{len(items)} pairs of {args.root}/{args.index}, {args.checkpoint}")
    for name, rows in errors.items():
        e = np.array(rows)
        print(f"{name:9s} rot mean / median {e[:, 0].mean():.2f} / {np.median(e[:, 0]):.2f} deg, "
              f"trans {e[:, 1].mean():.3f} / {np.median(e[:, 1]):.3f} m, "
              f"RRA@5 {100 * (e[:, 0] < 5).mean():.0f} %")


if __name__ == "__main__":
    main()
