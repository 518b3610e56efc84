"""The three-phase overlap curriculum on synthetic loss streams, and its learning-rate factor."""

import math

import pytest

from g2g_model.training.config import CurriculumConfig
from g2g_model.training.curriculum import OverlapCurriculum, threshold_levels


def test_threshold_levels_of_the_paper():
    assert threshold_levels(0.5, 0.1, 0.05) == [0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1]
    with pytest.raises(ValueError, match="stop <= start"):
        threshold_levels(0.1, 0.5, 0.05)


def _run(cur, stream):
    trace = []
    for rot, trans in stream:
        trace.append((cur.phase, cur.threshold, cur.lr_factor()))
        cur.update(rot, trans)
    return trace


def test_gate_drives_plateau_levels_then_decay():
    cfg = CurriculumConfig(start=0.5, stop=0.4, step=0.05, window=3, rot_threshold=0.1,
                           trans_threshold=0.2)
    cur = OverlapCurriculum(cfg, warmup_steps=2, decay_steps=4)
    # warm-up: linear lr, threshold 0.5, losses high
    trace = _run(cur, [(1.0, 1.0)] * 2)
    assert [t[0] for t in trace] == ["warmup", "warmup"]
    assert [t[2] for t in trace] == [0.5, 1.0]
    assert cur.phase == "plateau" and cur.threshold == 0.5
    # high losses: the gate stays closed however long we wait
    _run(cur, [(0.5, 0.5)] * 10)
    assert cur.threshold == 0.5 and cur.lr_factor() == 1.0
    # rotation low but translation high: still closed
    _run(cur, [(0.01, 0.9)] * 5)
    assert cur.threshold == 0.5
    # both low: the sliding mean needs `window` fresh steps, then the level advances
    _run(cur, [(0.01, 0.01)] * 2)
    assert cur.threshold == 0.5
    _run(cur, [(0.01, 0.01)])
    assert cur.threshold == 0.45
    _run(cur, [(0.01, 0.01)] * 3)
    assert cur.threshold == 0.4
    _run(cur, [(0.01, 0.01)] * 3)
    assert cur.phase == "decay" and cur.threshold == 0.0
    factors = [t[2] for t in _run(cur, [(0.01, 0.01)] * 4)]
    assert factors[0] == pytest.approx(1.0)
    assert factors[2] == pytest.approx(0.5)
    assert all(a > b for a, b in zip(factors, factors[1:]))
    assert cur.done and cur.lr_factor() == 0.0
    kinds = [(t["from"], t["to"]) for t in cur.transitions]
    assert kinds == [("warmup", "plateau"), ("plateau", "plateau"), ("plateau", "plateau"),
                     ("plateau", "decay"), ("decay", "done")]


def test_forced_advance_and_disabled_curriculum():
    cfg = CurriculumConfig(start=0.5, stop=0.4, step=0.05, window=100, max_steps_per_level=3)
    cur = OverlapCurriculum(cfg, warmup_steps=1, decay_steps=2)
    thresholds = [t[1] for t in _run(cur, [(9.0, 9.0)] * 11)]
    assert thresholds == [0.5, 0.5, 0.5, 0.5, 0.45, 0.45, 0.45, 0.4, 0.4, 0.4, 0.0]
    assert cur.transitions[1]["forced"] is True
    off = OverlapCurriculum(CurriculumConfig(enabled=False), warmup_steps=2, decay_steps=3)
    trace = _run(off, [(9.0, 9.0)] * 5)
    assert [t[0] for t in trace] == ["warmup"] * 2 + ["decay"] * 3
    assert {t[1] for t in trace} == {0.0}
    assert off.done


def test_state_dict_round_trip_continues_identically():
    cfg = CurriculumConfig(start=0.5, stop=0.3, step=0.1, window=4, rot_threshold=0.3,
                           trans_threshold=0.3)
    stream = [(math.sin(k) ** 2, math.cos(3 * k) ** 2) for k in range(40)]
    full = OverlapCurriculum(cfg, 3, 6)
    expected = _run(full, stream)
    first = OverlapCurriculum(cfg, 3, 6)
    head = _run(first, stream[:17])
    second = OverlapCurriculum(cfg, 3, 6)
    second.load_state_dict(first.state_dict())
    assert head + _run(second, stream[17:]) == expected
    other = OverlapCurriculum(CurriculumConfig(start=0.4, stop=0.3, step=0.1), 3, 6)
    with pytest.raises(ValueError, match="levels differ"):
        other.load_state_dict(first.state_dict())
