"""The table of `make demo` (see :mod:`g2g_ros.demo`).

It computes nothing of its own: the nodes' rows are g2g-eval-bag's report of the replay
(:func:`g2g_ros.bags.eval_bag.build_report`), the other methods' rows are g2g-eval's scores
(:func:`g2g_model.training.evaluate.evaluate_methods`) on the pair indexes that report wrote, so
the demo's figures and a bag evaluation's agree by construction. Every row is the primary pose
``T_{A0<-B0}`` of the pair, in the frame of the pair's first camera (ARCHITECTURE §1), except
the published fix's: ``T_{A0<-X}`` at the instant X the fix holds (the query window's newest for
a geometric fix, :func:`g2g_ros.bags.alignment_fields.fix_stamp`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from g2g_model.metrics import format_markdown_table, format_value

COLUMNS = ("n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean",
           "trans_err_median", "rra@5", "rta@15")
RELOC_ROWS = (("relocalization node: G2G alone (the node's windows)", "node", "b0"),
              ("relocalization classical, same windows", "method", "classical"),
              ("relocalization 'no motion' reference", "method", "identity"),
              ("relocalization published fix (G2G + verification)", "node", "fix"))
RIG_ROWS = (("rig odometry node: G2G + verification (per keyframe step)", "node", ""),
            ("rig odometry G2G alone, same steps", "method", "g2g"),
            ("rig odometry classical, same steps", "method", "classical"),
            ("rig odometry 'no motion' reference", "method", "identity"))


def _method(results: Mapping[str, Mapping], label: str) -> Optional[Mapping]:
    """g2g-eval's B0 summary of a method; ``g2g``: the one checkpoint's (labelled by its stem)."""
    if label == "g2g":
        label = next((k for k in results if k not in ("classical", "identity")), "")
    return results[label]["b0"]["all"] if label in results else None


def demo_summaries(report: Mapping, reloc_methods: Mapping[str, Mapping],
                   rig_methods: Mapping[str, Mapping]) -> Dict[str, Mapping]:
    """Row name -> summary (:func:`g2g_model.metrics.summarize_errors` keys); rows without
    data are left out."""
    rows: Dict[str, Optional[Mapping]] = {}
    predicted = (report.get("relocalization") or {}).get("predicted") or {}
    for name, source, key in RELOC_ROWS:
        rows[name] = predicted.get(key) if source == "node" else _method(reloc_methods, key)
    odometry = report.get("rig_odometry") or {}
    for name, source, key in RIG_ROWS:
        rows[name] = odometry.get("pairwise") if source == "node" else _method(rig_methods, key)
    return {name: row for name, row in rows.items() if row}


def demo_report(report: Mapping, reloc_methods: Mapping[str, Mapping],
                rig_methods: Mapping[str, Mapping], query_traj=None) -> str:
    """The table and the lines under it (fix errors, fixes by path, the query traversal)."""
    summaries = demo_summaries(report, reloc_methods, rig_methods)
    lines = [format_markdown_table(summaries, columns=COLUMNS, title="method") if summaries
             else "(no outputs recorded)\n"]
    rel = report.get("relocalization") or {}
    err = rel.get("fix_error_trans_m") or {}
    if err.get("n"):
        lines.append(f"relocalized robot position vs ground truth: mean "
                     f"{format_value(err['mean'])} m, median {format_value(err['median'])} m "
                     f"over {err['n']} fixes")
    by_path = rel.get("by_path") or {}
    if by_path:
        count = {k: by_path.get(k, {}).get("fixes", 0) for k in ("verified", "refined", "g2g")}
        lines.append(f"fixes by path: {count['verified']} verified, {count['refined']} refined"
                     f" (geometry corrected G2G), {count['g2g']} G2G alone; median position "
                     "error: " + ", ".join(f"{p} {format_value(r['median_trans_m'])} m"
                                           for p, r in sorted(by_path.items())))
    if query_traj is not None:
        import numpy as np

        from g2g_model.data.format import TrajectoryReader

        reader = TrajectoryReader(query_traj)
        body = reader.world_T_body
        lines.append(f"query traversal: {reader.num_frames} frames, start-to-end "
                     f"{np.linalg.norm(body[0][:3, 3] - body[-1][:3, 3]):.1f} m; odometry "
                     "drift injected: 2 %/m scale, 1 deg/m heading")
    return "\n".join(lines)
