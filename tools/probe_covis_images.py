"""Diagnostic: how much do the backbone tokens add over the pixels for choosing a map window?
(docs/COVISIBILITY.md, "Honest assessment".)

Window selection as ``g2g-covis sim-eval`` scores it (W = 4, map = traversal 0, queries = runs of
traversal 1, same camera), with three kinds of per-frame description:

* ``thumbnails``: the frame's colour image shrunk to 8 / 16 / 32 px, compared like the tokens
  (map-whitened similarity, and a cosine after map standardisation), next to the tokens;
* ``cnn``: a small CNN trained from scratch on the training scenes' images (64 px) so that the
  cosine of two frames' descriptors regresses their symmetric overlap, as the covisibility
  embedding does on tokens; scored alone and averaged with the shipped embedding.

Nothing here is shipped: it measures where the window choice is limited.

    python tools/probe_covis_images.py thumbnails --scenes data/sim_val
    python tools/probe_covis_images.py cnn-data --scenes data/sim_train --out outputs/cnn/train.pt
    python tools/probe_covis_images.py cnn-data --scenes data/sim_test --out outputs/cnn/test.pt
    python tools/probe_covis_images.py cnn-train --data outputs/cnn/train.pt \
        --out outputs/cnn/net.pt --steps 3000
    python tools/probe_covis_images.py cnn-eval --net outputs/cnn/net.pt \
        --data outputs/cnn/test.pt --scenes data/sim_test

``--cache`` is the scene token cache of ``g2g-covis`` (the frames are encoded once).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Callable, Dict, List

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from g2g_model.covisibility import sim_data
from g2g_model.covisibility.embedding import load_embedding
from g2g_model.covisibility.evaluate import window_selection_accuracy
from g2g_model.data.format import TrajectoryReader
from g2g_model.inference import G2GPipeline, default_checkpoint
from g2g_model.window_selection import token_statistics

WINDOW = 4


def scene_frames(scenes: str, cache: str) -> List[sim_data.SceneFrames]:
    pipe = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    return [sim_data.load_scene_frames(pipe, s, 2, cache_dir=cache)
            for s in sim_data.scene_dirs(scenes)]


def frame_images(scene, frames: sim_data.SceneFrames, size: int) -> torch.Tensor:
    """``[F, 3, size, size]`` uint8: every frame of ``frames``, area-downsampled."""
    readers = [TrajectoryReader(p) for p in sorted(scene.glob("traj_*"))]
    out = []
    for trav, cam, frame in zip(frames.traversal, frames.camera, frames.frame):
        reader = readers[trav]
        rgb = reader.image(reader.rig.names[cam], int(frame))
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
        out.append(F.interpolate(x, size=(size, size), mode="area")[0].round().to(torch.uint8))
    return torch.stack(out)


def standardised_cosine(frames: sim_data.SceneFrames) -> Callable:
    """Cosine of the flattened descriptors after standardising with the map's statistics."""
    mean, std = token_statistics(frames.tokens[torch.from_numpy(frames.traversal == 0)])

    def score(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        za = F.normalize(((a.float() - mean) / std).flatten(1), dim=-1)
        zb = F.normalize(((b.float() - mean) / std).flatten(1), dim=-1)
        return (za @ zb.T).numpy()
    return score


def report(trues: List[np.ndarray], preds: Dict[str, List[np.ndarray]]) -> None:
    for name, pred in preds.items():
        acc = window_selection_accuracy(trues, pred, WINDOW)
        print(f"{name:24s} within 0.1 of best: {acc['within_tolerance']:.3f}  "
              f"mean gap {acc['mean_gap']:.3f}  ({acc['queries']} queries)")


def cmd_thumbnails(args) -> None:
    trues: List[np.ndarray] = []
    preds: Dict[str, List[np.ndarray]] = {}
    for scene, frames in zip(sim_data.scene_dirs(args.scenes),
                             scene_frames(args.scenes, args.cache)):
        variants = {"tokens": frames}
        for size in (8, 16, 32):
            pixels = frame_images(scene, frames, size).float().flatten(2).transpose(1, 2)
            variants[f"rgb{size}"] = dataclasses.replace(frames, tokens=pixels)
        for name, v in variants.items():
            queries, scored = sim_data.scored_window_queries(
                v, WINDOW, {"whitened": sim_data.map_whitened(v),
                            "standardised": standardised_cosine(v)})
            if name == "tokens":
                trues += queries.trues
            for kind, p in scored.items():
                preds.setdefault(f"{name} {kind}", []).extend(p)
    report(trues, preds)


def _block(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(i, o, 3, 2, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(),
                         nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU())


class ImageNet(nn.Module):
    """64 px RGB -> 4 stride-2 blocks -> 4 x 4 x 4w -> linear -> unit ``dim`` descriptor."""

    def __init__(self, width: int = 32, dim: int = 128):
        super().__init__()
        self.features = nn.Sequential(_block(3, width), _block(width, 2 * width),
                                      _block(2 * width, 4 * width), _block(4 * width, 4 * width))
        self.head = nn.Linear(4 * width * 16, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() / 127.5 - 1.0
        return F.normalize(self.head(self.features(x).flatten(1)), dim=-1)


def cmd_cnn_data(args) -> None:
    data = []
    for scene, frames in zip(sim_data.scene_dirs(args.scenes),
                             scene_frames(args.scenes, args.cache)):
        data.append({"scene": scene.name, "images": frame_images(scene, frames, 64),
                     "overlap": torch.from_numpy(sim_data.scene_overlap(frames)).half()})
        print(scene.name, len(frames), flush=True)
    torch.save(data, args.out)


def cmd_cnn_train(args) -> None:
    torch.manual_seed(0)
    data = torch.load(args.data)
    positives = [torch.nonzero(d["overlap"].float() > 0.05) for d in data]
    net = ImageNet(args.width)
    opt = torch.optim.AdamW(net.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=args.steps,
                                                pct_start=0.05)
    gen = torch.Generator().manual_seed(0)
    t0, running = time.time(), None
    for step in range(args.steps):
        a, b, y = [], [], []
        for k, s in enumerate(torch.randint(len(data), (args.batch,), generator=gen).tolist()):
            d = data[s]
            if k < args.batch // 2:   # half covisible pairs, half random (mostly not)
                pos = positives[s]
                i, j = pos[int(torch.randint(len(pos), (1,), generator=gen))].tolist()
            else:
                i, j = torch.randint(len(d["images"]), (2,), generator=gen).tolist()
            a.append(d["images"][i])
            b.append(d["images"][j])
            y.append(float(d["overlap"][i, j]))
        x = torch.stack(a + b).float()
        # Brightness and colour gain per image (seasons and exposure).
        gain = (torch.empty(len(x), 3, 1, 1).uniform_(0.8, 1.2, generator=gen)
                * torch.empty(len(x), 1, 1, 1).uniform_(0.7, 1.3, generator=gen))
        e = net((x * gain).clamp(0, 255))
        loss = F.mse_loss((e[:args.batch] * e[args.batch:]).sum(-1), torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running = float(loss) if running is None else 0.98 * running + 0.02 * float(loss)
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step} loss {running:.4f} {time.time() - t0:.0f} s", flush=True)
        if step % 500 == 499 or step == args.steps - 1:
            torch.save({"width": args.width, "state": net.state_dict()}, args.out)


def cmd_cnn_eval(args) -> None:
    saved = torch.load(args.net)
    net = ImageNet(saved["width"])
    net.load_state_dict(saved["state"])
    net.eval()
    embedding, _ = load_embedding(default_checkpoint("covisibility_embedding"))
    data = torch.load(args.data)

    def cosine(a, b):
        return (a.float().flatten(1) @ b.float().flatten(1).T).numpy()

    trues: List[np.ndarray] = []
    preds: Dict[str, List[np.ndarray]] = {}
    for frames, d in zip(scene_frames(args.scenes, args.cache), data):
        with torch.no_grad():
            desc = torch.cat([net(d["images"][i:i + 256])
                              for i in range(0, len(d["images"]), 256)])
        queries, tok = sim_data.scored_window_queries(
            frames, WINDOW, {"embedding": sim_data.map_embedded(embedding, frames)})
        _, img = sim_data.scored_window_queries(
            dataclasses.replace(frames, tokens=desc[:, None, :]), WINDOW, {"cnn": cosine})
        trues += queries.trues
        for name, p in {**tok, **img}.items():
            preds.setdefault(name, []).extend(p)
    preds["mean(embedding, cnn)"] = [0.5 * (a + b)
                                     for a, b in zip(preds["embedding"], preds["cnn"])]
    report(trues, preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", default="outputs/covis_embedding/token_cache",
                        help="g2g-covis scene token cache (tools/train_covis_embedding.sh)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("thumbnails")
    p.add_argument("--scenes", required=True)
    p = sub.add_parser("cnn-data")
    p.add_argument("--scenes", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("cnn-train")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--width", type=int, default=32)
    p = sub.add_parser("cnn-eval")
    p.add_argument("--net", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--scenes", required=True)
    args = parser.parse_args()
    torch.set_num_threads(2)
    {"thumbnails": cmd_thumbnails, "cnn-data": cmd_cnn_data, "cnn-train": cmd_cnn_train,
     "cnn-eval": cmd_cnn_eval}[args.cmd](args)


if __name__ == "__main__":
    main()
