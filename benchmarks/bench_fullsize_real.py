"""Full-size REAL photographs (about 2 MP) with poses: relocalization verification and G2G on
the reduced copy against the full-size path, in the same run.

``bench_fullsize`` measures the reduced-image path on simulator renders; this one measures its
accuracy on real images: the window pairs of a set built by ``tools/make_real_fullsize.py``
(``data/real_fullsize``, the default: instant-ngp's fox, 50 phone photographs 1080 x 1920,
COLMAP poses, rectified) or by ``tools/make_real_stereo.py`` (``data/real_stereo_kitti``: two
KITTI clips, 1226 x 370 and 1241 x 376, the left camera's windows 4-10 m apart); each pair
names its trajectories and cameras. Per window pair (map window: known poses; query window:
only its relative poses are used, as from odometry), the images travel as JPEG (quality 90),
and in the same run:

1. ``G2GPipeline.predict`` (the embedded relocalization default) on the full-size images and on
   the relocalize node's reduced copies, with its error against the poses;
2. a first localization (a fresh ``RelocalizationVerifier``: nothing cached) for every
   ``verify_max_image_px`` of ``--max-px`` (0 = full size, the baseline), each on the reduced
   copies the node would make for it, seeded with G2G's full-size prediction (the same for
   every setting): its path, inliers, time and error against the poses. The translation error
   is also given as a share of the map window's baseline (the largest distance between two of
   its cameras): the set's metric scale is an estimate.

Accuracy is compared on the pairs every setting accepted (``verified`` or ``refined``), so a
setting is not judged on pairs the baseline fell back on.

    python -m benchmarks.bench_fullsize_real --real data/real_fullsize --pairs 8 \
        --output benchmarks/RESULTS_fullsize.md
    python -m benchmarks.bench_fullsize_real --real data/real_stereo_kitti --pairs 40 \
        --max-px 0 480
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from benchmarks.bench_fullsize import errors, imaging, jpeg, load
from benchmarks.common import emit_report, machine_info
from g2g_model.cameras.lens import Lens
from g2g_model.data.format import TrajectoryReader
from g2g_model.data.mining import WindowPair, read_index
from g2g_model.estimation.groups import Group
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.localization.verification import PATH_G2G, VerifierConfig
from g2g_model.localization.window_relative import RelocalizationVerifier
from g2g_model.metrics.summaries import paired_ratio

#: A setting is "within 10 % of full size" when its median errors on the commonly accepted
#: pairs are at most this factor of full size's and it accepts at least 1 / this share of them.
WITHIN = 1.10


def pick(pairs: List[WindowPair], count: int) -> List[WindowPair]:
    """``count`` pairs spread evenly over the index (its gaps and its places on the orbit)."""
    if count >= len(pairs):
        return list(pairs)
    return [pairs[int(i)] for i in np.linspace(0, len(pairs) - 1, count).round()]


def baseline(poses: np.ndarray) -> float:
    c = poses[:, :3, 3]
    return float(np.max(np.linalg.norm(c[:, None] - c[None], axis=-1)))


def summarize(rows: List[dict], keys: List[int]) -> Dict[int, dict]:
    """Per setting: medians / means over the pairs every setting accepted."""
    common = [r for r in rows if all(r["verify"][k]["path"] != PATH_G2G for k in keys)]
    out = {}
    for k in keys:
        e = np.array([[r["verify"][k]["rot"], r["verify"][k]["trans"],
                       r["verify"][k]["trans"] / r["baseline"]] for r in common]
                     ).reshape(-1, 3)
        out[k] = {"common": len(common), "errors": e,
                  "accepted": sum(r["verify"][k]["path"] != PATH_G2G for r in rows),
                  "inliers": [r["verify"][k]["inliers"] for r in rows],
                  "time": [r["verify"][k]["time"] for r in rows],
                  "paths": [r["verify"][k]["path"] for r in rows]}
    return out


class Views:
    """The set's trajectories (opened when a pair first names them) and, per trajectory and
    camera, its lens, poses, the node's reduced copies per setting and the JPEG messages."""

    def __init__(self, real: Path, max_pxs: List[int], reloc_default: int, size):
        self.real, self.max_pxs, self.reloc_default, self.size = real, max_pxs, reloc_default, size
        self.readers: Dict[str, TrajectoryReader] = {}
        self.cameras: Dict[tuple, dict] = {}

    def camera(self, traj: str, cam: str) -> dict:
        if (traj, cam) not in self.cameras:
            if traj not in self.readers:
                self.readers[traj] = TrajectoryReader(self.real / traj)
            reader = self.readers[traj]
            spec = reader.rig[cam]
            lens = Lens.pinhole(spec.K, spec.width, spec.height, cam)
            self.cameras[traj, cam] = {
                "reader": reader, "name": cam, "K": spec.K, "poses": reader.world_T_cam(cam),
                "imaging": {k: imaging(k, self.size, lens) for k in self.max_pxs},
                "g2g": imaging(self.reloc_default, self.size, lens), "msgs": {}}
        return self.cameras[traj, cam]

    def sizes(self, max_px: Optional[int]) -> str:
        """The reduced copies' sizes for ``max_px`` (None: G2G's), every camera's, as text."""
        copies = [c["g2g"] if max_px is None else c["imaging"][max_px]
                  for c in self.cameras.values()]
        return " / ".join(dict.fromkeys(f"{c.size[0]} x {c.size[1]}" for c in copies))

    @staticmethod
    def group(view: dict, frames: List[int], max_px: Optional[int], full: bool = False) -> Group:
        """The frames as the node would see them with ``max_px`` (None: G2G's copies)."""
        cam = view["g2g"] if max_px is None else view["imaging"][max_px]
        images = []
        for f in frames:
            if full:
                images.append(view["reader"].image(view["name"], f))
                continue
            if f not in view["msgs"]:
                view["msgs"][f] = jpeg(view["reader"].image(view["name"], f))
            images.append(cam.image(view["msgs"][f]))
        return Group(images, view["K"] if full else cam.K, view["poses"][frames])


