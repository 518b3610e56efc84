"""Dataset summaries: counts and histogram plots (matplotlib Agg, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


def save_histogram(values: np.ndarray, path: str | Path, title: str, xlabel: str,
                   bins: int | Sequence[float] = 20) -> Path:
    """Write a PNG histogram of ``values`` (log-scaled counts) and return its path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    values = np.asarray(values, dtype=np.float64).ravel()
    ax.hist(values, bins=bins, color="#3b75af", edgecolor="white")
    if len(values) and np.ptp(np.histogram(values, bins=bins)[0]) > 100:
        ax.set_yscale("log")
    ax.set_title(f"{title} (n = {len(values)})")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    fig.tight_layout()
    fig.savefig(path)
    return path


def overlap_summary(values: np.ndarray) -> dict:
    """Counts of overlap values per decile band, plus mean / median."""
    values = np.asarray(values, dtype=np.float64).ravel()
    edges = np.linspace(0.0, 1.0, 11)
    counts, _ = np.histogram(values, bins=edges)
    return {
        "pairs": int(len(values)),
        "mean": float(values.mean()) if len(values) else None,
        "median": float(np.median(values)) if len(values) else None,
        "nonzero": int((values > 0).sum()),
        "histogram": {f"{a:.1f}-{b:.1f}": int(c)
                      for a, b, c in zip(edges[:-1], edges[1:], counts)},
    }
