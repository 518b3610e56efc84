"""Tables of metric summaries (Markdown, CSV). A cell is never ``nan``: an empty statistic
prints ``n/a (n=0)``."""

from __future__ import annotations

import csv
import io
import math
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from g2g_model.metrics.alignment import SIM3_LABEL


# Which count qualifies a statistic that can be empty; used to print "n/a (n=0)".
_COUNT_KEY = {"rta_mean": "rta_n", "rta_median": "rta_n"}
DEFAULT_TABLE_COLUMNS = (
    "n", "n_failed", "rot_err_mean", "rot_err_median", "trans_err_mean", "trans_err_median",
    "rta_mean", "rta_median", "rta_undefined_gt", "rta_undefined_pred", "rra@5", "rra@15",
    "rta@5", "rta@15", "maa@30",
)


def format_value(value: object, count: Optional[int] = None, digits: int = 3) -> str:
    """Cell text: numbers with ``digits`` decimals, ``None``/NaN as ``n/a`` (with ``(n=count)``
    when a count is known). Never returns ``nan``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a" if count is None else f"n/a (n={count})"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.{digits}f}"
    return str(value)


def summary_rows(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 3,
) -> List[List[str]]:
    """Rows of formatted cells: one per named summary, first cell = its name."""
    rows = []
    for name, summ in summaries.items():
        row = [str(name)]
        for col in columns:
            count_key = _COUNT_KEY.get(col, "n")
            row.append(format_value(summ.get(col), summ.get(count_key), digits))
        rows.append(row)
    return rows


def format_markdown_table(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 3,
    title: str = "",
) -> str:
    """GitHub-flavoured Markdown table of named summaries (e.g. ``{"B0": ..., "[0.1,0.3)": ...}``).

    ``title`` becomes the header of the first column; put ``sim3_aligned`` in it for aligned
    results.
    """
    header = [title or "set"] + list(columns)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    for row in summary_rows(summaries, columns, digits):
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def format_csv_table(
    summaries: Mapping[str, Mapping[str, object]],
    columns: Sequence[str] = DEFAULT_TABLE_COLUMNS,
    digits: int = 6,
    title: str = "",
) -> str:
    """CSV text of named summaries, same cells as :func:`format_markdown_table`."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([title or "set"] + list(columns))
    writer.writerows(summary_rows(summaries, columns, digits))
    return buf.getvalue()


def flatten_group_summary(summary: Mapping[str, object]) -> Dict[str, Mapping[str, object]]:
    """Named rows of a :func:`summarize_groups` / :func:`summarize_by_overlap` result for the
    table helpers: ``"b0"``, ``"b0 [0.1,0.3)"``, ..., ``"b_all"``, ``"a_all"``. Aligned results
    get a ``" (sim3_aligned)"`` suffix on every name."""
    suffix = f" ({SIM3_LABEL})" if summary.get("alignment") == SIM3_LABEL else ""
    rows: Dict[str, Mapping[str, object]] = {}
    keyed = {k: v for k, v in summary.items() if isinstance(v, Mapping) and "all" in v}
    if not keyed and "all" in summary:
        keyed = {"all": summary}
    for key, block in keyed.items():
        rows[f"{key}{suffix}"] = block["all"]
        for label, summ in block.get("bins", {}).items():
            rows[f"{key} {label}{suffix}"] = summ
    return rows