def run(real: Path, indices: List[str], count: int, max_pxs: List[int], reloc_default: int
        ) -> str:
    start_load = load()
    pipeline = G2GPipeline.default("relocalization")
    size = pipeline.image_size
    views = Views(real, max_pxs, reloc_default, size)
    rows = []
    for index in indices:
        for pair in pick(read_index(real / index, WindowPair), count):
            fa = list(range(pair.start_a, pair.start_a + pair.window))
            fb = list(range(pair.start_b, pair.start_b + pair.window))
            va, vb = views.camera(pair.traj_a, pair.cam_a), views.camera(pair.traj_b, pair.cam_b)
            truth = vb["poses"][fb[0]]
            row = {"pair": f"W{pair.window} {pair.start_a}->{pair.start_b}"
                   + ("" if pair.traj_a == pair.traj_b else f" {pair.traj_a}->{pair.traj_b}"),
                   "baseline": baseline(va["poses"][fa]), "verify": {}}
            preds = {}
            for what, full in (("full", True), ("reduced", False)):
                a, b = views.group(va, fa, None, full), views.group(vb, fb, None, full)
                pipeline.predict(a, b)                       # warm
                t0 = time.perf_counter()
                pred = pipeline.predict(a, b)
                row[f"g2g_{what}_time"] = time.perf_counter() - t0
                row[f"g2g_{what}"] = errors(truth, pred.world_T_b[0])
                preds[what] = np.asarray(pred.world_T_b)
            for k in max_pxs:
                a, b = views.group(va, fa, k, k == 0), views.group(vb, fb, k, k == 0)
                verifier = RelocalizationVerifier(VerifierConfig(max_image_px=k))
                t0 = time.perf_counter()
                first = verifier(a, b, preds["full"])
                elapsed = time.perf_counter() - t0
                rot, trans = errors(truth, first.map_T_b0)
                row["verify"][k] = {"path": first.path, "inliers": int(first.inliers),
                                    "time": elapsed, "rot": rot, "trans": trans}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "verify"}
                             | {str(k): v for k, v in row["verify"].items()}), flush=True)
    return report(rows, max_pxs, reloc_default, size, views, start_load, indices, count)


