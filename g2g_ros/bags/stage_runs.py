"""What each stage of a node took, run by run, from its recorded status topic.

A node's ``~/status`` (``EstimatorStatus``) carries every stage's last latency and is
published periodically, so a recording repeats values between runs. Each new value of a stage
is one run of it (for the relocalize node's ``verify`` and ``total``: one localization; that
node also publishes its status after every localization, so none is missed); a run between two
status messages is not seen, and two runs of exactly the same time count once.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence

import numpy as np


def distinct_stage_samples(statuses: Iterable[object]) -> List[Dict[str, float]]:
    """The stage latencies (ms) of ``EstimatorStatus`` messages, one sample per change of any
    of them, in order (NaN: not measured yet)."""
    out, seen = [], None
    for msg in statuses:
        values = np.asarray(msg.stage_latency_ms, np.float64)
        if seen is None or values.shape != seen.shape or not np.array_equal(
                values, seen, equal_nan=True):
            out.append(dict(zip(msg.stage_names, values.tolist())))
        seen = values
    return out


def stage_runs(samples: Sequence[Mapping[str, float]], stage: str) -> Dict[str, object]:
    """``n``, ``median_ms``, ``p90_ms`` and ``max_ms`` of one stage's runs in
    :func:`distinct_stage_samples` (``{"n": 0}``: never measured)."""
    values = [s.get(stage, float("nan")) for s in samples]
    ms = np.array([v for k, v in enumerate(values) if np.isfinite(v)
                   and (k == 0 or v != values[k - 1])], np.float64)
    if not len(ms):
        return {"n": 0}
    return {"n": int(len(ms)), "median_ms": float(np.median(ms)),
            "p90_ms": float(np.percentile(ms, 90)), "max_ms": float(ms.max())}


def all_stage_runs(samples: Sequence[Mapping[str, float]]) -> Dict[str, Dict[str, object]]:
    """:func:`stage_runs` of every stage the samples name, in their order."""
    names = list(dict.fromkeys(name for s in samples for name in s))
    return {name: stage_runs(samples, name) for name in names}
