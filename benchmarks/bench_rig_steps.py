"""Accuracy and CPU cost of rig-odometry verification on images with native detail.

The node benchmark's 640x480 cameras are 224 px renders upscaled, so describing them downscaled
loses nothing. This benchmark renders a 5-camera ring traversal at a native size (default 480 x
480: fine texture is really there) and verifies keyframe steps 1 and 2 frames apart with several
settings, seeded like the node (the true motion, 0.1 m / 2 deg off, two draws per step), on the
same steps. Per setting: the translation error of the step against the ground truth (mean,
median, p90, max, how many over 10 and 50 mm), the mean rotation error and the CPU time of one
step whose previous keyframe is described (single-threaded torch: the load of this shared
machine hurts multi-threaded timings far more).

Settings are ``PX/FEATURES/TURN[/OVERLAP]``: ``verify_max_image_px`` (0 = full size),
``verify_max_features``, ``verify_max_turn_deg`` and ``verify_overlap`` (1, the default, or 0).

    python -m benchmarks.bench_rig_steps --size 480 --settings 0/2000/180 320/1000/30
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import List, Optional

import cv2
import numpy as np
import torch

from benchmarks.common import emit_report, machine_info, machine_line
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.geometry import make_pose, relative_pose, rotation_angle_deg
from g2g_model.estimation.groups import Group
from g2g_model.localization.rig_motion import RigMotionVerifier, rig_verifier_config


def seeded(truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The true motion 0.1 m and 2 deg off (random directions): a G2G-like seed."""
    axis, shift = rng.normal(size=3), rng.normal(size=3)
    turn = cv2.Rodrigues(axis / np.linalg.norm(axis) * np.radians(2.0))[0]
    return truth @ make_pose(turn, 0.1 * shift / np.linalg.norm(shift))


def evaluate(traj: TrajectoryReader, setting: str) -> str:
    px, features, turn, overlap = (setting.split("/") + ["1"])[:4]
    verifier = RigMotionVerifier(rig_verifier_config(
        max_image_px=int(px), max_features=int(features), max_turn_deg=float(turn),
        overlap=overlap == "1"))
    cams = traj.cameras
    intrinsics = np.stack([traj.rig[c].K for c in cams])
    base = np.stack([traj.rig[c].T_body_cam for c in cams])
    groups = [Group([traj.image(c, i) for c in cams], intrinsics, base)
              for i in range(traj.num_frames)]
    errors, cpu = [], []
    for gap in (1, 2):
        for draw in range(2):
            rng = np.random.default_rng(draw)
            for i in range(traj.num_frames - gap):
                for image in groups[i].images:  # the previous keyframe is described
                    verifier.local.describe(image)
                truth = relative_pose(traj.world_T_body[i], traj.world_T_body[i + gap])
                t0 = time.process_time()
                result = verifier(groups[i], groups[i + gap], seeded(truth, rng))
                cpu.append(time.process_time() - t0)
                rel = relative_pose(truth, result.delta)
                errors.append((1e3 * np.linalg.norm(rel[:3, 3]), rotation_angle_deg(rel[:3, :3])))
    err = np.array(errors)
    mm = err[:, 0]
    return (f"| {px} / {features} / {turn} / {overlap} | {mm.mean():.1f} / {np.median(mm):.1f} | "
            f"{np.percentile(mm, 90):.1f} | {mm.max():.0f} | {int((mm > 10).sum())} | "
            f"{int((mm > 50).sum())} | {err[:, 1].mean():.3f} | "
            f"{1e3 * np.median(cpu):.0f} |")


def run(size: int, frames: int, seed: int, settings: List[str]) -> str:
    torch.set_num_threads(1)
    out = tempfile.mkdtemp(prefix="bench_rig_steps_")
    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=1, frames=frames,
                    with_depth=False, image_size=size)
    traj = TrajectoryReader(generate_trajectory(out, seed=seed, traversal=0, cfg=cfg)["path"])
    steps = 2 * (2 * frames - 3)
    lines = ["## Machine", *machine_info(), f"- at the start: {machine_line()}", "",
             f"Scene: test seed {seed}, ring5 rig (80 deg cameras), {size} x {size} native "
             f"renders, {frames} frames; {steps} steps (1 and 2 frames apart, two seeds each).",
             "", "| max_image_px / max_features / max_turn_deg / overlap | translation error "
             "mean / median (mm) | p90 (mm) | max (mm) | > 10 mm | > 50 mm | rotation error mean "
             "(deg) | CPU per step (ms) |", "|---|---|---|---|---|---|---|---|"]
    for setting in settings:
        lines.append(evaluate(traj, setting))
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=480)
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20011)
    parser.add_argument("--settings", nargs="+", default=["0/2000/180", "320/1000/30"])
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    emit_report("Rig-odometry verification on native-detail images",
                "benchmarks.bench_rig_steps", argv,
                run(opts.size, opts.frames, opts.seed, opts.settings), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
