"""How much of the true rotation does a relocalization checkpoint recover?

The pipeline's answer T_{A0<-B0} (what the nodes use and `g2g-eval` scores) is compared with the
truth on the pairs `g2g-eval` uses (same selection and seed), binned by the true rotation angle:
per bin the median of predicted / true angle and the mean rotation error. Below the bins, the
least-squares slope and the correlation of predicted on true rotation vectors per camera axis
(x right, y down: y is the yaw of a level camera, z forward), and the same for translation. A
slope well under 1 with a high correlation is a model that knows the direction of a motion and
shrinks its size (docs/TRAINING.md, "What limits the regression").

    .venv/bin/python experiments/probe_rotation_scale.py --root data/sim_test \
        --index pairs_w5.json --checkpoint g2g_model/assets/g2g_reloc_mnv2.safetensors
"""

import argparse

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from g2g_model.metrics.errors import rotation_error_deg
from g2g_model.training.evaluate import G2GMethod
from g2g_model.training.pair_dataset import PairDataset, read_pairs
from g2g_model.training.trajectory_groups import TrajectoryStore

BINS = ((0, 2), (2, 5), (5, 10), (10, 180))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--max-pairs", type=int, default=100)
    args = p.parse_args()
    torch.set_num_threads(1)
    items = read_pairs("reloc", args.root, args.index, 0.0, args.max_pairs, 0, 0.0)
    method = G2GMethod(args.checkpoint)
    store = TrajectoryStore(args.root, method.image_size)
    dataset = PairDataset(items, TrajectoryStore(args.root, (1, 1)))
    pred, true, err = [], [], []
    for i, item in enumerate(items):
        gt_b0 = dataset.targets(i)[1][0]
        ga, gb = store.load(item.spec_a), store.load(item.spec_b)
        pose = method.prediction(ga, gb, ga.cam_to_anchor, gb.cam_to_anchor).a0_T_b0
        pred.append(pose)
        true.append(gt_b0)
        err.append(float(rotation_error_deg(pose, gt_b0)))
    pred, true, err = np.array(pred), np.array(true), np.array(err)
    rv_p = Rotation.from_matrix(pred[:, :3, :3]).as_rotvec()
    rv_t = Rotation.from_matrix(true[:, :3, :3]).as_rotvec()
    ang_p = np.degrees(np.linalg.norm(rv_p, axis=1))
    ang_t = np.degrees(np.linalg.norm(rv_t, axis=1))
    print(f"{len(items)} pairs of {args.root}/{args.index}, {args.checkpoint}")
    print(f"true angle mean {ang_t.mean():.2f} deg, predicted {ang_p.mean():.2f} deg")
    for lo, hi in BINS:
        m = (ang_t >= lo) & (ang_t < hi)
        if m.any():
            ratio = np.median(ang_p[m] / np.maximum(ang_t[m], 1e-9))
            print(f"true {lo:3d}-{hi:3d} deg: {m.sum():3d} pairs, predicted / true angle "
                  f"(median) {ratio:.2f}, rotation error mean {err[m].mean():.2f} deg "
                  f"({100 * err[m].sum() / err.sum():.0f} % of the total)")
    for name, p_, t_, unit in (("rotation", np.degrees(rv_p), np.degrees(rv_t), "deg"),
                               ("translation", pred[:, :3, 3], true[:, :3, 3], "m")):
        for k, axis in enumerate("xyz"):
            slope = (p_[:, k] * t_[:, k]).sum() / max((t_[:, k] ** 2).sum(), 1e-12)
            corr = np.corrcoef(p_[:, k], t_[:, k])[0, 1]
            print(f"{name} {axis}: slope {slope:.2f}, correlation {corr:.2f}, "
                  f"true spread {t_[:, k].std():.3f} {unit}")


if __name__ == "__main__":
    main()
