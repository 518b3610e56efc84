"""Cost of geometric verification beside G2G, on this CPU (the verified-poses issue's budget:
<= 300 ms per localization).

A cross-season simulator scene (the demo's: test seed 20000, 5-camera ring, 224 x 224) is
rendered; then, per query window, in the same run:

1. relocalization: G2G 5+5 (embedded default) and the structure verifier on the query window
   with every rig camera (25 query images) against the map window's 25 images. Three states:
   ``steady`` (the map window and four of the five query instants were seen by earlier
   localizations, so only the newest instant's 5 images are described), ``tracking`` (the
   robot moved on: both windows shift by one instant) and ``cold`` (nothing cached: every image
   described, the map window triangulated, e.g. the first localization after a map load);
2. rig odometry: one G2G step (5 cameras at two keyframes) and its generalized relative pose,
   at 224 x 224 and with the images upscaled to 640 x 480 (the node benchmark's cameras), with
   the node's defaults and with the settings before them (full-size images, 2,000 features,
   all camera pairs); the step's error against the ground truth beside each.

The verification/G2G ratio is printed beside the times.

    python -m benchmarks.bench_verification --output benchmarks/RESULTS_verification.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import cv2
import numpy as np

from benchmarks.common import emit_report, machine_info
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.sim.generate import SimConfig, generate_trajectory
from g2g_model.geometry import make_pose, relative_pose, rotation_angle_deg
from g2g_model.estimation.groups import Group
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.localization.rig_motion import RigMotionVerifier, rig_verifier_config
from g2g_model.localization.verification import VerifierConfig
from g2g_model.localization.window_relative import RelocalizationVerifier


def ms(values: List[float]) -> str:
    return f"{1e3 * statistics.median(values):.0f} (p90 {1e3 * np.percentile(values, 90):.0f})"


def run(windows: int, frames: int) -> str:
    out = Path(tempfile.mkdtemp(prefix="bench_verify_"))
    cfg = SimConfig(scene_preset="small", rig_preset="ring5", traversals=2, frames=frames,
                    with_depth=False)
    mapping, query = (TrajectoryReader(generate_trajectory(out, 20000, k, cfg)["path"])
                      for k in (0, 1))
    reloc = G2GPipeline.default("relocalization")
    rig = G2GPipeline.default("rig_odometry")
    g2g_ms, steady, tracking, cold, paths = [], [], [], [], []
    verifier = RelocalizationVerifier()
    starts = np.linspace(0, query.num_frames - 13, windows).astype(int)
    for s in starts:
        q_frames = list(range(s, s + 10, 2))
        body = query.world_T_body[q_frames[0]]
        dist = np.linalg.norm(mapping.world_T_body[:, :3, 3] - body[:3, 3], axis=1)
        m0 = int(np.clip(np.argmin(dist) - 4, 0, mapping.num_frames - 11))
        group_a, group_b = mapping.rig_group(range(m0, m0 + 9, 2)), query.rig_group(q_frames)
        head_a = Group(group_a.images[:5], group_a.intrinsics[:5], group_a.cam_to_world[:5])
        head_b = Group(group_b.images[:5], group_b.intrinsics[:5], group_b.cam_to_world[:5])
        t0 = time.perf_counter()
        pred = reloc.predict(head_a, head_b)
        g2g_ms.append(time.perf_counter() - t0)
        map_T_b = np.asarray(pred.world_T_b)[0] @ np.linalg.inv(
            np.asarray(group_b.cam_to_world)[0]) @ np.asarray(group_b.cam_to_world)
        fresh = RelocalizationVerifier()
        t0 = time.perf_counter()
        fresh(group_a, group_b, map_T_b)
        cold.append(time.perf_counter() - t0)
        # Steady state: everything but the newest query instant was described before.
        newest = {4, 9, 14, 19, 24}
        warm_b = Group([im if k not in newest else im.copy() for k, im in
                        enumerate(group_b.images)], group_b.intrinsics, group_b.cam_to_world)
        # While tracking, the node's previous geometric fix predicts where each query camera
        # looks (view_prior); the cold call stands in for that first fix.
        first = fresh(group_a, group_b, map_T_b)
        odom_b = np.asarray(group_b.cam_to_world)
        prior = first.map_T_b0 @ np.linalg.inv(odom_b[0]) @ odom_b
        verifier(group_a, Group([im for k, im in enumerate(group_b.images) if k not in newest],
                                group_b.intrinsics[:20], group_b.cam_to_world[:20]), map_T_b[:20],
                 view_prior=prior[:20])
        for k in newest:  # make the newest instant's images new to the cache
            warm_b.images[k][0, 0, 0] ^= 1
        t0 = time.perf_counter()
        result = verifier(group_a, warm_b, map_T_b, view_prior=prior)
        steady.append(time.perf_counter() - t0)
        paths.append(result.path)
        # Tracking: the robot moved on by one instant, so both windows move by one instant (5
        # new query images, 5 new map images, the new map pairs triangulated).
        next_a = mapping.rig_group(range(m0 + 2, m0 + 11, 2))
        next_b = query.rig_group([f + 2 for f in q_frames])
        next_map_T_b = map_T_b[0] @ np.linalg.inv(np.asarray(next_b.cam_to_world)[0]) @ \
            np.asarray(next_b.cam_to_world)
        next_prior = first.map_T_b0 @ np.linalg.inv(odom_b[0]) @ np.asarray(next_b.cam_to_world)
        t0 = time.perf_counter()
        verifier(next_a, next_b, next_map_T_b, view_prior=next_prior)
        tracking.append(time.perf_counter() - t0)
    step_g2g = []
    for s in starts:
        a, b = rig_step(query, s)
        t0 = time.perf_counter()
        rig.predict(a, b)
        step_g2g.append(time.perf_counter() - t0)
    steps = {}
    for size in ((224, 224), (640, 480)):
        for name, cfg in (("defaults", rig_verifier_config()),
                          ("before", VerifierConfig(max_turn_deg=180.0))):
            steps[size, name] = rig_steps(query, starts, cfg, size)
    lines = machine_info() + [
        "", f"Scene: test seed 20000, ring5 rig, 224 x 224, {windows} query windows of "
        f"{frames}-frame traversals (cross-season). Times in ms, median (p90).", "",
        "| stage | G2G (baseline) | verification | ratio |", "|---|---|---|---|",
        f"| relocalization, steady state (1 new instant of 5 cameras) | {ms(g2g_ms)} | "
        f"{ms(steady)} | {statistics.median(steady) / statistics.median(g2g_ms):.2f} |",
        f"| relocalization, tracking (both windows move on by one instant: 10 new images, new "
        f"map pairs) | {ms(g2g_ms)} | {ms(tracking)} | "
        f"{statistics.median(tracking) / statistics.median(g2g_ms):.2f} |",
        f"| relocalization, cold (50 images described, map window triangulated) | {ms(g2g_ms)}"
        f" | {ms(cold)} | {statistics.median(cold) / statistics.median(g2g_ms):.2f} |",
    ]
    accuracy = []
    for ((w, h), name), (times, err) in steps.items():
        lines.append(f"| rig odometry step, {w} x {h}, {RIG_SETTINGS[name]} (new keyframe of 5 "
                     f"images described) | {ms(step_g2g)} | {ms(times)} | "
                     f"{statistics.median(times) / statistics.median(step_g2g):.2f} |")
        accuracy.append(f"- {w} x {h}, {RIG_SETTINGS[name]}: {np.mean(err[:, 0]):.3f} / "
                        f"{np.median(err[:, 0]):.3f} deg, {1e3 * np.mean(err[:, 1]):.1f} / "
                        f"{1e3 * np.median(err[:, 1]):.1f} mm")
    lines += ["", "Relocalization paths: " + ", ".join(
        f"{p} {paths.count(p)}" for p in sorted(set(paths))), "",
        "Rig odometry steps' error against the ground truth, mean / median (seeded with the true "
        "motion 0.1 m / 2 deg off):", *accuracy]
    return "\n".join(lines)


RIG_SETTINGS = {"defaults": "node defaults",
                "before": "before them (full size, 2,000 features, all pairs)"}


def rig_step(traj, s: int, size=(224, 224)):
    """The rig at frames s and s + 2 (body-frame extrinsics), images at ``size``."""
    sx, sy = size[0] / 224.0, size[1] / 224.0
    base = np.stack([traj.rig[c].T_body_cam for c in traj.cameras])
    out = []
    for f in (s, s + 2):
        g = traj.rig_group([f])
        k = np.asarray(g.intrinsics, float) * np.array([[sx], [sy], [1.0]])
        images = [im if size == (224, 224) else cv2.resize(im, size) for im in g.images]
        out.append(Group(images, k, base))
    return out


def rig_steps(traj, starts, cfg, size):
    """Verification time of a rig step whose previous keyframe is described (the new one is
    not) and the error of its motion: ``(seconds, [N, 2] deg / m)``."""
    motion = RigMotionVerifier(cfg)
    times, errors = [], []
    rng = np.random.default_rng(0)
    for s in starts:
        a, b = rig_step(traj, s, size)
        truth = relative_pose(traj.world_T_body[s], traj.world_T_body[s + 2])
        axis = rng.normal(size=3)
        seed = truth @ make_pose(cv2.Rodrigues(axis / np.linalg.norm(axis) * np.radians(2.0))[0],
                                 [0.1, 0.0, 0.0])
        b_new = Group([im.copy() for im in b.images], b.intrinsics, b.cam_to_world)
        for im in b_new.images:
            im[0, 0, 0] ^= 1  # the new keyframe is described; the previous one is cached
        motion(a, b, seed)
        t0 = time.perf_counter()
        result = motion(a, b_new, seed)
        times.append(time.perf_counter() - t0)
        rel = relative_pose(truth, result.delta)
        errors.append((rotation_angle_deg(rel[:3, :3]), np.linalg.norm(rel[:3, 3])))
    return times, np.array(errors)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    emit_report("Verification benchmark", "benchmarks.bench_verification", argv,
                run(opts.windows, opts.frames), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
