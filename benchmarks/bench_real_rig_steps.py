"""Rig odometry on real car steps: a real stereo pair driving, ground truth per frame.

Replays every trajectory under ``--root`` (the dataset format; ``tools/make_real_stereo.py``
builds ``data/real_stereo_kitti``: two KITTI odometry clips, a car's forward stereo pair 0.54 m
apart, 1.0-1.2 m per frame) through the rig odometry the node runs (``RigOdometry`` of
``g2g_ros.odometry_core`` with the shipped rig model as its G2G call and the node's
``RigMotionVerifier``), taking every ``stride``-th frame as a keyframe (1: steps of about
1.2 m, 2: about 2.4 m). Per verifier setting: the published step's translation error as a share
of the true step's length (mean / median / max), its rotation error, the accepted steps (not
left to G2G) off by more than 10 % of their length, which geometry made the steps, and the CPU
time of one step (the G2G prediction included; process time). Beside them, G2G alone (its step
before verification) and "no motion" on the same steps.

    python -m benchmarks.bench_real_rig_steps --root data/real_stereo_kitti --strides 1 2
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from typing import Dict, List, Optional

import numpy as np
import torch

from benchmarks.common import emit_report, machine_info, machine_line
from g2g_model.data.format import TrajectoryReader, find_trajectories
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.geometry import invert_pose, relative_pose, rotation_angle_deg
from g2g_model.localization.image_keys import image_keys
from g2g_model.localization.rig_motion import RigMotionVerifier, rig_verifier_config
from g2g_ros.odometry_core import RigFrames, RigOdometry

SETTINGS: Dict[str, dict] = {
    "relative only": {"overlap": False, "keyframe_map": False},
    "overlap + relative": {"overlap": True, "keyframe_map": False},
    "keyframe map + overlap + relative (default)": {},
}


class CachedG2G:
    """The rig model's prediction per pair of groups, computed once for all settings."""

    def __init__(self, pipe: G2GPipeline):
        self.pipe, self.cache, self.cpu = pipe, {}, []
        self.last = None  # the answer of the latest call: G2G's step before verification
        # CPU seconds of the latest call's prediction (also when it came from the cache), and
        # those the latest call spent: a step's cost counts the prediction in every setting.
        self.last_cpu = self.spent = 0.0

    def __call__(self, group_a, group_b):
        t0 = time.process_time()
        key = (image_keys(group_a.images[0]), image_keys(group_b.images[0]))
        if key not in self.cache:
            pred = self.pipe.predict(group_a, group_b)
            self.cpu.append(time.process_time() - t0)
            self.cache[key] = ((pred.a0_T_b0, pred.b0_estimates), self.cpu[-1])
        self.last, self.last_cpu = self.cache[key]
        self.spent = time.process_time() - t0
        return self.last


def step_error(truth: np.ndarray, delta: np.ndarray):
    """(translation error as % of the true step's length, rotation error deg)."""
    rel = relative_pose(truth, delta)
    return (100 * float(np.linalg.norm(delta[:3, 3] - truth[:3, 3]))
            / max(float(np.linalg.norm(truth[:3, 3])), 1e-9), rotation_angle_deg(rel[:3, :3]))


def replay(traj: TrajectoryReader, stride: int, g2g: CachedG2G, setting: dict):
    """Per keyframe step ``(truth, published delta, G2G's delta, path, method, cpu s)``."""
    cams = list(traj.cameras)
    base_T_cam = {c: traj.rig[c].T_body_cam for c in cams}
    intrinsics = np.stack([traj.rig[c].K for c in cams])
    verifier = RigMotionVerifier(rig_verifier_config(**setting))
    odo = RigOdometry(g2g, base_T_cam, verifier=verifier)
    frames = list(range(0, traj.num_frames, stride))
    rows, prev = [], None
    for i in frames:
        images = [traj.image(c, i) for c in cams]
        group = RigFrames(int(traj.timestamps_ns[i]), cams, images, intrinsics)
        t0 = time.process_time()
        g2g.spent = g2g.last_cpu = 0.0
        update = odo.process(group)
        cpu = time.process_time() - t0 - g2g.spent + g2g.last_cpu
        if prev is not None:
            truth = relative_pose(traj.world_T_body[prev], traj.world_T_body[i])
            a0_T_b0, _ = g2g.last  # asked by this step's odo.process
            cam0 = base_T_cam[cams[0]]
            rows.append((truth, update.delta, cam0 @ a0_T_b0 @ invert_pose(cam0), update.path,
                         update.method or "g2g", cpu))
        prev = i
    return rows


