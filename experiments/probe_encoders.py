"""Which frozen image encoder carries the geometry G2G needs? (docs/TRAINING.md, "Encoders").

Two measurements on held-out simulator frames, the same frames for every encoder:

(a) cross-season patch correspondence: for frame pairs of one camera from two traversals of a
    scene (different seasons, overlap score >= 0.5), every patch centre of frame A with depth is
    reprojected into frame B (poses and depth from the simulator; occluded points are skipped).
    A patch counts as matched when its nearest descriptor (cosine) in B lies within one eighth
    of the image width of the true reprojection (the same pixel tolerance for every grid), and
    exactly when it is the true patch of the encoder's own grid.
(b) how well the relative yaw and the translation of two frames of one camera 1-3 frames apart
    are predictable from the features: ridge regression on the correlations of the two frames'
    column and row profiles at shifts of up to 3 patches (a yaw moves the image sideways),
    fitted on validation/training scenes, R^2 on the test scenes.

    python experiments/probe_encoders.py --fit "data/sim_val/scene_*" \
        --test "data/sim_test/scene_*"

``--only ALIKED`` runs just the encoders whose name contains one of the comma-separated words
and merges their rows into the existing ``--out`` file (the pairs are the same: they are drawn
from the seed before any encoder runs). The ALIKED rows need the converted weights
(``python tools/make_aliked_asset.py --variant t16``, then ``n16``) and are left out without
them; ALIKED reads RGB in [0, 1] at the given size (224 px is the simulator's native size),
then averages per cell either its dense feature map ("map") or SDDH descriptors computed on a
4-pixel lattice ("SDDH"), L2-normalised.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from g2g_model.data.format import TrajectoryReader  # noqa: E402

Encoder = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (image uint8, K) -> [gh, gw, C]


def _resize(image: np.ndarray, size: int) -> torch.Tensor:
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float() / 255.0
    return F.interpolate(x, size=(size, size), mode="bilinear", antialias=True,
                         align_corners=False)


def encoders(checkpoint: str) -> Dict[str, Encoder]:
    from g2g_model.backbones.mobilenet_v2 import MobileNetV2Trunk
    from g2g_model.estimation.pipeline import G2GPipeline

    pipe = G2GPipeline.from_checkpoint(checkpoint)
    side = pipe.image_size[0]
    trunks = {16: MobileNetV2Trunk(16), 8: MobileNetV2Trunk(8)}

    def compact(image, k):
        tokens = pipe.encode_frames([image], k)[0]  # [P, D]
        grid = int(round(tokens.shape[0] ** 0.5))
        return tokens.reshape(grid, grid, -1).numpy()

    def mobilenet(stride, size):
        def run(image, k):
            with torch.inference_mode():
                out = trunks[stride](_resize(image, size))[0]
            return out.permute(1, 2, 0).numpy()
        return run

    def pixels(image, k):
        return _pixels(image, side)

    def position(image, k):  # one-hot patch positions: the nearest patch is the same cell
        grid = side // 16
        return np.eye(grid * grid, dtype=np.float32).reshape(grid, grid, -1)

    rows = {
        f"position only (control: same cell, {side} px)": position,
        f"compact tokens (shipped, {side} px)": compact,
        f"MobileNetV2 s16, {side} px": mobilenet(16, side),
        "MobileNetV2 s16, 224 px": mobilenet(16, 224),
        f"MobileNetV2 s8, {side} px": mobilenet(8, side),
        f"pixels (control, {side} px)": pixels,
        "pixels (control, 224 px)": lambda image, k: _pixels(image, 224),
    }
    rows.update(_aliked_encoders(side))
    return rows


def _aliked_encoders(side: int) -> Dict[str, Encoder]:
    from g2g_model.backbones.aliked import ALIKED, asset_path

    rows: Dict[str, Encoder] = {}
    for variant in ("t16", "n16"):
        if not asset_path(variant).is_file():
            print(f"ALIKED-{variant} left out: no {asset_path(variant)} (see "
                  f"tools/make_aliked_asset.py)", flush=True)
            continue
        net = ALIKED(variant)

        def make(size, grid, head, net=net):
            def run(image, k):
                with torch.inference_mode():
                    return net.cell_descriptors(_resize(image, size), grid, head)[0].numpy()
            return run

        for head, label in (("map", "feature map"), ("sddh", "SDDH")):
            for size, grid in ((side, side // 16), (224, 14), (224, 7)):
                cells = f", {grid} x {grid} cells" if grid != size // 16 else ""
                rows[f"ALIKED-{variant} {label}, {size} px{cells}"] = make(size, grid, head)
    return rows


class _Timed:
    """An encoder that keeps the wall time of its calls (image to features, one thread set)."""

    def __init__(self, encode: Encoder) -> None:
        self.encode, self.total, self.calls = encode, 0.0, 0

    def __call__(self, image, k):
        start = time.perf_counter()
        out = self.encode(image, k)
        self.total, self.calls = self.total + time.perf_counter() - start, self.calls + 1
        return out

    def mean_ms(self) -> float:
        return 1000.0 * self.total / max(self.calls, 1)


def _pixels(image: np.ndarray, size: int) -> np.ndarray:
    """Raw 16 x 16 RGB patches as descriptors ``[size/16, size/16, 768]``."""
    x = _resize(image, size)[0]
    cols = F.unfold(x[None], 16, stride=16)[0].T
    grid = size // 16
    return cols.reshape(grid, grid, -1).numpy()


def _unit(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + 1e-8)


def correspondence(feats_a, feats_b, depth_a, depth_b, k, a_T_b_inv) -> Tuple[int, int, int]:
    """(tested, within tolerance, exact cell) for one pair; a_T_b_inv = cam_b <- cam_a."""
    gh, gw, _ = feats_a.shape
    height, width = depth_a.shape
    ys = ((np.arange(gh) + 0.5) * height / gh).astype(int)
    xs = ((np.arange(gw) + 0.5) * width / gw).astype(int)
    u, v = np.meshgrid(xs, ys)
    z = depth_a[v, u]
    ok = z > 0
    pts = np.linalg.inv(k) @ np.stack([u.ravel(), v.ravel(), np.ones(u.size)]) * z.ravel()
    pts_b = a_T_b_inv[:3, :3] @ pts + a_T_b_inv[:3, 3:]
    proj = k @ pts_b
    ub, vb = proj[0] / proj[2], proj[1] / proj[2]
    inside = (proj[2] > 0.05) & (ub >= 0) & (ub < width - 0.5) & (vb >= 0) & (vb < height - 0.5)
    ok = ok.ravel() & inside
    zb = np.zeros_like(ub)
    zb[ok] = depth_b[np.round(vb[ok]).astype(int), np.round(ub[ok]).astype(int)]
    ok &= np.abs(zb - proj[2]) < 0.05 * proj[2] + 0.05  # visible in B, not occluded
    if not ok.any():
        return 0, 0, 0
    fa = _unit(feats_a.reshape(gh * gw, -1)[ok])
    fb = _unit(feats_b.reshape(gh * gw, -1))
    best = np.argmax(fa @ fb.T, axis=1)
    bx = (best % gw + 0.5) * width / gw
    by = (best // gw + 0.5) * height / gh
    err = np.hypot(bx - ub[ok], by - vb[ok])
    true_cell = (vb[ok] * gh / height).astype(int) * gw + (ub[ok] * gw / width).astype(int)
    return int(ok.sum()), int((err < width / 8).sum()), int((best == true_cell).sum())


def shift_features(fa: np.ndarray, fb: np.ndarray, max_shift: int = 3) -> np.ndarray:
    """Correlations of standardised column and row profiles at shifts -s..s, and their argmax."""
    both = np.concatenate([fa, fb]).reshape(-1, fa.shape[-1])
    mean, std = both.mean(0), both.std(0) + 1e-6
    fa, fb = (fa - mean) / std, (fb - mean) / std
    out = []
    for axis in (0, 1):  # axis 0 pooled -> column profile [gw, C]; axis 1 -> row profile
        pa, pb = fa.mean(axis), fb.mean(axis)
        n = pa.shape[0]
        corr = []
        for s in range(-max_shift, max_shift + 1):
            lo, hi = max(0, s), min(n, n + s)
            corr.append(float((pa[lo:hi] * pb[lo - s:hi - s]).mean()) if hi > lo else 0.0)
        corr = np.asarray(corr)
        weights = np.exp(corr * 4.0) / np.exp(corr * 4.0).sum()
        out += list(corr) + [float(weights @ np.arange(-max_shift, max_shift + 1))]
    return np.asarray(out)


def relative_targets(pose_a: np.ndarray, pose_b: np.ndarray) -> np.ndarray:
    rel = np.linalg.inv(pose_a) @ pose_b  # cam_a <- cam_b
    yaw = np.degrees(np.arctan2(rel[0, 2], rel[2, 2]))  # about the camera y axis (OpenCV)
    return np.array([yaw, rel[0, 3], rel[2, 3]])


def ridge_r2(x_fit, y_fit, x_test, y_test, lam: float = 1.0) -> np.ndarray:
    mu, sd = x_fit.mean(0), x_fit.std(0) + 1e-8
    xf = np.c_[(x_fit - mu) / sd, np.ones(len(x_fit))]
    xt = np.c_[(x_test - mu) / sd, np.ones(len(x_test))]
    w = np.linalg.solve(xf.T @ xf + lam * np.eye(xf.shape[1]), xf.T @ y_fit)
    resid = ((xt @ w - y_test) ** 2).sum(0)
    return 1.0 - resid / ((y_test - y_test.mean(0)) ** 2).sum(0)


def motion_pairs(scenes: List[str], per_traj: int, rng) -> List[Tuple]:
    pairs = []
    for scene in scenes:
        for traj in sorted(glob.glob(os.path.join(scene, "traj_*"))):
            reader = TrajectoryReader(traj)
            for _ in range(per_traj):
                cam = reader.cameras[rng.integers(len(reader.cameras))]
                a = int(rng.integers(reader.num_frames - 3))
                pairs.append((reader, cam, a, a + int(rng.integers(1, 4))))
    return pairs


def season_pairs(scenes: List[str], per_scene: int, rng) -> List[Tuple]:
    pairs = []
    for scene in scenes:
        for path in sorted(glob.glob(os.path.join(scene, "overlap", "traj_00__traj_01__*"))):
            cam = os.path.basename(path).split("__")[2]
            scores = np.load(path).astype(np.float32)
            cand = np.argwhere(scores >= 0.5)
            pick = rng.choice(len(cand), size=min(per_scene, len(cand)), replace=False)
            ra = TrajectoryReader(os.path.join(scene, "traj_00"))
            rb = TrajectoryReader(os.path.join(scene, "traj_01"))
            pairs += [(ra, rb, cam, int(cand[i][0]), int(cand[i][1])) for i in pick]
    return pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="g2g_model/assets/g2g_reloc_mnv2.safetensors")
    parser.add_argument("--fit", default="data/sim_val/scene_*")
    parser.add_argument("--test", default="data/sim_test/scene_*")
    parser.add_argument("--season-pairs", type=int, default=15, help="per scene and camera")
    parser.add_argument("--motion-pairs", type=int, default=40,
                        help="per trajectory (40: the pairs of docs/eval/probe_encoders.json)")
    parser.add_argument("--out", default="docs/eval/probe_encoders.json")
    parser.add_argument("--only", default="", help="comma-separated name parts: run only these "
                        "encoders and merge their rows into --out")
    parser.add_argument("--threads", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    test_scenes, fit_scenes = sorted(glob.glob(args.test)), sorted(glob.glob(args.fit))
    seasons = season_pairs(test_scenes, args.season_pairs, rng)
    fit, test = (motion_pairs(fit_scenes, args.motion_pairs, rng),
                 motion_pairs(test_scenes, args.motion_pairs, rng))
    meta = {"season_pairs": len(seasons), "fit_pairs": len(fit), "test_pairs": len(test),
            "fit": args.fit, "test": args.test, "checkpoint": args.checkpoint}
    only = [word for word in args.only.split(",") if word]
    kept = {}
    if only and os.path.isfile(args.out):  # checked before the long run, not after it
        with open(args.out) as handle:
            old = json.load(handle)
        if {key: old["meta"].get(key) for key in meta} != meta:
            parser.error(f"--only: {args.out} was made with other pairs ({old['meta']}, "
                         f"these: {meta}; the same --motion-pairs and --season-pairs?)")
        kept = old["results"]
    results = {}
    for name, encode in encoders(args.checkpoint).items():
        if only and not any(word in name for word in only):
            continue
        timed = _Timed(encode)
        encode = timed
        tested = within = exact = 0
        for ra, rb, cam, fa, fb in seasons:
            k = ra.rig[cam].K
            pose_a, pose_b = ra.world_T_cam(cam)[fa], rb.world_T_cam(cam)[fb]
            counts = correspondence(encode(ra.image(cam, fa), k), encode(rb.image(cam, fb), k),
                                    ra.depth(cam, fa), rb.depth(cam, fb), k,
                                    np.linalg.inv(pose_b) @ pose_a)
            tested, within, exact = tested + counts[0], within + counts[1], exact + counts[2]
        r2 = {}
        for split, pairs in (("fit", fit), ("test", test)):
            xs, ys = [], []
            for reader, cam, a, b in pairs:
                k = reader.rig[cam].K
                xs.append(shift_features(encode(reader.image(cam, a), k),
                                         encode(reader.image(cam, b), k)))
                ys.append(relative_targets(reader.world_T_cam(cam)[a], reader.world_T_cam(cam)[b]))
            r2[split] = (np.asarray(xs), np.asarray(ys))
        scores = ridge_r2(*r2["fit"], *r2["test"])
        results[name] = {
            "patches_tested": tested, "match_within_1/8_width": within / max(tested, 1),
            "match_exact_cell": exact / max(tested, 1),
            "r2_yaw": float(scores[0]), "r2_tx": float(scores[1]), "r2_tz": float(scores[2]),
            "encode_ms": timed.mean_ms(), "threads": args.threads,
        }
        print(f"{name:34s} match {within / max(tested, 1):.3f} exact {exact / max(tested, 1):.3f}"
              f"  R2 yaw {scores[0]:+.2f} tx {scores[1]:+.2f} tz {scores[2]:+.2f}", flush=True)
    if kept:
        results = {**kept, **results}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump({"meta": meta, "results": results}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
