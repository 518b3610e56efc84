"""Rig-odometry steps at car scale: the step's length from the rig's overlapping cameras.

Renders a traversal of a car-sized 5-camera rig (``car5``: a forward stereo pair 0.8 m apart,
left, right and rear cameras at the car's sides and back, 80 deg views; the stereo pair
overlaps by 64 deg, each of it with its side camera by 8 deg; ``--cameras`` picks a subset)
through one large hall (``hall`` scene), 1-3 m per frame (a car's, not the walking robot's
0.1-0.3 m; this benchmark's motion only), and verifies every consecutive step, in order, three
times on the SAME steps: with the relative pose between keyframes alone (``verify_overlap:
false``, ``verify_keyframe_map: false``), with the overlap path, and with the keyframe map as
well (the default: each step gets the keyframe before and the previous step where its length
was measured, as in ``rig_odometry``). Two G2G seeds: ``zero`` (G2G says the rig
stood still, rotation 2 deg off: what the shipped model predicts on a real car) and ``near``
(the true step 0.1 m and 2 deg off). Per setting and seed: the translation error as a share of
the step's length (mean, max), the rotation error, the accepted steps (not ``g2g``) off by more
than 10 % of their length, the steps that fell back to G2G, which geometry made the accepted
steps, and the CPU time of one step whose previous keyframe is described (single-threaded
torch, as ``bench_rig_steps``).

    python -m benchmarks.bench_rig_car_steps --size 480 --frames 24
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from typing import List, Optional

import numpy as np
import torch

from benchmarks.bench_rig_steps import seeded
from benchmarks.common import emit_report, machine_info, machine_line
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.data.sim.trajectory import MotionConfig
from g2g_model.estimation.groups import Group
from g2g_model.geometry import relative_pose, rotation_angle_deg
from g2g_model.localization.rig_motion import RigMotionVerifier, rig_verifier_config
from g2g_model.localization.verdict import PATH_G2G

# A car's motion at 10 Hz: 1-3 m per frame, a turning rate a car manages, room to its cameras.
CAR_MOTION = MotionConfig(step_m=(1.0, 3.0), radius_m=1.0, max_turn_deg=15.0, places_per_room=4)


def zero_seed(truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """G2G standing still: no translation, the true rotation 2 deg off."""
    out = seeded(truth, rng)
    out[:3, 3] = 0.0
    return out


SEEDS = {"zero": zero_seed, "near": seeded}


def car_groups(size: int, frames: int, seed: int, cameras: Optional[List[int]] = None):
    """``(groups, world_T_body)`` of a rendered car traversal (``cameras``: a subset)."""
    out = tempfile.mkdtemp(prefix="bench_rig_car_steps_")
    cfg = SimConfig(scene_preset="hall", rig_preset="car5", traversals=1, frames=frames,
                    with_depth=False, image_size=size)
    traj = TrajectoryReader(generate_trajectory(out, seed=seed, traversal=0, cfg=cfg,
                                                motion=CAR_MOTION)["path"])
    cams = [traj.cameras[i] for i in cameras] if cameras else traj.cameras
    intrinsics = np.stack([traj.rig[c].K for c in cams])
    base = np.stack([traj.rig[c].T_body_cam for c in cams])
    return ([Group([traj.image(c, i) for c in cams], intrinsics, base)
             for i in range(traj.num_frames)], traj.world_T_body)


SETTINGS = {"relative only": {"overlap": False, "keyframe_map": False},
            "overlap + relative": {"overlap": True, "keyframe_map": False},
            "keyframe map + overlap + relative": {"overlap": True, "keyframe_map": True}}


def evaluate(groups, world_T_body, setting: str, seed_name: str) -> str:
    """One table row: every consecutive step verified in order; with the keyframe map, each
    step after one whose length the geometry measured gets the keyframe before and that step,
    as ``rig_odometry`` hands them (``MotionVerification.carries_length``)."""
    verifier = RigMotionVerifier(rig_verifier_config(**SETTINGS[setting]))
    rng = np.random.default_rng(0)
    rows, cpu, methods = [], [], collections.Counter()
    before = None
    for i in range(len(groups) - 1):
        for image in groups[i].images:  # the previous keyframe is described
            verifier.local.describe(image)
        truth = relative_pose(world_T_body[i], world_T_body[i + 1])
        t0 = time.process_time()
        result = verifier(groups[i], groups[i + 1], SEEDS[seed_name](truth, rng), before=before)
        cpu.append(time.process_time() - t0)
        before = (groups[i], result.delta) if result.carries_length else None
        rel = relative_pose(truth, result.delta)
        length = float(np.linalg.norm(truth[:3, 3]))
        rows.append((100 * np.linalg.norm(rel[:3, 3]) / length, rotation_angle_deg(rel[:3, :3]),
                     result.path != PATH_G2G))
        methods[(result.method or "g2g") + (" (length G2G's)" if result.length_from_g2g
                                            else "")] += 1
    err = np.array(rows, float)
    accepted = err[:, 2] > 0
    return (f"| {setting} | {seed_name} | "
            f"{err[:, 0].mean():.1f} / {np.median(err[:, 0]):.1f} / {err[:, 0].max():.1f} | "
            f"{err[:, 1].mean():.3f} | {int((accepted & (err[:, 0] > 10)).sum())} | "
            f"{int((~accepted).sum())} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(methods.items()))} | "
            f"{1e3 * np.median(cpu):.0f} / {1e3 * np.percentile(cpu, 90):.0f} |")


def run(size: int, frames: int, seed: int, cameras: Optional[List[int]] = None) -> str:
    torch.set_num_threads(1)
    groups, poses = car_groups(size, frames, seed, cameras)
    lengths = np.linalg.norm(np.diff(poses[:, :3, 3], axis=0), axis=1)
    turns = [rotation_angle_deg(relative_pose(a, b)[:3, :3]) for a, b in zip(poses, poses[1:])]
    lines = ["## Machine", *machine_info(), f"- at the start: {machine_line()}", "",
             f"Scene: hall seed {seed}, car5 rig (cameras {cameras or 'all'}: "
             f"{len(groups[0].images)} of {size} x "
             f"{size}, native renders), {frames} frames: {frames - 1} steps of "
             f"{lengths.min():.2f}-{lengths.max():.2f} m (mean {lengths.mean():.2f} m), "
             f"turning {min(turns):.1f}-{max(turns):.1f} deg.", "",
             "| verification | G2G seed | translation error mean / median / max (% of the "
             "step) | rotation error mean (deg) | accepted steps off > 10 % | fell back to G2G "
             "| made by | CPU per step median / p90 (ms) |", "|---|---|---|---|---|---|---|---|"]
    for seed_name in SEEDS:
        for setting in SETTINGS:
            lines.append(evaluate(groups, poses, setting, seed_name))
            print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=480)
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--seed", type=int, default=20011)
    parser.add_argument("--cameras", type=int, nargs="+", default=None,
                        help="indices of the car5 cameras to use (0, 1: the stereo pair)")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    emit_report("Rig-odometry steps at car scale", "benchmarks.bench_rig_car_steps", argv,
                run(opts.size, opts.frames, opts.seed, opts.cameras), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
