"""Rig odometry over long simulated traversals through the node, scored KITTI-style.

Per scale: renders one seeded traversal of at least ``--length`` metres (the frame count from
:func:`g2g_model.data.sim.trajectory.frames_for_length`) into ``--data`` (never into git),
converts it to an MCAP bag with JPEG images (``g2g-bag convert --compressed``'s code), replays
the bag through the real ``rig_odometry`` node with ``g2g-eval-bag --graph rig_odometry`` (a
subprocess: nodes over DDS, evaluation mode, each group published once the node has answered
the previous one, so the node keeps up whatever the machine's speed) and reports, from the
recorded outputs against the bag's ground truth: KITTI-style RTE (% of the segment) and RRE
(deg / 100 m) per segment length, the per-step errors of the body's motion between
consecutive outputs (translation as a share of the step, rotation, the step length's signed
bias and the signed heading error, which add up along a traversal), the end-point drift and
how many groups the node processed.

Scales:

* ``car``: the ``car5`` rig (forward stereo pair, side and rear cameras, ``--rig sim``
  parameters with the bag's cameras) driving
  laps of the ``hall`` scene at a car's 1-3 m per frame at 10 Hz (``CAR_MOTION``: the body
  slides sideways and backwards at bends, and its step changes by up to 1.3 m per frame);
* ``car_vehicle``: the same rig and scene driven as a vehicle (the simulator's ``car`` motion
  preset: it heads where it goes, brakes before bends, its step changes by at most 0.1 m per
  frame, up to 3 m per frame at 10 Hz);
* ``car_vehicle_sides``: that traversal (the same render and bag) through the left, right and
  rear cameras only, which see nothing in common at one instant: a car rig without a stereo
  pair, whose straight steps the relative pose cannot measure;
* ``segway``: the ``ladybug6`` rig (five ring cameras cam1-cam5 on a 4 cm ring and one looking
  up, portrait images), ``--rig nclt`` parameters (its five ring cameras; the up-looking one,
  as NCLT's, is not used) moving through a ``large`` scene (rooms and doors) at 0.2-0.4 m per
  frame at 5 Hz (1-2 m/s).

    nice python -m benchmarks.bench_long_traversal --scales car segway --size 320 \\
        --output benchmarks/RESULTS_long_traversal.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from benchmarks.bench_rig_car_steps import CAR_MOTION
from benchmarks.common import ROOT, emit_report, from_root, machine_info, machine_line
from g2g_model.data.sim.trajectory import MOTION_PRESETS, MotionConfig

SEGWAY_MOTION = MotionConfig(rate_hz=5.0, step_m=(0.2, 0.4), radius_m=0.35, height_m=(1.0, 1.3),
                             max_turn_deg=20.0, places_per_room=2)


@dataclass(frozen=True)
class Scale:
    """One traversal setting: scene and rig presets, motion, length, node parameters."""

    scene: str
    rig: str
    motion: MotionConfig
    length_m: float
    seed: int
    node_rig: str                      # g2g-eval-bag --rig (parameter preset)
    segments_m: Tuple[float, ...]
    cameras: Tuple[str, ...] = ()      # the node's cameras (empty: all of the bag's)
    params: Tuple[str, ...] = ()       # further g2g-eval-bag -p NODE.PARAM:=VALUE
    render: str = ""                   # the scale whose render and bag this one replays


SCALES: Dict[str, Scale] = {
    "car": Scale("hall", "car5", CAR_MOTION, 500.0, 20015, "sim", (100.0, 200.0, 300.0, 400.0)),
    "car_vehicle": Scale("hall", "car5", MOTION_PRESETS["car"], 500.0, 20015, "sim",
                         (100.0, 200.0, 300.0, 400.0)),
    # The vehicle's traversal with the cameras that see nothing in common (no stereo pair).
    "car_vehicle_sides": Scale("hall", "car5", MOTION_PRESETS["car"], 500.0, 20015, "sim",
                               (100.0, 200.0, 300.0, 400.0), ("left", "right", "rear"),
                               render="car_vehicle"),
    "segway": Scale("large", "ladybug6", SEGWAY_MOTION, 200.0, 20011, "nclt",
                    (50.0, 100.0, 150.0, 200.0), ("cam1", "cam2", "cam3", "cam4", "cam5")),
}


def make_bag(name: str, scale: Scale, size: int, data: Path) -> Tuple[Path, int, str]:
    """Render (resumable) and convert ``scale``'s traversal: ``(bag, frames, image sizes)``."""
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.data.sim.generate import SimConfig, generate_trajectory
    from g2g_model.data.sim.scene import make_scene
    from g2g_model.data.sim.trajectory import frames_for_length
    from g2g_ros.bags.convert import convert_trajectory

    frames = frames_for_length(make_scene(scale.seed, 0, scale.scene), scale.length_m,
                               scale.motion)
    cfg = SimConfig(scene_preset=scale.scene, rig_preset=scale.rig, traversals=1, frames=frames,
                    image_size=size, with_depth=False)
    t0 = time.perf_counter()
    name = scale.render or name
    traj = generate_trajectory(data / f"sim_{name}_{size}", scale.seed, 0, cfg,
                               motion=scale.motion)["path"]
    bag = data / f"{name}_{size}_{frames}.mcap"
    if not bag.exists():
        convert_trajectory(traj, bag, compressed=True, progress=False)
    print(f"{name}: {frames} frames rendered and converted in {time.perf_counter() - t0:.0f} s "
          f"-> {bag}", flush=True)
    rig = TrajectoryReader(traj).rig
    sizes = sorted({f"{rig[c].width} x {rig[c].height}" for c in rig.names})
    return bag, frames, ", ".join(sizes)


