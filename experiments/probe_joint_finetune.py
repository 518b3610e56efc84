"""Probe: does the relocalization loss, let into the backbone, make its tokens match better?

The shipped relocalization default trains its G2G modules on the tokens of a frozen stage-1
backbone (MobileNetV2 trunk + geometry embeddings + a 4-block transformer trained on depth and
intra-group poses). Its held-out error is mostly shrinkage: about half of every turn over 2 deg
is recovered (probe_rotation_scale.py). Stage 1 never sees two traversals, so nothing asks its
tokens to match across seasons. This probe fine-tunes, from the shipped file, the G2G modules
together with the top of the backbone (the last ``--blocks`` transformer blocks and the final
norm; the ImageNet trunk stays frozen) on the training pairs, with the relocalization loss, and
writes a G2G checkpoint (backbone tensors included) that ``g2g-eval`` reads as it is. The
control, the same steps with the backbone frozen, is ``--blocks 0``.

    python experiments/probe_joint_finetune.py --out outputs/probe_joint/all_hi --blocks -1 \
        --steps 2000 --lr 2e-4 --backbone-lr 2e-4 --trunk-cache outputs/probe_joint/trunk_cache.pt

(``--blocks -1``: everything above the trunk.) It resumes from ``OUT/state.pt`` when run again
with the same arguments. Evaluate (relocalization checkpoints run both ways by default) with
``python -m g2g_model.training.eval_cli --task reloc --root data/sim_test --index pairs_w5.json
--checkpoint OUT/model.safetensors --identity --ablation --max-pairs 100 --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from g2g_model.training.augment import perturb_group_poses, NOISE_PRESETS
from g2g_model.training.losses import LOSS_PRESETS
from g2g_model.training.config import load_config
from g2g_model.training.models import build_backbone, build_g2g
from g2g_model.training.pair_dataset import read_pairs
from g2g_model.training.run_files import export_model
from g2g_model.training.task_modules import PairTrainModule
from g2g_model.training.trajectory_groups import (TrajectoryStore, pair_targets,
                                                  relative_poses)
from g2g_model.estimation.groups import resize_with_intrinsics

ASSET = "g2g_model/assets/g2g_reloc_mnv2.safetensors"


class CachedTrunk(torch.nn.Module):
    """Stands in for the frozen MobileNetV2 trunk: returns the features set in ``pending``
    (computed once per frame by :func:`trunk_cache`; the trunk is 70 % of a forward pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending = None

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        feats, self.pending = self.pending, None
        if feats is None or feats.shape[0] != images.shape[0]:
            raise RuntimeError("CachedTrunk: features not set for this call")
        return feats


def trunk_cache(store: TrajectoryStore, items: list, trunk: torch.nn.Module, path: Path):
    """Frozen trunk features ``[M, C, h, w]`` (float16) and resized intrinsics ``[M, 3, 3]`` of
    every frame the pairs use, with ``{(traj, cam, frame): row}``; read from ``path`` when
    there, else computed (batches of 128 frames) and written there."""
    if path.is_file():
        data = torch.load(path, map_location="cpu", weights_only=False)
        return {tuple(k): i for i, k in enumerate(data["keys"])}, data["feats"], data["K"]
    keys = sorted({(spec[1], cam, i) for it in items for spec in (it.spec_a, it.spec_b)
                   for cam, i in store.frames(spec)})
    feats, ks, started = [], [], time.perf_counter()
    # Frame by frame, not TrajectoryStore.load: a frame recurs in about five windows.
    for lo in range(0, len(keys), 128):
        images = []
        for traj, cam, i in keys[lo:lo + 128]:
            reader = store.reader(traj)
            img, k = resize_with_intrinsics(reader.image(cam, i), reader.rig[cam].K,
                                            store.image_size)
            images.append(torch.from_numpy(img).permute(2, 0, 1).float().div_(255.0))
            ks.append(torch.from_numpy(k).float())
        with torch.no_grad():
            feats.append(trunk(torch.stack(images)).half())
        if lo % (128 * 50) == 0:
            print(f"trunk features {lo + len(images)} / {len(keys)} frames, "
                  f"{time.perf_counter() - started:.0f} s", flush=True)
    data = {"keys": keys, "feats": torch.cat(feats), "K": torch.stack(ks)}
    torch.save(data, path)
    return {k: i for i, k in enumerate(keys)}, data["feats"], data["K"]


def trainable_backbone(backbone: torch.nn.Module, blocks: int) -> list:
    """Unfreeze the last ``blocks`` transformer blocks and the final norm (0: none; -1:
    everything but the ImageNet trunk: also the patch projection and geometry embeddings)."""
    for p in backbone.parameters():
        p.requires_grad_(False)
    if blocks < 0:
        params = [p for name, p in backbone.named_parameters()
                  if not name.startswith("stem.trunk.")]
    elif blocks > 0:
        modules = list(backbone.transformer.blocks)[-blocks:] + [backbone.transformer.norm]
        params = [p for m in modules for p in m.parameters()]
    else:
        params = []
    for p in params:
        p.requires_grad_(True)
    return params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", default="reloc_mnv2_168")
    ap.add_argument("--init", default=ASSET, help="G2G checkpoint with backbone tensors")
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-4, help="G2G modules")
    ap.add_argument("--backbone-lr", type=float, default=3e-5)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop (and save) after this long")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-pairs", type=int, default=0, help="seeded subset (0: all)")
    ap.add_argument("--trunk-cache", default="", help="frame features file (default OUT/...)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    cfg = load_config(args.preset, [f"model.backbone_weights={args.init}",
                                    f"model.init_from={args.init}", f"out_dir={out}"])
    backbone = build_backbone(cfg.model)
    g2g = build_g2g(cfg.model, backbone)
    bb_params = trainable_backbone(backbone, args.blocks)
    module = PairTrainModule(g2g, LOSS_PRESETS[cfg.loss])
    groups = [{"params": list(g2g.parameters()), "lr": args.lr}]
    if bb_params:
        groups.append({"params": bb_params, "lr": args.backbone_lr})
    opt = torch.optim.AdamW(groups, weight_decay=cfg.optim.weight_decay)
    base_lrs = [g["lr"] for g in groups]
    noise = NOISE_PRESETS[cfg.noise]
    items = read_pairs("reloc", cfg.data.root, cfg.data.index, cfg.data.min_score,
                       args.max_pairs, args.seed)
    store = TrajectoryStore(cfg.data.root, tuple(backbone.image_size), workers=0)
    cache_path = Path(args.trunk_cache or out / "trunk_cache.pt")
    rows, trunk_feats, trunk_k = trunk_cache(store, items, backbone.stem.trunk, cache_path)
    real_trunk, cached_trunk = backbone.stem.trunk, CachedTrunk()
    backbone.stem.trunk = cached_trunk

    def with_real_trunk(fn):
        backbone.stem.trunk = real_trunk
        try:
            return fn()
        finally:
            backbone.stem.trunk = cached_trunk

    groups_of = []  # per pair: (rows_a, rows_b, poses_a, poses_b, gt_a, gt_b)
    for it in items:
        ids, poses, world = [], [], []
        for spec in (it.spec_a, it.spec_b):
            ids.append(torch.tensor([rows[(spec[1], cam, i)] for cam, i in store.frames(spec)]))
            world.append(store.world_poses(spec))
            poses.append(torch.from_numpy(relative_poses(world[-1])).float())
        gt_a, gt_b = pair_targets(*world)
        groups_of.append((*ids, *poses, torch.from_numpy(gt_a).float(),
                          torch.from_numpy(gt_b).float()))
    # Batches of one group size (4- and 5-frame windows do not stack).
    sizes = {}
    for i, g in enumerate(groups_of):
        sizes.setdefault((len(g[0]), len(g[1])), []).append(i)
    # Uniform over pairs, no overlap curriculum (the trainer's CurriculumSampler starts from
    # easy pairs; these runs continue a model that has been through it).
    buckets = sorted(sizes.values(), key=len, reverse=True)
    weights = torch.tensor([len(b) for b in buckets], dtype=torch.float)
    size = tuple(backbone.image_size)

    def encode(ids: torch.Tensor, poses: torch.Tensor) -> torch.Tensor:
        batch, frames = ids.shape
        backbone.stem.trunk.pending = trunk_feats[ids.flatten()].float()
        images = torch.zeros(batch, frames, 3, *size)
        return backbone(images, trunk_k[ids], poses)

    run_args = {k: v for k, v in vars(args).items() if k not in ("minutes", "trunk_cache")}
    step, log = 0, []
    state_path = out / "state.pt"
    if state_path.is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=False)
        if state["args"] != run_args:
            raise SystemExit(f"{state_path} was written with other arguments; use a new --out")
        with_real_trunk(lambda: backbone.load_state_dict(state["backbone"]))
        g2g.load_state_dict(state["g2g"])
        opt.load_state_dict(state["opt"])
        step, log = state["step"], state["log"]
    started, first = time.perf_counter(), step
    gen = torch.Generator().manual_seed(args.seed)
    while step < args.steps:
        gen.manual_seed(args.seed * 1_000_003 + step)
        bucket = buckets[int(torch.multinomial(weights, 1, generator=gen))]
        pick = torch.randint(len(bucket), (args.batch,), generator=gen)
        ida, idb, pa, pb, gt_a, gt_b = (torch.stack(x) for x in
                                        zip(*[groups_of[bucket[int(k)]] for k in pick]))
        poses_a, poses_b = perturb_group_poses(pa, pb, noise, gen)
        scale = 0.5 * (1 + math.cos(math.pi * step / args.steps))  # cosine to 0
        for g, lr in zip(opt.param_groups, base_lrs):
            g["lr"] = lr * scale
        with torch.set_grad_enabled(bool(bb_params)):
            fa = encode(ida, poses_a)
            fb = encode(idb, poses_b)
        losses = module(fa, fb, gt_a, gt_b)
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        opt.step()
        step += 1
        log.append({"step": step, **{k: round(float(losses[k].detach()), 5)
                                     for k in ("loss", "rot_b0", "trans_b0")}})
        if step % 25 == 0:
            recent = log[-25:]
            mean = {k: sum(r[k] for r in recent) / len(recent) for k in ("loss", "rot_b0")}
            print(f"step {step}: loss {mean['loss']:.4f} rot_b0 {mean['rot_b0']:.4f} "
                  f"{(time.perf_counter() - started) / max(1, step - first):.2f} s/step",
                  flush=True)
        done = args.minutes and time.perf_counter() - started > 60 * args.minutes
        if step % 100 == 0 or step == args.steps or done:
            torch.save({"args": run_args, "step": step, "log": log,
                        "backbone": with_real_trunk(backbone.state_dict),
                        "g2g": g2g.state_dict(), "opt": opt.state_dict()}, state_path)
            with_real_trunk(lambda: export_model(out, cfg, backbone, g2g, {
                "task": "reloc", "steps": step, "probe": "probe_joint_finetune", **run_args}))
            (out / "log.json").write_text(json.dumps(log))
        if done:
            break
    print(f"stopped at step {step} of {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
