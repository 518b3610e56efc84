"""Relocalization on a real image sequence through the node, and on its simulated twin.

For each of (the real sets built by ``tools/make_real_reloc.py``, ``--real``: by default
the TUM office, the TUM cabinet and two KITTI car clips where they are built; the hand-held
single-camera twin of :mod:`benchmarks.sim_handheld` in two test-split scenes,
``--sim-seeds``) it runs the documented workflow:

1. the query trajectory -> a rosbag2 bag with a drifting odometry input (2 %/m scale, 1 deg/m
   heading, as the demo), ``g2g_ros.bags.convert`` (``g2g-bag convert``);
2. a map of the mapping trajectory's ``cam0`` keyframes (0.1 m / 5 deg apart;
   ``g2g-map build --cameras cam0 --min-translation 0.1 --min-rotation 5.0``);
3. ``g2g-eval-bag QUERY --graph relocalize`` with the demo's relocalize settings (no hint),
   which records the node's outputs and writes the pairs it evaluated;
4. g2g-eval's classical baseline, G2G alone and "no motion" on those pairs.

It scores every published fix (:mod:`benchmarks.reloc_scoring`: errors, false accepts over
0.15 m or 3 deg, the verifier's evidence the node publishes with the fix, map coverage) and
writes ``benchmarks/RESULTS_real_reloc.md`` (and a JSON next to the outputs).

    PYTHONPATH=$PWD python -m benchmarks.bench_real_reloc --real data/real_reloc \
        --sim-frames 480 --out outputs/real_reloc

``--drift SCALE YAW`` sets the query odometry's drift (``--drift 0 0``: none) and ``-p
NODE.PARAM:=VALUE`` adds node parameters, as g2g-eval-bag's ``-p``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from benchmarks.common import ROOT, from_root, machine_info
from benchmarks.reloc_scoring import (
    COVER_ROT_DEG, COVER_TRANS_M, FALSE_ACCEPT_ROT_DEG, FALSE_ACCEPT_TRANS_M, coverage,
    fix_records, is_false_accept, summarize,
)
from benchmarks.verifier_evidence import fix_evidence, rule_table
from g2g_model.localization.verification import PUBLISHED_SD_SCALE

# The real sets of tools/make_real_reloc.py: TUM fr3 office (17 frames), fr3 cabinet (58) and
# two KITTI clips (a car, 51 frames each, from data/real_stereo_kitti).
REAL_SETS = tuple(ROOT / "data" / name for name in (
    "real_reloc", "real_reloc_cabinet", "real_reloc_kitti06", "real_reloc_kitti01"))
# The demo's relocalize settings (g2g_ros/demo.py), a fix every 0.5 s of bag time, no hint.
RELOC_FLAGS = ("--rig", "sim", "-p", "relocalize.localize_period_s:=0.5",
               "-p", "relocalize.consistency_count:=1", "-p", "relocalize.min_translation_m:=0.05",
               "--log-level", "warn")
METHOD_ROWS = (("G2G alone (the node's windows)", "node", "b0"),
               ("classical SIFT + RANSAC, same windows", "method", "classical"),
               ("published fix (G2G + verification)", "node", "fix"),
               ("'no motion' reference", "method", "identity"))


# Which instant each row of a run's window table is scored at.
INSTANTS = ("G2G alone, g2g-eval's classical baseline and 'no motion' are scored at each window's "
            "first query instant (B0, G2G's anchor); the published fix and the classical "
            "baseline run again on the same windows at the instant the fix holds (the window's "
            "newest, where the node's verifier anchors).")


def replay(name: str, data_root: Path, map_traj: Path, query_traj: Path, out: Path,
           drift: tuple = (0.02, 1.0), params: Sequence[str] = (),
           cover_trans_m: float = COVER_TRANS_M) -> Dict[str, object]:
    """Steps 1-4 of the module docstring for one map / query pair; the scored result.
    ``drift``: the odometry input's scale drift per metre and heading drift (deg) per metre;
    ``params``: more ``NODE.PARAM:=VALUE`` for g2g-eval-bag (after the demo's);
    ``cover_trans_m``: how near a map keyframe covers a query frame (a car's set: metres)."""
    from g2g_model.data.format import TrajectoryReader
    from g2g_model.estimation.pipeline import G2GPipeline
    from g2g_model.maps.building import build_map_from_trajectory
    from g2g_model.maps.format import save_map
    from g2g_model.training.evaluate import default_methods, evaluate_methods
    from g2g_ros.bags.convert import OdometrySource, convert_trajectory
    from g2g_ros.bags.eval_bag import evaluate_args
    from g2g_ros.bags.evaluation import load_ground_truth, load_outputs

    # The run's folder: its name with the commas and spaces a command line would quote.
    work = out.resolve() / re.sub(r"[, ]+", "_", name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    bag = work / "query.mcap"
    odometry = OdometrySource(drift_per_m=drift[0], yaw_drift_deg_per_m=drift[1])
    convert_trajectory(query_traj, bag, odometry=odometry, progress=False)
    pipeline = G2GPipeline.default("relocalization")
    gmap = build_map_from_trajectory(map_traj, pipeline, ["cam0"], min_translation_m=0.1,
                                     min_rotation_deg=5.0, progress=False)
    map_path = save_map(gmap, work / "map.g2gmap")
    replay_dir = work / "replay"
    argv = [str(bag), "--graph", "relocalize", "--map", str(map_path), "--out",
            str(replay_dir), *RELOC_FLAGS, *[a for p in params for a in ("-p", p)],
            "--pairs-index", str(replay_dir / "pairs.json"),
            "--dataset-root", str(data_root), "--query-trajectory", str(query_traj),
            "--map-trajectory", str(map_traj), "--quiet"]
    command = from_root("g2g-eval-bag " + shlex.join(argv))
    print(f"[{name}] {command}", flush=True)
    _, report = evaluate_args(argv)
    rel = report["relocalization"]
    methods = {}
    if "pairs_index" in report:
        specs = default_methods([], "default", False, identity=True)
        methods = evaluate_methods("reloc", str(data_root),
                                   str(Path(report["pairs_index"]["path"]).resolve()),
                                   specs, str(work / "same_pairs"), progress=False)
    gt = load_ground_truth(bag)
    outputs = load_outputs(report["outputs_bag"])
    truth = {int(s): gt.at(int(s)) for s in gt.stamps}
    truth = {k: v for k, v in truth.items() if v is not None}
    records = fix_records(outputs.reloc_poses, truth, outputs.alignments,
                          outputs.reloc_covariances)
    query = TrajectoryReader(query_traj)
    evidence = fix_evidence(
        outputs.alignments, {(f.camera, int(f.stamp_ns)): f for f in gmap.frames},
        {int(s): query.image("cam0", i) for i, s in enumerate(query.timestamps_ns)},
        query.rig["cam0"].K, gt.odom_input, gt.base_T_cam["cam0"], truth)
    map_cams = np.stack([f.world_T_cam for f in gmap.frames])
    covered = coverage(query.world_T_cam("cam0"), map_cams, trans_m=cover_trans_m)
    rows = {}
    predicted = rel.get("predicted") or {}
    for label, source, key in METHOD_ROWS:
        row = predicted.get(key) if source == "node" else (methods.get(key) or {}).get(
            "b0", {}).get("all")
        if row:
            rows[label] = row
    return {"name": name, "command": command, "map_keyframes": len(gmap),
            "cover_trans_m": cover_trans_m,
            "query_frames": query.num_frames, "replay": report.get("replay"),
            "summary": summarize(records, int(rel.get("attempts") or 0),
                                 float(covered.mean()) if len(covered) else 0.0),
            "fixes": records, "evidence": evidence, "windows": rows,
            # g2g-eval-bag's own figures: the published covariance's coverage of the fixes'
            # errors and each stage's runs on relocalize/status.
            "covariance": rel.get("published_covariance") or {},
            "stages": (report.get("latency", {}).get("node_stage_runs_ms") or {}).get(
                "relocalize/status", {})}


def _fmt(value, digits=3) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float)
                                      else str(value))


def _provenance(results: List[Dict[str, object]]) -> List[str]:
    """The real set's sources (tools/make_real_reloc.py's sources.json) as text lines."""
    lines = []
    for r in results:
        src = r.get("sources")
        if not src:
            continue
        where = "; ".join(f"{k}: {v['repo']}@{v['commit'][:12]}:{_paths(v)}" if isinstance(
            v, dict) else f"{k}: {v}" for k, v in src.get("sources", {}).items())
        lines += [f"Real data ({r['name']}): {src['dataset']['name']} "
                  f"({src['dataset']['license']}); {where}; split {src['split']} of "
                  f"{src['frames']} frames; sha256 of every input in sources.json "
                  "(tools/make_real_reloc.py).", ""]
    return lines


def _paths(source: Dict[str, object]) -> str:
    """The repository paths a make_real_reloc source names."""
    return str(source.get("path") or ", ".join(
        str(source[k]) for k in ("frames", "ground_truth") if k in source))


def _cover_note(results: List[Dict[str, object]]) -> str:
    """The runs whose set names another cover distance (a car's: its sources.json)."""
    other = [f"{r['name']}: {r['cover_trans_m']:g} m" for r in results
             if r.get("cover_trans_m", COVER_TRANS_M) != COVER_TRANS_M]
    return f"; {', '.join(other)}, as the set names it" if other else ""


def real_name(root: Path) -> str:
    """A real set's run name: ``real`` for the office (``data/real_reloc``, the first default
    set), ``real, <folder>`` for the others."""
    return "real" if root.name == REAL_SETS[0].name else f"real, {root.name}"


def _classical_rows(result: Dict[str, object]) -> Dict[str, Dict[str, object]]:
    """The classical baseline again on the published fixes' windows (verifier_evidence): with
    the query's intra-window poses from the odometry (what the node has) and, as a control of
    g2g-eval's row, with the true ones."""
    fixes = {f["stamp_ns"] for f in result["fixes"]}
    records = [e for e in result["evidence"] if e["stamp_ns"] in fixes and not e.get("skipped")]
    rows = {}
    for label, key in (("classical, the same windows with the odometry's intra-window poses "
                        "(as the node)", "classical_odom"),
                       ("classical, the same windows again (true intra-window poses)",
                        "classical_true")):
        got = [(e[key + "_err_deg"], e[key + "_err_m"]) for e in records
               if e.get(key + "_err_m") is not None]
        failed = sum(1 for e in records if key + "_err_m" in e and e[key + "_err_m"] is None)
        if got:
            rot, trans = np.array(got).T
            rows[label] = {"n": len(got) + failed, "n_failed": failed,
                           "rot_err_mean": rot.mean(), "rot_err_median": np.median(rot),
                           "trans_err_mean": trans.mean(), "trans_err_median": np.median(trans)}
        elif failed:   # failed on every window: the row says so
            rows[label] = {"n": failed, "n_failed": failed}
    return rows


def _factor(p90_published):
    """The factor on the verifier's own sd whose 3 sd hold the 90th percentile of the errors."""
    return "-" if p90_published is None else f"{PUBLISHED_SD_SCALE * p90_published / 3:.1f}"


def _covariance_and_cost(results: List[Dict[str, object]]) -> List[str]:
    """Two tables: the published fixes' errors in the published covariance's standard
    deviations, and the verify stage's and the whole localization's wall time."""
    lines = ["", "The published covariance against the fixes' errors (error / the standard "
             "deviation along the covariance's widest axis, at base_link; the verifier's own "
             f"is {PUBLISHED_SD_SCALE:g} times narrower, PUBLISHED_SD_SCALE):", "",
             "| run | fixes | position: median, p90 | rotation: median, p90 | within 3 sd, "
             "position / rotation: published | the verifier's own | the least factor on the "
             "verifier's sd that puts 9 in 10 within 3 sd, position / rotation |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        c = r.get("covariance") or {}
        lines.append(
            f"| {r['name']} | {c.get('n', 0)} | {_fmt(c.get('median_m'), 2)}, "
            f"{_fmt(c.get('p90_m'), 2)} | {_fmt(c.get('median_deg'), 2)}, "
            f"{_fmt(c.get('p90_deg'), 2)} | {_fmt(c.get('within_3sd_m'), 2)} / "
            f"{_fmt(c.get('within_3sd_deg'), 2)} | {_fmt(c.get('verifier_within_3sd_m'), 2)} / "
            f"{_fmt(c.get('verifier_within_3sd_deg'), 2)} | {_factor(c.get('p90_m'))} / "
            f"{_factor(c.get('p90_deg'))} |")
    lines += ["", "What a localization took (relocalize/status after each localization; two "
              "processes, the replay's player and the node, share this machine's cores):", "",
              "| run | localizations seen | verify median / p90 / max (s) | whole localization "
              "median / p90 / max (s) |", "|---|---|---|---|"]
    for r in results:
        st = r.get("stages") or {}
        cells = []
        for stage in ("verify", "total"):
            t = st.get(stage) or {}
            cells.append(" / ".join(_fmt(None if t.get(k) is None else t[k] / 1e3, 2)
                                    for k in ("median_ms", "p90_ms", "max_ms")))
        seen = (st.get("total") or {}).get("n", 0)
        lines.append(f"| {r['name']} | {seen} of {r['summary']['localizations']} | "
                     f"{cells[0]} | {cells[1]} |")
    return lines


def render(results: List[Dict[str, object]], argv: List[str]) -> str:
    lines = [f"# Relocalization on a real sequence and its simulated twin "
             f"({datetime.date.today().isoformat()})", "",
             "Command: `PYTHONPATH=$PWD python -m benchmarks.bench_real_reloc "
             + shlex.join(argv) + "`", "", "Machine:", *machine_info(), "",
             f"False accept: a published fix off by more than {FALSE_ACCEPT_TRANS_M} m or "
             f"{FALSE_ACCEPT_ROT_DEG} deg. Fix rate where covered: fixes / (localizations x "
             f"the fraction of query frames with a map keyframe within {COVER_TRANS_M} m and "
             f"{COVER_ROT_DEG:g} deg{_cover_note(results)}).", "",
             *_provenance(results),
             "| run | map kf / query frames | localizations / fixes | fixes by path | fix error "
             "median / max (m) | rot median / max (deg) | false accepts | covered | fix rate "
             "where covered |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["summary"]
        paths = ", ".join(f"{k} {v}" for k, v in sorted(s["by_path"].items())) or "-"
        lines.append(
            f"| {r['name']} | {r['map_keyframes']} / {r['query_frames']} | "
            f"{s['localizations']} / {s['fixes']} | {paths} | {_fmt(s['trans_median_m'])} / "
            f"{_fmt(s['trans_max_m'])} | {_fmt(s['rot_median_deg'], 2)} / "
            f"{_fmt(s['rot_max_deg'], 2)} | {s['false_accepts']} | "
            f"{_fmt(s['covered_fraction'], 2)} | {_fmt(s['fix_rate_where_covered'], 2)} |")
    lines += _covariance_and_cost(results)
    for r in results:
        lines += ["", f"## {r['name']}: the node's windows (g2g-eval on the same pairs)", "",
                  INSTANTS, "",
                  "| method | n | failed | rot mean / median (deg) | trans mean / median (m) |",
                  "|---|---|---|---|---|"]
        for label, row in {**r["windows"], **_classical_rows(r)}.items():
            lines.append(f"| {label} | {row.get('n')} | {row.get('n_failed', 0)} | "
                         f"{_fmt(row.get('rot_err_mean'), 2)} / "
                         f"{_fmt(row.get('rot_err_median'), 2)} | "
                         f"{_fmt(row.get('trans_err_mean'))} / "
                         f"{_fmt(row.get('trans_err_median'))} |")
        lines += ["", "Published fixes: the evidence the node publishes (path, inliers, pose "
                  "source) and the verifier run again on the same windows (verifier_evidence.py"
                  "). The published alignment names the map window G2G ran on; a fix whose "
                  "geometry came from the second window (verify_second_window) is run again on "
                  "that first window, where it found none: such a row has 0 inliers again and "
                  "its evidence columns are not the fix's.", "",
                  "| fix | error m / deg | path, published inliers | inliers again | spread | "
                  "residual px med / p90 | position sd mm | G2G gap m | anchor alone gap m "
                  "(inliers) | anchor alone error m | true-window error m | window span m | "
                  "gap to previous fix m |", "|" + "---|" * 13]
        by_stamp = {e["stamp_ns"]: e for e in r["evidence"]}
        for f in r["fixes"]:
            e = by_stamp.get(f["stamp_ns"], {})
            flag = " **false**" if is_false_accept(f) else ""
            sd = e.get("position_sd_m")
            sd = _fmt(None if sd is None else 1e3 * sd, 1)
            lines.append(
                f"| {f['stamp_ns']} | {f['trans_err_m']:.3f} / {f['rot_err_deg']:.2f}{flag} | "
                f"{f['path']}, {f['inliers']} | {_fmt(e.get('inliers'))} | "
                f"{_fmt(e.get('spread'), 2)} | {_fmt(e.get('residual_px_median'), 2)} / "
                f"{_fmt(e.get('residual_px_p90'), 2)} | {sd} | {_fmt(e.get('g2g_m'))} | "
                f"{_fmt(e.get('anchor_m'))} "
                f"({_fmt(e.get('anchor_inliers'))}) | {_fmt(e.get('anchor_err_m'))} | "
                f"{_fmt(e.get('true_window_err_m'))} | {_fmt(e.get('window_span_m'), 2)} | "
                f"{_fmt(e.get('prev_fix_m'))} |")
        lines += ["", f"Command: `{r['command']}`"]
    records, bad = [], []
    for r in results:
        by_stamp = {e["stamp_ns"]: e for e in r["evidence"]}
        for f in r["fixes"]:
            if f["stamp_ns"] in by_stamp and not by_stamp[f["stamp_ns"]].get("skipped"):
                records.append(by_stamp[f["stamp_ns"]])
                bad.append(is_false_accept(f))
    if records:
        lines += ["", "## Candidate acceptance rules on these fixes (all runs)", "",
                  "| rule (reject when) | false fixes rejected | good fixes kept |",
                  "|---|---|---|"]
        for name, row in rule_table(records, bad).items():
            lines.append(f"| {name} | {row['bad_rejected']} / {row['bad']} | "
                         f"{row['good_kept']} / {row['good']} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", type=Path, nargs="+", default=list(REAL_SETS),
                        help="real sets built by tools/make_real_reloc.py (map/, query/; "
                        "default: data/real_reloc, data/real_reloc_cabinet and "
                        "data/real_reloc_kitti06 / 01 where built; none: no real set)")
    parser.add_argument("--sim-frames", type=int, default=480,
                        help="frames per pass of the twin (0: no twin)")
    parser.add_argument("--sim-size", default="640x480", metavar="WxH",
                        help="the twin's images (default: the real set's 640 x 480)")
    parser.add_argument("--sim-data", type=Path, default=ROOT / "data" / "real_reloc_sim")
    parser.add_argument("--sim-seeds", type=int, nargs="+", default=None, metavar="SEED",
                        help="the twin's scenes (test split, 20000-20003; default: "
                        "sim_handheld.SCENES, 20001 and 20002)")
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "real_reloc")
    parser.add_argument("--drift", type=float, nargs=2, default=(0.02, 1.0),
                        metavar=("SCALE_PER_M", "YAW_DEG_PER_M"),
                        help="the query bag's odometry drift (default: the demo's)")
    parser.add_argument("-p", dest="params", action="append", default=[],
                        metavar="NODE.PARAM:=VALUE", help="a further node parameter (repeatable)")
    parser.add_argument("--results", type=Path,
                        default=ROOT / "benchmarks" / "RESULTS_real_reloc.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    results = []
    for real in args.real:
        if str(real) == "none":
            continue
        if not (real / "map").exists():
            print(f"no real set at {real} (tools/make_real_reloc.py builds it)",
                  file=sys.stderr)
            continue
        sources = real / "sources.json"
        sources = json.loads(sources.read_text()) if sources.exists() else {}
        results.append(replay(real_name(real), real, real / "map", real / "query",
                              args.out, tuple(args.drift), args.params,
                              float(sources.get("cover_trans_m", COVER_TRANS_M))))
        if sources:
            results[-1]["sources"] = sources
    if args.sim_frames:
        from benchmarks.sim_handheld import SCENES, SEED, render_twin

        try:
            size = tuple(int(v) for v in args.sim_size.lower().split("x"))
            assert len(size) == 2 and min(size) >= 64
        except (ValueError, AssertionError):
            parser.error(f"--sim-size must be WIDTHxHEIGHT (each >= 64), got {args.sim_size!r}")
        for seed in args.sim_seeds or SCENES:
            map_traj, query_traj = render_twin(args.sim_data, args.sim_frames, size, seed)
            name = "simulated twin" if seed == SEED else f"simulated twin, scene {seed}"
            results.append(replay(name, args.sim_data, map_traj, query_traj, args.out,
                                  tuple(args.drift), args.params))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    text = render(results, list(argv if argv is not None else sys.argv[1:]))
    args.results.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