def eval_command(bag: Path, out: Path, scale: Scale, wait_timeout: float) -> List[str]:
    """The ``g2g-eval-bag`` command line of one replay."""
    cmd = ["g2g-eval-bag", str(bag), "--graph", "rig_odometry", "--out", str(out),
           "--rig", scale.node_rig, "--wait-timeout", f"{wait_timeout:g}", "--quiet",
           "--segments", *[f"{s:g}" for s in scale.segments_m]]
    if scale.cameras:
        cmd += ["-p", f"rig_odometry.cameras:=[{','.join(scale.cameras)}]"]
    for param in scale.params:
        cmd += ["-p", param]
    return cmd


def step_errors(gt_poses: np.ndarray, odo_poses: np.ndarray) -> Dict[str, float]:
    """Errors of the body's motion between consecutive outputs (``[T,4,4]`` each)."""
    from g2g_model.geometry import invert_pose, rotation_angle_deg

    gt_steps = np.stack([invert_pose(a) @ b for a, b in zip(gt_poses[:-1], gt_poses[1:])])
    odo_steps = np.stack([invert_pose(a) @ b for a, b in zip(odo_poses[:-1], odo_poses[1:])])
    length = np.linalg.norm(gt_steps[:, :3, 3], axis=1)
    moved = length > 1e-3
    err = np.stack([invert_pose(o) @ g for o, g in zip(odo_steps, gt_steps)])
    trans = np.linalg.norm(err[:, :3, 3], axis=1)
    pct = 100 * trans[moved] / length[moved]
    rot = np.array([rotation_angle_deg(e[:3, :3]) for e in err])
    yaw = np.degrees(np.arctan2(odo_steps[:, 1, 0], odo_steps[:, 0, 0])
                     - np.arctan2(gt_steps[:, 1, 0], gt_steps[:, 0, 0]))
    yaw = (yaw + 180.0) % 360.0 - 180.0
    odo_length = np.linalg.norm(odo_steps[:, :3, 3], axis=1)
    length_err = np.abs(odo_length - length)
    off = np.zeros(len(length), bool)
    off[moved] = pct > 10
    return {"steps": int(len(gt_steps)), "step_mean_m": float(length.mean()),
            "trans_mean_m": float(trans.mean()), "trans_median_m": float(np.median(trans)),
            "pct_mean": float(pct.mean()), "pct_median": float(np.median(pct)),
            "pct_p90": float(np.percentile(pct, 90)), "over_10pct": int((pct > 10).sum()),
            "rot_mean_deg": float(rot.mean()), "rot_median_deg": float(np.median(rot)),
            "length_bias_pct": float(100 * (odo_length.sum() / length.sum() - 1)),
            "length_err_m": float(length_err.sum()),
            "length_err_off_m": float(length_err[off].sum()),
            "yaw_bias_deg_per_100m": float(100 * yaw.sum() / length.sum()),
            "yaw_abs_mean_deg": float(np.abs(yaw).mean())}


