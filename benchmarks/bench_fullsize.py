"""Full-size camera images (1936 x 1216, raw and JPEG) end to end: the reduced copy made once per
image against the full-size path, in the same run.

A cross-season simulator scene (test seed 20000, 5-camera ring, 80 deg cameras) is rendered at
1936 x 1216 (the renderer casts one ray per pixel, so the images have native detail, not
upscaled); the images travel as JPEG (quality 90) or raw ``rgb8`` messages. Per query window
(5 + 5 frames of one camera, map traversal against a query traversal in another season), in
the same run:

1. conversion of a 5-camera group: the full-size decode (what the nodes did) against the reduced
   copy of :class:`g2g_ros.camera_calibrations.CameraImaging` for rig odometry's needs and for
   relocalization's;
2. ``G2GPipeline.predict`` 5 + 5 (the embedded relocalization default) on the full-size images
   and on the reduced copies, and its error against the ground truth;
3. relocalization verification (``RelocalizationVerifier``, 5 map + 5 query images): a first
   localization (nothing cached) and tracking (both windows move on by one instant, seeded by the
   first fix) for every ``verify_max_image_px`` of ``--max-px`` (0 = full size, the baseline),
   each on the reduced copies the node would make for it, with its error against the ground
   truth (seeded with G2G's full-size prediction, the same for every setting).

    python -m benchmarks.bench_fullsize --output benchmarks/RESULTS_fullsize.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from types import SimpleNamespace
from typing import Dict, List, Optional

import numpy as np

from benchmarks.common import emit_report, machine_info, timed
from g2g_model.cameras.lens import Lens
from g2g_model.cameras.reduction import ImageNeeds
from g2g_model.data.rig import pinhole_K
from g2g_model.geometry import relative_pose, rotation_angle_deg
from g2g_model.estimation.groups import Group
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.localization.rig_motion import RIG_DEFAULTS
from g2g_model.localization.verification import PATH_G2G, VerifierConfig
from g2g_model.localization.window_relative import RelocalizationVerifier
from g2g_ros.camera_calibrations import CameraImaging
from g2g_ros.image_conversion import rgb_to_compressed_fields, rgb_to_image_fields, to_rgb

WIDTH, HEIGHT, HFOV_DEG = 1936, 1216, 80.0
SEED, FRAMES = 20000, 50


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


class Scene:
    """Poses of a mapping and a query traversal and a renderer for each (its season)."""

    def __init__(self, size=(WIDTH, HEIGHT)):
        from g2g_model.data.sim.renderer import Renderer
        from g2g_model.data.sim.rigs import make_rig
        from g2g_model.data.sim.scene import make_scene
        from g2g_model.data.sim.trajectory import make_traversals

        traversals = make_traversals(make_scene(SEED, 0, "small"), 2, FRAMES)
        self.body = [t.world_T_body for t in traversals]
        self.renderers = [Renderer(make_scene(SEED, k, "small")) for k in (0, 1)]
        self.T_body_cam = make_rig(SEED, "ring5", 224).T_body_cams()
        self.size = tuple(size)
        self.K = pinhole_K(*self.size, HFOV_DEG)
        self._cache: Dict[tuple, np.ndarray] = {}

    def pose(self, trav: int, frame: int, cam: int = 0) -> np.ndarray:
        return self.body[trav][frame] @ self.T_body_cam[cam]

    def image(self, trav: int, frame: int, cam: int = 0) -> np.ndarray:
        key = (trav, frame, cam)
        if key not in self._cache:
            rgb, _ = self.renderers[trav].render(self.pose(trav, frame, cam)[None], self.K,
                                                 *self.size)
            self._cache[key] = rgb[0]
        return self._cache[key]


def jpeg(rgb):
    return SimpleNamespace(**rgb_to_compressed_fields(rgb, "jpeg", 90))


def raw(rgb):
    return SimpleNamespace(**rgb_to_image_fields(rgb))


def imaging(max_px: Optional[int], image_size, lens: Optional[Lens] = None) -> CameraImaging:
    """The node's reduced copy for ``verify_max_image_px`` ``max_px`` and G2G's input
    ``image_size`` of images from ``lens`` (default: the simulator's full-size camera)."""
    if lens is None:
        lens = Lens.pinhole(pinhole_K(WIDTH, HEIGHT, HFOV_DEG), WIDTH, HEIGHT)
    return CameraImaging.of(lens, 100.0, ImageNeeds(tuple(image_size), max_px))


def errors(truth: np.ndarray, pose: np.ndarray):
    rel = relative_pose(truth, pose)
    return rotation_angle_deg(rel[:3, :3]), float(np.linalg.norm(rel[:3, 3]))


def ms(values: List[float]) -> str:
    return f"{1e3 * statistics.median(values):.0f}"


def run(windows: int, max_pxs: List[int], reps: int, reloc_default: int) -> str:
    start_load = load()
    scene = Scene()
    pipeline = G2GPipeline.default("relocalization")
    size = pipeline.image_size
    rows = []
    # 1. A 5-camera group's conversion (one instant of the query traversal).
    group = [scene.image(1, 10, c) for c in range(5)]
    for transport, make in (("JPEG", jpeg), ("raw", raw)):
        msgs = [make(im) for im in group]
        full = timed(lambda: [to_rgb(m) for m in msgs], 1, reps, 30.0)
        rows.append((f"{transport} 5-camera group to RGB: full size (baseline)", full, full))
        for what, max_px in (("rig odometry", RIG_DEFAULTS["max_image_px"]),
                             ("relocalization", reloc_default)):
            cam = imaging(max_px, size)
            t = timed(lambda: [cam.image(m) for m in msgs], 1, reps, 30.0)
            w, h = cam.size
            rows.append((f"{transport} 5-camera group, reduced copy for {what} ({w} x {h}"
                         + (f", decoded at 1/{cam.jpeg_factor}" if transport == "JPEG" and
                            cam.jpeg_factor > 1 else "") + ")", full, t))
    # Query windows: 5 frames of camera 0 every second frame, the nearest map window.
    starts = np.linspace(0, FRAMES - 13, windows).astype(int)
    cases = []
    for s in starts:
        q = list(range(s, s + 10, 2))
        # The nearest map frame looking the same way (within 30 deg) starts the map window.
        here = scene.pose(1, q[0])
        dist = np.array([np.linalg.norm(scene.pose(0, f)[:3, 3] - here[:3, 3])
                         if scene.pose(0, f)[:3, 2] @ here[:3, 2] > np.cos(np.radians(30))
                         else np.inf for f in range(FRAMES)])
        m0 = int(np.clip(np.argmin(dist) - 4, 0, FRAMES - 11))
        cases.append((list(range(m0, m0 + 10, 2)), q))
    reduced_g2g = imaging(reloc_default, size)
    g2g_full, g2g_small, g2g_err_full, g2g_err_small, seeds = [], [], [], [], []
    prepare_full, prepare_small = [], []
    for m, q in cases:
        a_full = Group([scene.image(0, f) for f in m], scene.K, [scene.pose(0, f) for f in m])
        b_full = Group([scene.image(1, f) for f in q], scene.K, [scene.pose(1, f) for f in q])
        a_small = Group([reduced_g2g.image(jpeg(im)) for im in a_full.images], reduced_g2g.K,
                        a_full.cam_to_world)
        b_small = Group([reduced_g2g.image(jpeg(im)) for im in b_full.images], reduced_g2g.K,
                        b_full.cam_to_world)
        truth = scene.pose(1, q[0])
        for grp_a, grp_b, times, errs in ((a_full, b_full, g2g_full, g2g_err_full),
                                          (a_small, b_small, g2g_small, g2g_err_small)):
            t = timed(lambda: pipeline.predict(grp_a, grp_b), 1, 3, 20.0)
            times.extend(t)
            pred = pipeline.predict(grp_a, grp_b)
            (prepare_full if grp_a is a_full else prepare_small).append(
                pred.timing_ms["prepare"] / 1e3)
            errs.append(errors(truth, pred.world_T_b[0]))
            if grp_a is a_full:
                seeds.append(np.asarray(pred.world_T_b))
    rows.append(("G2GPipeline.predict 5 + 5, full size (baseline)", g2g_full, g2g_full))
    w, h = reduced_g2g.size
    rows.append((f"G2GPipeline.predict 5 + 5, reduced copies ({w} x {h})", g2g_full, g2g_small))
    rows.append(("of which prepare (validation, resize to the model's input), full size",
                 prepare_full, prepare_full))
    rows.append((f"of which prepare, reduced copies ({w} x {h})", prepare_full, prepare_small))
    # 3. Verification per verify_max_image_px.
    verify = {}
    for max_px in max_pxs:
        cam = imaging(max_px, size)
        cold, tracking, errs, paths = [], [], [], []
        for (m, q), seed in zip(cases, seeds):
            def group_of(trav, frames):
                return Group([cam.image(jpeg(scene.image(trav, f))) for f in frames], cam.K,
                             [scene.pose(trav, f) for f in frames])
            a, b = group_of(0, m), group_of(1, q)
            verifier = RelocalizationVerifier(VerifierConfig(max_image_px=max_px))
            t0 = time.perf_counter()
            first = verifier(a, b, seed)
            cold.append(time.perf_counter() - t0)
            paths.append(first.path)
            errs.append(errors(scene.pose(1, q[0]), first.map_T_b0))
            odom = np.asarray(b.cam_to_world)
            a2, b2 = group_of(0, [f + 2 for f in m]), group_of(1, [f + 2 for f in q])
            odom2 = np.asarray(b2.cam_to_world)
            fix = first.map_T_b0 @ np.linalg.inv(odom[0])
            prior = fix @ odom2 if first.path != PATH_G2G else None
            t0 = time.perf_counter()
            verifier(a2, b2, seed[0] @ np.linalg.inv(odom[0]) @ odom2, view_prior=prior)
            tracking.append(time.perf_counter() - t0)
        verify[max_px] = (cam.size, cold, tracking, np.array(errs), paths)
    base = verify[max_pxs[0]]
    for max_px, (wh, cold, tracking, _, _) in verify.items():
        what = "full size (baseline)" if max_px == 0 else f"verify_max_image_px {max_px}"
        rows.append((f"relocalization verification, first localization, {what} "
                     f"({wh[0]} x {wh[1]})", base[1], cold))
        rows.append((f"relocalization verification, tracking, {what}", base[2], tracking))
    lines = machine_info() + [
        f"- load average at the start: {start_load}; at the end: {load()}", "",
        f"Scene: test seed {SEED}, ring5 cameras rendered at {WIDTH} x {HEIGHT} ({HFOV_DEG:g} "
        f"deg), {windows} query windows of 5 + 5 frames (cross-season), JPEG quality 90. "
        f"G2G: the embedded relocalization default at {size[1]} x {size[0]}. "
        "Medians in ms; the ratio is the reduced path's time over the full-size baseline "
        "measured in the same run.", "",
        "| stage | full size (baseline) | this | ratio |", "|---|---|---|---|"]
    for name, baseline, times in rows:
        ratio = statistics.median(times) / statistics.median(baseline)
        lines.append(f"| {name} | {ms(baseline)} | {ms(times)} | {ratio:.3f} |")
    lines += ["", "Accuracy against the ground truth (the query's first camera in the map), "
              "mean / median:", "",
              "| method | rotation (deg) | translation (m) | paths |", "|---|---|---|---|"]
    for name, errs in (("G2G, full size", g2g_err_full),
                       (f"G2G, reduced copies ({w} x {h})", g2g_err_small)):
        e = np.array(errs)
        lines.append(f"| {name} | {e[:, 0].mean():.3f} / {np.median(e[:, 0]):.3f} | "
                     f"{e[:, 1].mean():.4f} / {np.median(e[:, 1]):.4f} | |")
    for max_px, (wh, _, _, e, paths) in verify.items():
        name = "full size" if max_px == 0 else f"verify_max_image_px {max_px}"
        lines.append(f"| verification, {name} | {e[:, 0].mean():.3f} / "
                     f"{np.median(e[:, 0]):.3f} | {e[:, 1].mean():.4f} / "
                     f"{np.median(e[:, 1]):.4f} | " + ", ".join(
                         f"{p} {paths.count(p)}" for p in sorted(set(paths))) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--max-px", type=int, nargs="+", default=[0, 1280, 968, 640, 484, 320],
                        help="verify_max_image_px settings (the first is the baseline)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--reloc-max-px", type=int, default=None,
                        help="relocalization's verify_max_image_px for the conversion and G2G "
                             "rows (default: the relocalize node's)")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    reloc_max_px = opts.reloc_max_px
    if reloc_max_px is None:
        from g2g_ros.nodes.relocalize_params import RelocalizeParams

        reloc_max_px = RelocalizeParams.verify_max_image_px
    emit_report("Full-size images benchmark", "benchmarks.bench_fullsize", argv,
                run(opts.windows, opts.max_px, opts.reps, reloc_max_px), opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
