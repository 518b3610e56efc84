"""Diagnostic: how well do feature matches predict the covisibility ratios the decoder regresses?
(docs/COVISIBILITY.md, "Honest assessment": the decoder's scalar MAE goal of <= 0.05.)

Pairs and labels as ``g2g-covis sim-samples`` makes them (every 2nd frame of a scene, balanced
pairs: half covisible in equal overlap bins, half not; directional ratios from depth). Every frame
is reduced to the backbone's 112 px (as maps store keyframes) and described as the relocalization
matcher does (:class:`g2g_model.estimation.rotation_matching.RotationMatcher`: the frozen
MobileNetV2 trunk at 160 px, 10 x 10 cells). For each ordered pair (a, b), every cell of a gets
seven numbers: its best cosine similarity in b, the margin to the second best, whether the match is
mutual, whether it is an inlier of PoseLib's essential-matrix RANSAC on the mutual matches (the
frames' intrinsics, ``--px`` pixels), and the pair's mutual-match share, inlier share and mean
similarity. A small MLP (7 -> 32 -> 1, BCE on the cell's covisible fraction from the dense labels)
is fitted on training scenes; a ratio is the mean over a's cells. Printed for the held-out scenes:
the ratio and score MAE of the constant (training mean), of the shipped decoder on the same pairs
(tokens of the relocalization default, as the relocalize node feeds it), of the raw inlier share,
of its linear calibration and of the MLP.

    python experiments/probe_covis_from_matches.py --train data/sim_train --test data/sim_test
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import poselib
import torch
import torch.nn.functional as F

from g2g_model.covisibility.checkpoint import load_checkpoint
from g2g_model.covisibility.sim_data import (
    balanced_pairs, load_scene_frames, scene_dirs, scene_images, scene_overlap, scene_samples)
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint
from g2g_model.poselib_conversions import pinhole_camera
from g2g_model.estimation.rotation_matching import RotationMatcher


def scene_features(matcher: RotationMatcher, scene, pairs_per_scene: int, seed: int,
                   pipeline=None):
    """Pairs, labels (with the frames' tokens when a pipeline is given), 160 px cell features
    and intrinsics of one scene."""
    frames = load_scene_frames(pipeline, scene, stride=2)
    pairs = balanced_pairs(scene_overlap(frames), pairs_per_scene,
                           np.random.default_rng([seed, 0]))
    labels = scene_samples(frames, pairs, (14, 14))
    images = torch.stack([torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)
                          for rgb in scene_images(scene, frames)]).float() / 255
    h, w = images.shape[-2:]
    small = F.interpolate(images, size=(112, 112 * w // h), mode="bilinear", antialias=True,
                          align_corners=False)
    k = torch.as_tensor(frames.intrinsics).double()
    k[:, :2] *= 112 / frames.depth.shape[1]  # K of the reduced depth -> 112 px frames
    big, k = matcher.resized(small, k)
    feats = torch.cat([matcher.features(big[i:i + 32]) for i in range(0, len(big), 32)])
    return pairs, labels, feats, k.numpy(), tuple(big.shape[-2:])


def cell_features(fa: torch.Tensor, fb: torch.Tensor, ka, kb, size, px: float) -> torch.Tensor:
    """``[cells of a, 7]`` (module docstring) for one ordered pair."""
    h, w = fa.shape[-2:]
    da, db = (F.normalize(f.flatten(1).T, dim=1) for f in (fa, fb))
    sim = da @ db.T
    top2 = sim.topk(2, dim=1).values
    a_to_b, b_to_a = sim.argmax(1), sim.argmax(0)
    mutual = b_to_a[a_to_b] == torch.arange(len(da))
    ia = torch.nonzero(mutual).flatten()
    ib = a_to_b[ia]
    inlier = torch.zeros(len(da), dtype=torch.bool)
    if len(ia) >= 8:
        stride = size[1] / w
        pa = (torch.stack([ia % w, ia // w], 1).double().numpy() + 0.5) * stride - 0.5
        pb = (torch.stack([ib % w, ib // w], 1).double().numpy() + 0.5) * stride - 0.5
        _, info = poselib.estimate_relative_pose(
            pa, pb, pinhole_camera(ka, size), pinhole_camera(kb, size),
            {"max_epipolar_error": px, "max_iterations": 200, "seed": 0}, {})
        inlier[ia[torch.as_tensor(np.asarray(info["inliers"], bool))]] = True
    n = len(da)
    share = [len(ia) / n, float(inlier.sum()) / n, float(sim.mean())]
    return torch.cat([torch.stack([top2[:, 0], top2[:, 0] - top2[:, 1], mutual.float(),
                                   inlier.float()], 1),
                      torch.tensor(share, dtype=torch.float32).expand(n, 3)], 1)


def collect(matcher, root, scenes: int, pairs_per_scene: int, px: float, decoder=None,
            pipeline=None):
    """Cell features ``[2N, cells, 7]``, cell labels ``[2N, cells]``, ratios ``[2N]`` (a->b and
    b->a of every pair, in turn), the raw inlier shares ``[2N]`` and the decoder's ratios
    ``[2N]`` (empty without a decoder)."""
    xs, ys, ratios, raw, decoded = [], [], [], [], []
    for scene in scene_dirs(root, scenes):
        t0 = time.perf_counter()
        pairs, labels, feats, k, size = scene_features(matcher, scene, pairs_per_scene, 0,
                                                       pipeline)
        if decoder is not None:
            tokens = labels.frames.float()
            with torch.inference_mode():
                out = decoder(tokens[pairs[:, 0]], tokens[pairs[:, 1]], dense=False)
            decoded.append(torch.stack([out["r_ab"], out["r_ba"]], 1).float().flatten())
        dense = [F.adaptive_avg_pool2d(d.float()[:, None], feats.shape[-2:])[:, 0]
                 for d in (labels.dense_a, labels.dense_b)]
        for n, (i, j) in enumerate(pairs.tolist()):
            for side, (x, y) in enumerate(((i, j), (j, i))):
                cells = cell_features(feats[x], feats[y], k[x], k[y], size, px)
                xs.append(cells)
                ys.append(dense[side][n].flatten())
                ratios.append(float(labels.ratios[n, side]))
                raw.append(float(cells[0, 5]))
        print(f"{scene.name}: {len(pairs)} pairs, {time.perf_counter() - t0:.0f} s", flush=True)
    return (torch.stack(xs), torch.stack(ys), torch.tensor(ratios), torch.tensor(raw),
            torch.cat(decoded) if decoded else torch.zeros(0))


def fit_cells(x: torch.Tensor, y: torch.Tensor, steps: int = 1500, seed: int = 0):
    """A 7 -> 32 -> 1 MLP from cell features to the cell's covisible fraction."""
    torch.manual_seed(seed)
    mean, std = x.flatten(0, 1).mean(0), x.flatten(0, 1).std(0) + 1e-6
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[-1], 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(steps):
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(net((x - mean) / std)[..., 0], y.clamp(0, 1))
        loss.backward()
        opt.step()
    return lambda z: torch.sigmoid(net((z - mean) / std)[..., 0]).detach()


def mae(pred: torch.Tensor, truth: torch.Tensor) -> str:
    """Ratio MAE and score MAE (the smaller of both directions of each pair)."""
    score = (pred.view(-1, 2).min(1).values - truth.view(-1, 2).min(1).values).abs().mean()
    return f"ratio MAE {float((pred - truth).abs().mean()):.3f}  score MAE {float(score):.3f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, help="scene root to fit on")
    p.add_argument("--test", required=True, help="held-out scene root")
    p.add_argument("--train-scenes", type=int, default=4)
    p.add_argument("--pairs-per-scene", type=int, default=400)
    p.add_argument("--px", type=float, default=8.0, help="RANSAC epipolar threshold (160 px)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    matcher = RotationMatcher()
    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    decoder, _ = load_checkpoint(default_checkpoint("covisibility"),
                                 expect_encoder=pipeline.backbone_id())
    x, y, r, raw, _ = collect(matcher, args.train, args.train_scenes, args.pairs_per_scene,
                              args.px)
    tx, ty, tr, traw, tdec = collect(matcher, args.test, 0, args.pairs_per_scene, args.px,
                                     decoder.eval(), pipeline)
    print(f"held out: {len(tr)} directed pairs ({len(tr) // 2} pairs)")
    print(f"constant (training mean)     {mae(torch.full_like(tr, float(r.mean())), tr)}")
    print(f"shipped decoder (tokens)     {mae(tdec, tr)}")
    print(f"raw inlier share             {mae(traw, tr)}")
    coef = torch.linalg.lstsq(torch.stack([raw, torch.ones_like(raw)], 1), r[:, None]).solution
    print(f"inlier share, linear fit     "
          f"{mae((coef[0] * traw + coef[1]).clamp(0, 1), tr)}")
    cells = fit_cells(x, y)
    print(f"per-cell MLP (training fit)  {mae(cells(x).mean(1), r)}")
    print(f"per-cell MLP                 {mae(cells(tx).mean(1), tr)}")


if __name__ == "__main__":
    main()