def score(bag: Path, out: Path) -> Dict[str, object]:
    """KITTI segments (from the report), per-step errors, drift and the node's counts."""
    from g2g_ros.bags.evaluation import load_ground_truth, load_outputs, odometry_trajectories

    report = json.loads((out / "report.json").read_text())
    gt = load_ground_truth(bag)
    outputs = load_outputs(out / "outputs")
    _, g, o = odometry_trajectories(gt, outputs.odometry)
    diag = next((v for k, v in outputs.diagnostics.items() if "rig odometry" in k), {})
    path = float(np.linalg.norm(np.diff(g[:, :3, 3], axis=0), axis=1).sum())
    end = float(np.linalg.norm(g[-1, :3, 3] - o[-1, :3, 3]))
    return {"report": report, "steps": step_errors(g, o), "diagnostics": diag,
            "path_m": path, "end_error_m": end, "end_error_pct": 100 * end / path}


def run_scale(name: str, scale: Scale, size: int, data: Path, wait_timeout: float
              ) -> Tuple[str, List[str]]:
    """Render, convert, replay and score one scale: ``(command, report lines)``."""
    bag, frames, sizes = make_bag(name, scale, size, data)
    out = data / f"{name}_eval_{time.strftime('%Y%m%d_%H%M%S')}"
    cmd = eval_command(bag, out, scale, wait_timeout)
    # A DDS domain of its own (unless one is set), so that no other replay on this machine
    # talks to the node.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        ROS_DOMAIN_ID=os.environ.get("ROS_DOMAIN_ID", str(1 + os.getpid() % 100)),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "g2g_ros.bags.eval_bag", *cmd[1:]], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if run.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-4000:]}")
    res = score(bag, out)
    return from_root(" ".join(cmd)), scale_lines(name, scale, sizes, frames, res, wall)


