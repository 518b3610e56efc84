"""Diagnostic: what the decoder's scalar MAE goal (<= 0.05, docs/COVISIBILITY.md) demands.

The directional ratio r_ab is geometry: the share of a's pixels whose depth, moved by the
relative pose into camera b, lands inside b's image and agrees with b's depth there
(:func:`g2g_model.covisibility.labels.covisible_mask`). This probe computes it on the same
balanced held-out pairs as ``probe_covis_from_matches.py`` (``g2g-covis sim-samples``' pairs and
labels: every 2nd frame, half covisible in equal overlap bins, half not) from degraded
geometry, and prints each variant's MAE against the labels:

* the true relative pose with a's depth replaced by one number (the frame's median depth, or
  the median of the whole scene), counting every point that projects into b's image (no
  occlusion test, since b's depth would be an estimate too); and the same with a's true depth;
* the true depths with a perturbed relative pose (a random rotation of ``deg`` about a random
  axis and a random translation of ``m``), occlusion tested as the labels are.

No model runs: it bounds what any predictor that reasons through pose and depth can reach.

    python experiments/probe_covis_geometry.py --test data/sim_test
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.spatial.transform import Rotation

from g2g_model.covisibility.labels import covisible_mask
from g2g_model.covisibility.sim_data import (
    balanced_pairs, load_scene_frames, scene_dirs, scene_overlap)

POSE_ERRORS = ((1.0, 0.02), (2.0, 0.05), (5.0, 0.10), (10.0, 0.30))


def in_view_ratio(depth_a: np.ndarray, k_a: np.ndarray, world_T_a: np.ndarray,
                  size_b, k_b: np.ndarray, world_T_b: np.ndarray) -> float:
    """Share of a's valid pixels (depth > 0) whose point lies in front of b and projects inside
    its ``size_b`` = (h, w) image: the labeller's ratio without its occlusion test (b's depth
    set to 1 everywhere and an infinite tolerance)."""
    cov, valid = covisible_mask(depth_a, k_a, world_T_a, np.ones(size_b), k_b, world_T_b,
                                tol=np.inf)
    return float(cov.sum() / max(valid.sum(), 1))


def perturbed(world_T: np.ndarray, deg: float, m: float, rng: np.random.Generator):
    axis, step = rng.normal(size=3), rng.normal(size=3)
    d = np.eye(4)
    d[:3, :3] = Rotation.from_rotvec(np.deg2rad(deg) * axis / np.linalg.norm(axis)).as_matrix()
    d[:3, 3] = m * step / np.linalg.norm(step)
    return world_T @ d


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--test", required=True, help="held-out scene root")
    p.add_argument("--scenes", type=int, default=4)
    p.add_argument("--pairs-per-scene", type=int, default=400)
    args = p.parse_args()
    rng = np.random.default_rng(1)
    rows = {"labels": [], "constant (mean label)": []}
    for scene in scene_dirs(args.test, args.scenes):
        fr = load_scene_frames(None, scene, stride=2)
        pairs = balanced_pairs(scene_overlap(fr), args.pairs_per_scene,
                               np.random.default_rng([0, 0]))  # the matches probe's pairs
        scene_depth = float(np.median(fr.depth[fr.depth > 0]))
        for a, b in pairs:
            da, db, ka, kb = fr.depth[a], fr.depth[b], fr.intrinsics[a], fr.intrinsics[b]
            wa, wb = fr.world_T_cam[a], fr.world_T_cam[b]
            cov, valid = covisible_mask(da, ka, wa, db, kb, wb)
            rows["labels"].append(cov.sum() / max(valid.sum(), 1))
            frame_depth = float(np.median(da[da > 0])) if (da > 0).any() else 0.0
            for name, depth in (("true pose, true depth, no occlusion test", da),
                                ("true pose, frame's median depth, no occlusion test",
                                 np.where(da > 0, frame_depth, 0.0)),
                                ("true pose, scene's median depth, no occlusion test",
                                 np.where(da > 0, scene_depth, 0.0))):
                rows.setdefault(name, []).append(in_view_ratio(depth, ka, wa, db.shape, kb, wb))
            for deg, m in POSE_ERRORS:
                cov, valid = covisible_mask(da, ka, wa, db, kb, perturbed(wb, deg, m, rng))
                rows.setdefault(f"true depth, pose off by {deg:g} deg / {m:g} m", []).append(
                    cov.sum() / max(valid.sum(), 1))
        print(f"{scene.name}: {len(pairs)} pairs, median depth {scene_depth:.2f} m", flush=True)
    labels = np.asarray(rows.pop("labels"))
    rows["constant (mean label)"] = np.full(len(labels), labels.mean())
    print(f"\n{len(labels)} ordered pairs (ratio of a in b)\n")
    print("| ratio from | MAE | bias |\n|---|---|---|")
    for name, values in rows.items():
        err = np.asarray(values) - labels
        print(f"| {name} | {np.abs(err).mean():.3f} | {err.mean():+.3f} |")


if __name__ == "__main__":
    main()
