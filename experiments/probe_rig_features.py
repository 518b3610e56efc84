"""Diagnostic: do a rig checkpoint's frozen backbone features carry the relative yaw of two rig
groups 1-3 frames apart? (docs/TRAINING.md, "Rig odometry".)

Two probes fitted on training scenes and scored on held-out scenes:

* ridge regression from column-pooled, standardised tokens of both groups (and their product);
* least squares on the correlations of the same camera's column profiles at shifts -3..3
  (a yaw moves the image sideways in every ring camera).

An R^2 near 0 means the features, as the G2G modules see them, say little about the rotation.
``--pixels`` runs the same probes on the model's input pixels cut into the same patch grid (a
control: the probes can find the yaw where the input shows it).

    python experiments/probe_rig_features.py \
        --checkpoint g2g_model/assets/g2g_rig_mnv2.safetensors \
        --train 'data/sim_train/scene_*/traj_*' --test 'data/sim_test/scene_*/traj_*'
"""

from __future__ import annotations

import argparse
import glob
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from g2g_model.data.format import TrajectoryReader
from g2g_model.estimation.groups import Group
from g2g_model.estimation.pipeline import G2GPipeline


class FeatureSource:
    """Standardised backbone features ``[N, P, D]`` of rig groups, cached per (trajectory, t)."""

    def __init__(self, checkpoint: str, pixels: bool = False) -> None:
        self.pipe = G2GPipeline.from_checkpoint(checkpoint)
        self.pixels = pixels
        self.model = self.pipe.model
        self.cache: Dict[Tuple[str, int], np.ndarray] = {}

    @torch.inference_mode()
    def __call__(self, reader: TrajectoryReader, t: int) -> np.ndarray:
        key = (str(reader.path), t)
        if key not in self.cache:
            cams = reader.cameras
            group = Group([reader.image(c, t) for c in cams],
                          np.stack([reader.rig[c].K for c in cams]),
                          np.stack([reader.world_T_cam(c)[t] for c in cams]))
            prepared = self.pipe.prepare(group, "group")
            if self.pixels:  # [N, 3, H, W] -> [N, P, 3 * patch * patch] on the backbone's grid
                images = prepared.images[0]
                side = int(round(np.sqrt(self.model.config.feature_norm_patches or 49)))
                patch = images.shape[-1] // side
                cols = torch.nn.functional.unfold(images, patch, stride=patch)
                self.cache[key] = cols.transpose(1, 2).numpy()
                return self.cache[key]
            feats = self.pipe.encode(prepared)[0]
            if self.model.config.feature_norm_patches:
                feats = (feats - self.model.feature_mean) * self.model.feature_scale
            self.cache[key] = feats.numpy()
        return self.cache[key]


def sample_pairs(pattern: str, count: int, seed: int) -> List[Tuple[TrajectoryReader, int, int]]:
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise SystemExit(f"no trajectory matches {pattern!r}")
    rng = np.random.default_rng(seed)
    readers: Dict[str, TrajectoryReader] = {}
    out = []
    for _ in range(count):
        path = paths[rng.integers(len(paths))]
        reader = readers.setdefault(path, TrajectoryReader(path))
        t = int(rng.integers(0, reader.num_frames - 3))
        out.append((reader, t, t + int(rng.integers(1, 4))))
    return out


def yaw_deg(reader: TrajectoryReader, ta: int, tb: int) -> float:
    rel = np.linalg.inv(reader.world_T_body[ta]) @ reader.world_T_body[tb]
    return float(np.degrees(np.arctan2(rel[1, 0], rel[0, 0])))


def column_profiles(feats: np.ndarray) -> np.ndarray:
    """``[N, P, D]`` on a square patch grid -> ``[N, columns, D]`` (mean over rows)."""
    side = int(round(np.sqrt(feats.shape[1])))
    return feats.reshape(feats.shape[0], side, side, -1).mean(1)


def shift_correlations(ca: np.ndarray, cb: np.ndarray, max_shift: int = 3) -> List[float]:
    cols = ca.shape[1]
    out = []
    for s in range(-max_shift, max_shift + 1):
        a = ca[:, max(0, s):cols + min(0, s)]
        b = cb[:, max(0, -s):cols + min(0, -s)]
        a, b = a - a.mean(), b - b.mean()
        out.append(float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9)))
    return out


def features_and_targets(source: FeatureSource,
                         pairs) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    pooled, shifts, yaw = [], [], []
    for reader, ta, tb in pairs:
        ca, cb = column_profiles(source(reader, ta)), column_profiles(source(reader, tb))
        pooled.append(np.concatenate([ca.ravel(), cb.ravel(), (ca * cb).ravel()]))
        shifts.append(shift_correlations(ca, cb))
        yaw.append(yaw_deg(reader, ta, tb))
    return np.array(pooled), np.array(shifts), np.array(yaw)


def r2_mae(pred: np.ndarray, y: np.ndarray) -> Tuple[float, float]:
    r2 = 1.0 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return float(r2), float(np.abs(pred - y).mean())


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--train", required=True, help="glob of training trajectories")
    parser.add_argument("--test", required=True, help="glob of held-out trajectories")
    parser.add_argument("--train-pairs", type=int, default=1500)
    parser.add_argument("--test-pairs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pixels", action="store_true",
                        help="probe the input pixels (same patch grid) instead of the features")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    source = FeatureSource(args.checkpoint, args.pixels)
    xtr, str_, ytr = features_and_targets(source, sample_pairs(args.train, args.train_pairs, 0))
    xte, ste, yte = features_and_targets(source, sample_pairs(args.test, args.test_pairs, 1))
    print(f"held-out yaw: mean |yaw| {np.abs(yte).mean():.2f} deg; predicting the training "
          f"mean gives MAE {np.abs(yte - ytr.mean()).mean():.2f} deg")
    mu, sd = xtr.mean(0), xtr.std(0) + 1e-6
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    for lam in (1e1, 1e2, 1e3, 1e4):
        # dual form: the dimension may exceed the number of samples by far
        alpha = np.linalg.solve(xtr @ xtr.T + lam * np.eye(len(xtr)), ytr - ytr.mean())
        r2, mae = r2_mae(xte @ (xtr.T @ alpha) + ytr.mean(), yte)
        print(f"ridge on pooled tokens ({xtr.shape[1]} dims), lambda {lam:g}: R^2 {r2:.3f}, "
              f"MAE {mae:.2f} deg")
    w = np.linalg.lstsq(np.c_[str_, np.ones(len(str_))], ytr, rcond=None)[0]
    r2, mae = r2_mae(np.c_[ste, np.ones(len(ste))] @ w, yte)
    print(f"least squares on {str_.shape[1]} shift correlations: R^2 {r2:.3f}, MAE {mae:.2f} deg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
