"""``g2g-sim``: generate simulated multi-camera trajectories (resumable).

Examples::

    g2g-sim --out data/sim --split train --num-scenes 4 --traversals 3 --frames 200
    g2g-sim --out data/sim --seeds 20000 20001 --rig-preset ring5 --workers 2
    g2g-sim --out data/sim --split val --num-scenes 2 --labels   # + overlap labels and pairs
    g2g-sim --out data/street --scene-preset street --rig-preset car6 --motion car \
        --textures photo --lighting random --exposure jitter

Scene seeds come from the fixed split ranges of :mod:`g2g_model.data.splits` unless given
explicitly. Re-running the same command skips every complete trajectory.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import time
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from g2g_model.data.sim.generate import (CHOICES, SimConfig, generate_trajectory,
                                         scene_layout_summary)
from g2g_model.data.sim.generate import scene_dir
from g2g_model.data.sim.rigs import RIG_PRESETS
from g2g_model.data.sim.scene import SCENE_PRESETS
from g2g_model.data.splits import SPLIT_SEEDS, split_seeds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="g2g-sim", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("data/sim"), help="output root")
    p.add_argument("--split", choices=sorted(SPLIT_SEEDS), default="train")
    p.add_argument("--num-scenes", type=int, default=1)
    p.add_argument("--offset", type=int, default=0, help="first seed index within the split")
    p.add_argument("--seeds", type=int, nargs="*", help="explicit scene seeds (override split)")
    p.add_argument("--traversals", type=int, default=3)
    p.add_argument("--frames", type=int, default=200)
    p.add_argument("--scene-preset", choices=sorted(SCENE_PRESETS), default="default")
    p.add_argument("--rig-preset", choices=sorted(RIG_PRESETS), default="random")
    p.add_argument("--image-size", type=int, default=224,
                   help="image side (about sqrt(width * height) for non-square rig presets)")
    p.add_argument("--motion", choices=CHOICES["motion"], default="walk",
                   help="motion preset: walk (0.1-0.3 m per frame), stop_go (0-1 m), car (a "
                        "vehicle wanting 0-3 m)")
    p.add_argument("--textures", choices=CHOICES["textures"], default="procedural",
                   help="photo: about half the materials are photographs")
    p.add_argument("--lighting", choices=CHOICES["lighting"], default="lamps",
                   help="random: a sun and random lamp / ambient gains per scene and season")
    p.add_argument("--exposure", choices=CHOICES["exposure"], default="fixed",
                   help="jitter: each camera its own drifting gain and gamma")
    p.add_argument("--no-depth", action="store_true", help="do not store depth images")
    p.add_argument("--workers", type=int, default=1, help="parallel processes (trajectories)")
    p.add_argument("--overwrite", action="store_true", help="regenerate complete trajectories")
    p.add_argument("--labels", action="store_true",
                   help="then run `g2g-data overlap` and `g2g-data mine` on --out")
    p.add_argument("--window", type=int, default=5, help="window size for --labels mining")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _job(args: tuple) -> dict:
    out, seed, k, cfg, overwrite = args
    return generate_trajectory(out, seed, k, cfg, overwrite=overwrite)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    seeds = args.seeds if args.seeds else split_seeds(args.split, args.num_scenes, args.offset)
    cfg = SimConfig(scene_preset=args.scene_preset, rig_preset=args.rig_preset,
                    traversals=args.traversals, frames=args.frames,
                    image_size=args.image_size, with_depth=not args.no_depth,
                    motion=args.motion, textures=args.textures, lighting=args.lighting,
                    exposure=args.exposure)
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        sdir = scene_dir(args.out, seed)
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / "scene.json").write_text(json.dumps(
            {**scene_layout_summary(seed, args.scene_preset), "sim_config": asdict(cfg)},
            indent=1))
    jobs = [(args.out, s, k, cfg, args.overwrite) for s in seeds for k in range(cfg.traversals)]
    t0 = time.perf_counter()
    results = []
    bar = tqdm(total=len(jobs), desc="trajectories", unit="traj", disable=None)
    if args.workers > 1:
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            for res in pool.imap_unordered(_job, jobs):
                results.append(res)
                bar.update(1)
    else:
        frames_bar = tqdm(total=len(jobs) * cfg.frames, desc="frames", unit="frame",
                          disable=None)
        for out, seed, k, job_cfg, overwrite in jobs:
            res = generate_trajectory(out, seed, k, job_cfg, overwrite=overwrite,
                                      on_frame=lambda i: frames_bar.update(1))
            if res["skipped"]:
                frames_bar.update(cfg.frames)
            results.append(res)
            bar.update(1)
        frames_bar.close()
    bar.close()
    seconds = time.perf_counter() - t0
    written = [r for r in results if not r["skipped"]]
    cam_frames = sum(r["camera_frames"] for r in written)
    summary = {
        "scenes": len(seeds), "trajectories_written": len(written),
        "trajectories_skipped": len(results) - len(written),
        "frames": sum(r["frames"] for r in written), "camera_frames": cam_frames,
        "seconds": round(seconds, 2),
        "camera_frames_per_s": round(cam_frames / seconds, 1) if written else None,
    }
    if args.labels:
        from g2g_model.data import cli as data_cli

        parser = data_cli.build_parser()
        summary["overlap"] = data_cli.cmd_overlap(parser.parse_args(["overlap", str(args.out)]))
        summary["mining"] = data_cli.cmd_mine(parser.parse_args(
            ["mine", str(args.out), "--window", str(args.window)]))
    (args.out / "summary_sim.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
