"""Training logs: a CSV row per logged step and PNG plots (loss, learning rate, curriculum).

The CSV is append-only across resumes: on resume, rows after the resumed step are dropped first
(they belong to the interrupted part that is redone), so the file always describes one run.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Dict, List

logger = logging.getLogger(__name__)


class CsvLog:
    """Rows of scalars with a fixed header (taken from the first row)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.fields: List[str] = []
        if self.path.is_file():
            with open(self.path, newline="") as fh:
                reader = csv.reader(fh)
                self.fields = next(reader, [])

    def truncate_after(self, step: int) -> None:
        """Drop rows whose ``step`` is greater than ``step`` (called on resume)."""
        if not self.path.is_file():
            return
        rows = self.read()
        rows = [r for r in rows if int(float(r["step"])) <= step]
        self._write_all(rows)

    def _write_all(self, rows: List[Dict[str, str]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.fields)
            if self.fields:
                writer.writeheader()
            writer.writerows(rows)
        tmp.replace(self.path)

    def append(self, row: Dict[str, object]) -> None:
        new = not self.path.is_file() or not self.fields
        if new:
            self.fields = list(row)
        with open(self.path, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.fields, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow({k: _fmt(v) for k, v in row.items()})

    def read(self) -> List[Dict[str, str]]:
        if not self.path.is_file():
            return []
        with open(self.path, newline="") as fh:
            return list(csv.DictReader(fh))


def _fmt(value: object) -> object:
    return f"{value:.6g}" if isinstance(value, float) else value


def plot_training(csv_path: str | Path, out_path: str | Path, loss_keys=("loss",)) -> Path:
    """Loss (log scale), learning rate and curriculum threshold versus step, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = CsvLog(csv_path).read()
    out_path = Path(out_path)
    fig, axes = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
    steps = [float(r["step"]) for r in rows]
    for key in loss_keys:
        if rows and key in rows[0]:
            axes[0].plot(steps, [float(r[key]) for r in rows], label=key, lw=0.8)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("loss")
    axes[0].legend(loc="upper right", fontsize=8)
    if rows and "lr" in rows[0]:
        axes[1].plot(steps, [float(r["lr"]) for r in rows], color="C2")
    axes[1].set_ylabel("learning rate")
    if rows and "threshold" in rows[0]:
        axes[2].step(steps, [float(r["threshold"]) for r in rows], where="post", color="C3")
    axes[2].set_ylabel("overlap threshold")
    axes[2].set_xlabel("step")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_path, dpi=90)
    plt.close(fig)
    return out_path