def describe(views: Views) -> str:
    """The data: each trajectory's source, frames and image size (and, for a set of
    tools/make_real_fullsize.py, its lens and scale)."""
    parts = []
    for name, reader in views.readers.items():
        meta, spec = reader.meta, reader.rig[reader.cameras[0]]
        src = meta.get("dataset_source", {})
        where = (f"{src['repo']} `{src.get('path', '')}` at {src['commit'][:12]}"
                 if "repo" in src else name)
        extra = ""
        if "lens" in meta:
            extra = (f", rectified once from `{meta['lens']}`; COLMAP poses in OpenCV axes at "
                     f"an assumed {meta.get('metres_per_unit')} m per unit")
        parts.append(f"{where} ({name}: {reader.num_frames} frames {spec.width} x "
                     f"{spec.height}{extra})")
    return "; ".join(parts)


def report(rows, max_pxs, reloc_default, size, views, start_load, indices, count) -> str:
    summary = summarize(rows, max_pxs)
    base = summary[max_pxs[0]]
    g2g_sizes = views.sizes(None)
    lines = machine_info() + [
        f"- load average at the start: {start_load}; at the end: {load()}", "",
        f"Data: {describe(views)}. "
        f"{len(rows)} window pairs ({count} per index of {', '.join(indices)}, spread over "
        "each index), JPEG quality 90. G2G: the embedded relocalization default at "
        f"{size[1]} x {size[0]}, reduced copies of the relocalize node's default "
        f"({reloc_default}: {g2g_sizes}).", "",
        "Relocalization verification, first localization (fresh verifier), per "
        "`verify_max_image_px`. Errors: median / mean over the "
        f"{base['common']} pairs every setting accepted (translation also as a share of the map "
        "window's baseline); time: median over all pairs, ratio to full size in the same run.",
        "",
        "| verify_max_image_px (image) | accepted | rotation (deg) | translation (m) | "
        "translation / baseline | inliers (median) | time (ms) | time ratio |",
        "|---|---|---|---|---|---|---|---|"]
    for k in max_pxs:
        s = summary[k]
        e = s["errors"]
        name = "0, full size" if k == 0 else str(k)
        lines.append(
            f"| {name} ({views.sizes(k)}) | {s['accepted']} / {len(rows)} | "
            f"{np.median(e[:, 0]):.3f} / {e[:, 0].mean():.3f} | "
            f"{np.median(e[:, 1]):.4f} / {e[:, 1].mean():.4f} | "
            f"{np.median(e[:, 2]):.4f} / {e[:, 2].mean():.4f} | "
            f"{statistics.median(s['inliers']):.0f} | "
            f"{1e3 * statistics.median(s['time']):.0f} | "
            f"{statistics.median(s['time']) / statistics.median(base['time']):.3f} |")
    lines += ["", "Against full size on the commonly accepted pairs (error ratios; within 10 %: "
              f"<= {WITHIN:g} x, and at least {1 / WITHIN:.0%} of its acceptances; in brackets "
              "the ratio's 95 % interval, a paired bootstrap over the pairs: where it holds "
              f"{WITHIN:g}, these pairs cannot tell within from not within):", ""]
    for k in max_pxs[1:]:
        s = summary[k]
        ratios = {(stat.__name__, axis): paired_ratio(s["errors"][:, axis],
                                                      base["errors"][:, axis], stat)
                  for stat in (np.median, np.mean) for axis in (0, 1)}
        accepted = s["accepted"] >= base["accepted"] / WITHIN
        verdicts = []
        for what, stat in (("medians", "median"), ("means", "mean")):
            pair = [ratios[stat, axis] for axis in (0, 1)]
            shown = " within" if accepted and max(r[0] for r in pair) <= WITHIN else " NOT within"
            if any(r[1] <= WITHIN <= r[2] for r in pair):
                shown += " (undecided by these pairs)"
            verdicts.append(what + shown)
        cells = [f"{stat} {name} {r[0]:.2f} x [{r[1]:.2f}-{r[2]:.2f}]"
                 for stat in ("median", "mean")
                 for name, r in (("rotation", ratios[stat, 0]), ("translation", ratios[stat, 1]))]
        lines.append(f"- {k}: " + ", ".join(cells) + f"; accepted {s['accepted']} vs "
                     f"{base['accepted']}: " + ", ".join(verdicts))
    g_full = np.array([r["g2g_full"] for r in rows])
    g_small = np.array([r["g2g_reduced"] for r in rows])
    t_full = statistics.median(r["g2g_full_time"] for r in rows)
    t_small = statistics.median(r["g2g_reduced_time"] for r in rows)
    lines += ["", "G2G prediction (the query's first camera), median / mean over all pairs:", "",
              "| input | rotation (deg) | translation (m) | time (ms) |", "|---|---|---|---|",
              f"| full size | {np.median(g_full[:, 0]):.2f} / {g_full[:, 0].mean():.2f} | "
              f"{np.median(g_full[:, 1]):.3f} / {g_full[:, 1].mean():.3f} | {1e3 * t_full:.0f} |",
              f"| reduced copies ({g2g_sizes}) | "
              f"{np.median(g_small[:, 0]):.2f} / {g_small[:, 0].mean():.2f} | "
              f"{np.median(g_small[:, 1]):.3f} / {g_small[:, 1].mean():.3f} | "
              f"{1e3 * t_small:.0f} |",
              "", "Per pair (path / inliers / rotation deg / translation m per setting):", "",
              "| pair | baseline (m) | " + " | ".join(str(k) for k in max_pxs) + " |",
              "|---|---|" + "---|" * len(max_pxs)]
    for r in rows:
        cells = [f"{v['path']} / {v['inliers']} / {v['rot']:.2f} / {v['trans']:.3f}"
                 for v in (r["verify"][k] for k in max_pxs)]
        lines.append(f"| {r['pair']} | {r['baseline']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", type=Path, default=Path("data/real_fullsize"),
                        help="the set of tools/make_real_fullsize.py")
    parser.add_argument("--index", nargs="+", default=["pairs_w3.json", "pairs_w5.json"])
    parser.add_argument("--pairs", type=int, default=8, help="window pairs per index")
    parser.add_argument("--max-px", type=int, nargs="+", default=[0, 480, 640, 960],
                        help="verify_max_image_px settings (the first, 0, is the baseline)")
    parser.add_argument("--reloc-max-px", type=int, default=None,
                        help="relocalization's verify_max_image_px for G2G's reduced copies "
                             "(default: the relocalize node's)")
    parser.add_argument("--output", default=None)
    opts = parser.parse_args(argv)
    if opts.max_px[0] != 0:
        parser.error("the first --max-px is the baseline and must be 0 (full size)")
    missing = [i for i in opts.index if not (opts.real / i).is_file()]
    if missing:
        parser.error(f"{opts.real}: no {', '.join(missing)} (build the set with "
                     "tools/make_real_fullsize.py or tools/make_real_stereo.py)")
    reloc_max_px = opts.reloc_max_px
    if reloc_max_px is None:
        from g2g_ros.nodes.relocalize_params import RelocalizeParams

        reloc_max_px = RelocalizeParams.verify_max_image_px
    emit_report("Full-size real images benchmark", "benchmarks.bench_fullsize_real", argv,
                run(opts.real, opts.index, opts.pairs, opts.max_px, reloc_max_px),
                opts.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