def table(trajs: List[TrajectoryReader], strides: List[int], max_px: List[int],
          g2g: CachedG2G) -> List[str]:
    lines = ["| clip | keyframe step (m) | verifier | translation error mean / median / max (% "
             "of the step) | rotation error mean (deg) | accepted steps off > 10 % | left to "
             "G2G | made by | CPU per step median (ms) |", "|---|---|---|---|---|---|---|---|---|"]
    baselines = []
    for traj in trajs:
        for stride in strides:
            for px in max_px:
                for name, setting in SETTINGS.items():
                    rows = replay(traj, stride, g2g, dict(setting, max_image_px=px))
                    err = np.array([step_error(t, d) for t, d, *_ in rows])
                    accepted = np.array([r[3] != "g2g" for r in rows])
                    lengths = [float(np.linalg.norm(r[0][:3, 3])) for r in rows]
                    made = collections.Counter(r[4] for r in rows)
                    label = name if px == max_px[0] else f"{name}, {px} px"
                    lines.append(
                        f"| {traj.path.name} | {np.mean(lengths):.2f} | {label} | "
                        f"{err[:, 0].mean():.1f} / {np.median(err[:, 0]):.1f} / "
                        f"{err[:, 0].max():.1f} | {err[:, 1].mean():.3f} | "
                        f"{int((accepted & (err[:, 0] > 10)).sum())} | {int((~accepted).sum())} | "
                        f"{', '.join(f'{k} {v}' for k, v in sorted(made.items()))} | "
                        f"{1e3 * np.median([r[5] for r in rows]):.0f} |")
                    print(lines[-1], flush=True)
            g2g_err = np.array([step_error(t, g) for t, _, g, *_ in rows])
            still = np.array([step_error(t, np.eye(4)) for t, *_ in rows])
            baselines.append(
                f"| {traj.path.name} | {np.mean(lengths):.2f} | "
                f"{np.mean([np.linalg.norm(r[2][:3, 3] - r[0][:3, 3]) for r in rows]):.2f} / "
                f"{g2g_err[:, 1].mean():.2f} | "
                f"{np.mean([np.linalg.norm(r[0][:3, 3]) for r in rows]):.2f} / "
                f"{still[:, 1].mean():.2f} | "
                f"{np.mean([np.linalg.norm(r[2][:3, 3]) for r in rows]):.2f} |")
    return lines + ["", "G2G alone (the shipped rig model's step before verification) against "
                    "\"no motion\" on the same steps:", "",
                    "| clip | keyframe step (m) | G2G alone: translation error mean (m) / "
                    "rotation (deg) | \"no motion\": translation (m) / rotation (deg) | G2G's "
                    "step length mean (m) |", "|---|---|---|---|---|", *baselines]


def run(root: str, strides: List[int], max_px: List[int]) -> str:
    torch.set_num_threads(1)
    trajs = [TrajectoryReader(p) for p in find_trajectories(root)]
    if not trajs:
        raise SystemExit(f"{root}: no trajectory (build it with tools/make_real_stereo.py)")
    g2g = CachedG2G(G2GPipeline.default("rig_odometry"))
    lines = ["## Machine", *machine_info(), f"- at the start: {machine_line()}", ""]
    for traj in trajs:
        steps = np.linalg.norm(np.diff(traj.world_T_body[:, :3, 3], axis=0), axis=1)
        size = traj.image(traj.cameras[0], 0).shape
        lines.append(f"- {traj.path.name}: {traj.num_frames} frames of {len(traj.cameras)} "
                     f"cameras ({size[1]} x {size[0]}), {steps.min():.2f}-{steps.max():.2f} m "
                     f"per frame")
    lines += ["", *table(trajs, strides, max_px, g2g), "",
              f"G2G prediction CPU median {1e3 * np.median(g2g.cpu):.0f} ms "
              f"({len(g2g.cpu)} predictions)."]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default="data/real_stereo_kitti")
    parser.add_argument("--strides", type=int, nargs="+", default=[1, 2],
                        help="keyframe every k-th frame")
    parser.add_argument("--max-px", type=int, nargs="+", default=[320],
                        help="verify_max_image_px values (the first is the node's default)")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    emit_report("Rig odometry on real car steps", "benchmarks.bench_real_rig_steps", argv,
                run(opts.root, opts.strides, opts.max_px), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
