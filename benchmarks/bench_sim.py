"""Simulator render throughput (camera-frames per second at 224x224, CPU).

Run: ``PYTHONPATH=$PWD python benchmarks/bench_sim.py [--frames 40] [--workers 2]``

Measures, on real simulator trajectories (several scenes, the 8-camera ring rig):
1. render only, one process;
2. render only, ``--workers`` processes in parallel (aggregate throughput);
3. the full ``g2g-sim`` path (render + PNG encoding of RGB and depth), one process.
Texture / photo loading and scene construction happen before the clock starts.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time

from benchmarks.common import machine_line


def _render_job(args: tuple) -> tuple[int, float]:
    seed, frames, rig_preset = args
    from g2g_model.data.sim.renderer import Renderer
    from g2g_model.data.sim.rigs import make_rig
    from g2g_model.data.sim.scene import make_scene
    from g2g_model.data.sim.trajectory import make_traversals

    scene = make_scene(seed)
    trav = make_traversals(scene, 1, frames)[0]
    rig = make_rig(seed, rig_preset)
    renderer = Renderer(scene)
    T, K = rig.T_body_cams(), rig.intrinsics()
    renderer.render(trav.world_T_body[0][None] @ T[:1], K[:1], 224, 224)  # warm-up
    t0 = time.perf_counter()
    for pose in trav.world_T_body:
        renderer.render(pose[None] @ T, K, 224, 224)
    return frames * len(rig), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=40, help="rig frames per scene")
    p.add_argument("--seeds", type=int, nargs="+", default=[20000, 20001, 20002, 20003])
    p.add_argument("--rig", default="ring8")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    print("machine:", machine_line())

    done = total = 0.0
    for seed in args.seeds:
        n, sec = _render_job((seed, args.frames, args.rig))
        done, total = done + n, total + sec
        print(f"  scene {seed}: {n} camera-frames in {sec:.2f} s = {n / sec:.1f} /s")
    print(f"render, 1 process: {done / total:.1f} camera-frames/s ({int(done)} frames)")

    jobs = [(s, args.frames, args.rig) for s in args.seeds]
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        pool.map(_render_job, [(args.seeds[0], 2, args.rig)] * args.workers)  # start-up
        t0 = time.perf_counter()
        res = pool.map(_render_job, jobs)
        wall = time.perf_counter() - t0
    n = sum(r[0] for r in res)
    busy = sum(r[1] for r in res) / args.workers
    # The wall clock includes each job's scene set-up (scene, paths, renderer); the per-job
    # render clocks do not.
    print(f"render, {args.workers} processes: {n / wall:.1f} camera-frames/s wall-clock "
          f"incl. per-scene set-up; {n / busy:.1f} /s over render time only")

    from g2g_model.data.sim.generate import SimConfig, generate_trajectory
    from g2g_model.data.sim.textures import poster_library, texture_library

    texture_library()
    poster_library()
    cfg = SimConfig(rig_preset=args.rig, traversals=1, frames=args.frames)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        info = generate_trajectory(tmp, args.seeds[0], 0, cfg)
        sec = time.perf_counter() - t0
    print(f"g2g-sim path (render + PNG RGB/depth), 1 process: "
          f"{info['camera_frames'] / sec:.1f} camera-frames/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