def scale_lines(name: str, scale: Scale, sizes: str, frames: int, res: Dict[str, object],
                wall: float) -> List[str]:
    report, st, diag = res["report"], res["steps"], res["diagnostics"]
    replay, odo = report["replay"], report["rig_odometry"]
    kitti = odo["kitti"] or {"per_length": {}}
    cams = f"{', '.join(scale.cameras)} of the bag's" if scale.cameras else "all"
    paths = ", ".join(f"{k[len('steps '):]} {v}" for k, v in sorted(diag.items())
                      if k.startswith("steps "))
    geometry = ", ".join(f"{k[len('geometry '):]} {v}" for k, v in sorted(diag.items())
                         if k.startswith("geometry "))
    lines = [f"Scene `{scale.scene}` seed {scale.seed}, rig `{scale.rig}` at {sizes} "
             f"(JPEG in the bag), node parameters `--rig {scale.node_rig}`, cameras: {cams}; "
             f"motion {scale.motion.step_m[0]:g}-{scale.motion.step_m[1]:g} m per frame at "
             f"{scale.motion.rate_hz:g} Hz; {frames} frames, ground-truth path "
             f"{res['path_m']:.1f} m over the node's outputs.", "",
             f"Replay: {replay['groups']} groups published, {replay['waited_groups']} answered, "
             f"{replay['wait_timeouts']} wait timeouts; the node's diagnostics: "
             f"groups_processed {diag.get('groups_processed', '?')}, groups_dropped "
             f"{diag.get('groups_dropped', '?')}, rejected_steps "
             f"{diag.get('rejected_steps', '?')}, steps by path: {paths or '?'}, by "
             f"geometry: {geometry or '?'}; "
             f"odometry outputs {odo['outputs']}; "
             f"{wall / 60:.1f} min wall for the replay "
             f"({1e3 * wall / max(1, replay['groups']):.0f} ms per group).", "",
             "| segment (m) | segments | RTE (%) | RRE (deg / 100 m) |", "|---|---|---|---|"]
    for length, row in kitti["per_length"].items():
        rte, rre = row["rte_pct"], row["rre_deg_per_100m"]
        lines.append(f"| {float(length):g} | {row['n_segments']} | "
                     f"{'-' if rte is None else f'{rte:.2f}'} | "
                     f"{'-' if rre is None else f'{rre:.2f}'} |")
    if kitti.get("rte_pct") is not None:
        lines.append(f"| all | {kitti['n_segments']} | **{kitti['rte_pct']:.2f}** | "
                     f"**{kitti['rre_deg_per_100m']:.2f}** |")
    lines += ["", "| per step (consecutive outputs) | value |", "|---|---|",
              f"| steps / mean length | {st['steps']} / {st['step_mean_m']:.2f} m |",
              f"| translation error mean / median | {1e3 * st['trans_mean_m']:.1f} / "
              f"{1e3 * st['trans_median_m']:.1f} mm |",
              f"| translation error, % of the step: mean / median / p90 | "
              f"{st['pct_mean']:.2f} / {st['pct_median']:.2f} / {st['pct_p90']:.2f} |",
              f"| steps off by more than 10 % | {st['over_10pct']} |",
              f"| rotation error mean / median | {st['rot_mean_deg']:.3f} / "
              f"{st['rot_median_deg']:.3f} deg |",
              f"| path length bias (sum of output steps vs truth) | "
              f"{st['length_bias_pct']:+.2f} % |",
              f"| summed absolute step-length error / of it, the steps off > 10 % | "
              f"{st['length_err_m']:.1f} m / {st['length_err_off_m']:.1f} m |",
              f"| heading error: summed per 100 m / mean absolute per step | "
              f"{st['yaw_bias_deg_per_100m']:+.2f} deg / {st['yaw_abs_mean_deg']:.3f} deg |",
              f"| end-point error | {res['end_error_m']:.2f} m ({res['end_error_pct']:.2f} % "
              f"of the path) |"]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", nargs="+", choices=sorted(SCALES), default=sorted(SCALES))
    parser.add_argument("--size", type=int, default=320, help="image side (px)")
    parser.add_argument("--length", type=float, default=None,
                        help="traversal length in m (default: car 500, segway 200)")
    parser.add_argument("--data", default=str(ROOT / "outputs" / "long_traversal"),
                        help="where the renders, bags and replays go (outside git)")
    parser.add_argument("--wait-timeout", type=float, default=20.0,
                        help="seconds per group (g2g-eval-bag's); a group without an answer "
                             "is counted in the report")
    parser.add_argument("-p", dest="params", action="append", default=[],
                        metavar="NODE.PARAM:=VALUE", help="node parameter after the scale's "
                        "own (repeatable), e.g. -p rig_odometry.max_spread_m:=1.0")
    parser.add_argument("--output", default=None, help="also write the report here (markdown)")
    opts = parser.parse_args(argv)
    data = Path(opts.data)
    data.mkdir(parents=True, exist_ok=True)
    lines = ["## Machine", *machine_info(), f"- at the start: {machine_line()}"]
    for name in opts.scales:
        scale = SCALES[name]
        scale = replace(scale, params=scale.params + tuple(opts.params))
        if opts.length:
            scale = replace(scale, length_m=opts.length,
                            segments_m=tuple(s * opts.length / scale.length_m
                                             for s in scale.segments_m))
        command, body = run_scale(name, scale, opts.size, data, opts.wait_timeout)
        lines += ["", f"## {name} ({scale.rig}, >= {scale.length_m:g} m)", "",
                  f"`{command}` (the outputs' directory under `--data`; load at the end: "
                  f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})", "", *body]
        print("\n".join(lines[-len(body) - 4:]), flush=True)
    emit_report("Rig odometry over long simulated traversals", "benchmarks.bench_long_traversal",
                argv, "\n".join(lines), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
