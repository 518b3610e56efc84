"""Report of an evaluation replay: JSON (machine), Markdown (people), trajectory plot (PNG).

Every number is formatted with :func:`g2g_model.metrics.format_value`, so an empty statistic
reads ``n/a (n=0)`` and no table ever shows NaN; the JSON is written with ``allow_nan=False``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import numpy as np

from g2g_model.metrics import format_markdown_table, format_value

PAIR_COLUMNS = ("n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean",
                "trans_err_median", "rta_mean", "rra@5", "rta@5", "maa@30")


def _clean(value):
    """JSON-safe copy: numpy -> Python, non-finite floats -> None, float keys -> str."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value


def write_json(report: Mapping, path: Path) -> Path:
    path.write_text(json.dumps(_clean(report), indent=1, allow_nan=False) + "\n")
    return path


def _stats_row(name: str, stats: Optional[Mapping]) -> str:
    stats = stats or {}
    n = stats.get("n", 0)
    cells = [format_value(stats.get(k), n) for k in ("mean", "median", "max")]
    return f"| {name} | {n} | " + " | ".join(cells) + " |"


def markdown(report: Mapping) -> str:
    lines: List[str] = [f"# G2G evaluation by replay: {report['graph']}", ""]
    lines += [f"- bag: `{report['bag']}`", f"- outputs: `{report['outputs_bag']}`",
              f"- dataset: {report.get('dataset', 'unknown')}",
              f"- replay: {report['replay']['mode']}, {report['replay']['groups']} groups, "
              f"{report['replay']['wait_timeouts']} wait timeouts"
              + (f" {report['replay']['timeouts_by_topic']} (**results may depend on the "
                 f"machine's speed**)" if report['replay'].get('timeouts_by_topic') else "")]
    if report.get("pairs_index"):
        lines.append(f"- evaluated pairs as a g2g-eval index: `{report['pairs_index']['path']}`"
                     f" (`{report['pairs_index']['g2g_eval']}`)")
    untrained = report.get("untrained_model", {})
    if any(untrained.values()):
        lines += ["", "**WARNING: the node(s) "
                  + ", ".join(sorted(k for k, v in untrained.items() if v))
                  + " ran with RANDOM (untrained) weights: the numbers below only show the "
                  "wiring, not the method's accuracy.**"]
    elif not untrained:
        lines += ["", "(no diagnostics recorded: whether the model was trained is unknown)"]
    odo = report.get("rig_odometry")
    if odo:
        lines += ["", "## Rig odometry", "",
                  f"{odo['outputs']} odometry outputs, {odo['pairs']} consecutive keyframe pairs "
                  f"(relative pose of {odo['pair_camera']}, T_A0<-B0, vs ground truth).", ""]
        if odo["pairwise"]:
            lines.append(format_markdown_table({"keyframe pairs": odo["pairwise"]},
                                               PAIR_COLUMNS, title="pairs"))
        else:
            lines.append("No pairs (fewer than two odometry outputs with ground truth).")
        k = odo.get("kitti")
        if k:
            lines += ["", f"{k['label']}; path {format_value(k['path_length_m'])} m.", "",
                      "| segment (m) | n_segments | RTE (%) | RRE (deg/100 m) |",
                      "|---|---|---|---|"]
            for length, row in k["per_length"].items():
                lines.append(f"| {float(length):g} | {row['n_segments']} | "
                             f"{format_value(row['rte_pct'], row['n_segments'])} | "
                             f"{format_value(row['rre_deg_per_100m'], row['n_segments'])} |")
            lines.append(f"| all | {k['n_segments']} | "
                         f"{format_value(k['rte_pct'], k['n_segments'])} | "
                         f"{format_value(k['rre_deg_per_100m'], k['n_segments'])} |")
            if k.get("empty"):
                lines += ["", f"({k['reason']})"]
    rel = report.get("relocalization")
    if rel:
        thr = rel["success_threshold"]
        lines += ["", "## Relocalization", "",
                  f"- attempts {rel['attempts']}, accepted {rel['accepted']}, rejected "
                  f"{rel['rejected']}, correct fixes {rel['correct_fixes']} "
                  f"(< {thr['trans_m']} m and < {thr['rot_deg']} deg)",
                  f"- success rate: {format_value(rel['success_rate_pct'], rel['attempts'])} %",
                  "", "| error | n | mean | median | max |", "|---|---|---|---|---|",
                  _stats_row("fix translation (m)", rel["fix_error_trans_m"]),
                  _stats_row("fix rotation (deg)", rel["fix_error_rot_deg"]),
                  _stats_row("map->odom corrected translation (m)",
                             rel["corrected_error_trans_m"]),
                  _stats_row("map->odom corrected rotation (deg)",
                             rel["corrected_error_rot_deg"])]
        for key, label, head in (("by_path", "path", "path"),
                                 ("by_pose_source", "where the pose came from", "pose source")):
            if not rel.get(key):
                continue
            lines += ["", f"Fixes by {label} (false accept: an error over the success "
                      "threshold):", "", f"| {head} | fixes | with ground truth | false accepts "
                      "| median trans (m) | median rot (deg) |", "|---|---|---|---|---|---|"]
            for name, row in sorted(rel[key].items()):
                lines.append(f"| {name} | {row['fixes']} | {row['with_gt']} | "
                             f"{row['false_accepts']} | {format_value(row['median_trans_m'])} | "
                             f"{format_value(row['median_rot_deg'])} |")
        cov = rel.get("published_covariance") or {}
        if cov.get("n"):
            lines += ["", f"Published covariance: {cov['n']} fixes; their errors in the "
                      "standard deviations along its widest axis, position / rotation: median "
                      f"{format_value(cov.get('median_m'))} / "
                      f"{format_value(cov.get('median_deg'))}, 90th percentile "
                      f"{format_value(cov.get('p90_m'))} / {format_value(cov.get('p90_deg'))}; "
                      f"within 3 sd {format_value(cov.get('within_3sd_m'))} / "
                      f"{format_value(cov.get('within_3sd_deg'))} (of the verifier's own, "
                      f"{cov['verifier_sd_scale']:g} times narrower: "
                      f"{format_value(cov.get('verifier_within_3sd_m'))} / "
                      f"{format_value(cov.get('verifier_within_3sd_deg'))})."]
        if rel.get("predicted"):
            lines += ["", "Predicted poses (GroupAlignment) vs ground truth:", "",
                      format_markdown_table(rel["predicted"], PAIR_COLUMNS, title="poses")]
    lat = report.get("latency", {})
    lines += ["", "## Latency", "", "| latency (ms) | n | mean | median | max |",
              "|---|---|---|---|---|",
              _stats_row("replay: group published -> processed", lat.get("replay_wait_ms")),
              _stats_row("relocalization inference", lat.get("reloc_inference_ms"))]
    for topic, stages in (lat.get("node_stage_ms") or {}).items():
        lines.append("")
        lines.append(f"{topic} last stage latencies: " + ", ".join(
            f"{k} {format_value(v, digits=1)} ms" for k, v in stages.items()))
    for topic, stages in (lat.get("node_stage_runs_ms") or {}).items():
        if not any(row.get("n") for row in stages.values()):
            continue
        lines += ["", f"{topic}, each stage's runs (a new value on the status topic: "
                  "one run):", "", "| stage | runs | median ms | p90 ms | max ms |",
                  "|---|---|---|---|---|"]
        for name, row in stages.items():
            if row.get("n"):
                lines.append(f"| {name} | {row['n']} | "
                             + " | ".join(format_value(row[k], digits=1)
                                          for k in ("median_ms", "p90_ms", "max_ms")) + " |")
    if report.get("plots"):
        lines += ["", "## Plots", ""] + [f"- `{p}`" for p in report["plots"]]
    return "\n".join(lines) + "\n"


def plot_trajectories(path: Path, curves: Dict[str, np.ndarray], title: str) -> Path:
    """Top view of ``name -> [T, 3]`` positions on the two axes where the first curve spreads
    most (the ground plane for ground robots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = next(iter(curves.values()))
    axes = np.argsort(np.ptp(ref, axis=0))[::-1][:2] if len(ref) else np.array([0, 1])
    fig, ax = plt.subplots(figsize=(6, 6))
    styles = {"ground truth": "k-", "odometry": "b.-", "rig odometry": "m.-",
              "relocalized (map->odom)": "r.-",
              "relocalization fixes": "g^"}
    for name, xyz in curves.items():
        if len(xyz):
            ax.plot(xyz[:, axes[0]], xyz[:, axes[1]], styles.get(name, ".-"), label=name)
    ax.set_xlabel(f"{'xyz'[axes[0]]} (m)")
    ax.set_ylabel(f"{'xyz'[axes[1]]} (m)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
