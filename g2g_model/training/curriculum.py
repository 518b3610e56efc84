"""The three-phase overlap curriculum and the learning-rate schedule tied to it (ARCHITECTURE §2).

Phases:
    ``warmup``: ``warmup_steps`` steps of linear learning-rate warm-up on pairs whose overlap
        score is >= ``start`` (0.5).
    ``plateau``: constant learning rate; the score threshold is lowered ``start -> stop`` in
        ``step`` decrements (0.50, 0.45, ..., 0.10). A level is left when the sliding mean over
        ``window`` steps (200) of the B0 rotation loss and of the B0 translation loss are both
        under their thresholds (the convergence gate). After the ``stop`` level passes its gate the
        curriculum enters the decay phase. ``max_steps_per_level`` > 0 forces the advance after
        that many steps (a time bound for short CPU runs; 0 keeps the paper's pure gate).
    ``decay``: cosine decay of the learning rate to 0 over ``decay_steps`` steps on all pairs
        (threshold 0).
    ``done``: the run is over.

With ``enabled`` False the plateau is skipped: warm-up then cosine decay on all pairs.
The whole state is a small dict (:meth:`state_dict`) so that a resumed run continues exactly.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Deque, Dict, List, Tuple

from g2g_model.training.config import CurriculumConfig

PHASES = ("warmup", "plateau", "decay", "done")


def threshold_levels(start: float, stop: float, step: float) -> List[float]:
    """``[start, start - step, ..., stop]`` rounded to 4 decimals (0.5 -> 0.1: 9 levels)."""
    if step <= 0 or stop > start:
        raise ValueError(f"curriculum needs step > 0 and stop <= start, got start={start} "
                         f"stop={stop} step={step}")
    count = int(round((start - stop) / step))
    return [round(start - k * step, 4) for k in range(count + 1)]


class OverlapCurriculum:
    """Phase, score threshold and learning-rate factor as a function of the training stream.

    Args:
        config: :class:`CurriculumConfig`.
        warmup_steps: length of the warm-up phase.
        decay_steps: length of the cosine decay phase.
    """

    def __init__(self, config: CurriculumConfig, warmup_steps: int, decay_steps: int) -> None:
        self.config = config
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = int(decay_steps)
        self.levels = threshold_levels(config.start, config.stop, config.step)
        self.phase = "warmup" if self.warmup_steps > 0 else self._after_warmup()
        self.level = 0
        self.step = 0
        self.level_start = 0
        self.decay_start = 0 if self.phase == "decay" else -1
        self.history: Deque[Tuple[float, float]] = deque(maxlen=config.window)
        self.transitions: List[Dict] = []

    def _after_warmup(self) -> str:
        return "plateau" if self.config.enabled else "decay"

    @property
    def threshold(self) -> float:
        """Minimum overlap score of the pairs sampled now."""
        if not self.config.enabled or self.phase in ("decay", "done"):
            return 0.0
        return self.levels[self.level] if self.phase == "plateau" else self.config.start

    def lr_factor(self) -> float:
        """Multiplier of the base learning rate for the current step."""
        if self.phase == "warmup":
            return (self.step + 1) / self.warmup_steps
        if self.phase == "plateau":
            return 1.0
        if self.phase == "decay":
            if self.decay_steps <= 0:
                return 0.0
            k = min(self.step - self.decay_start, self.decay_steps)
            return 0.5 * (1.0 + math.cos(math.pi * k / self.decay_steps))
        return 0.0

    @property
    def done(self) -> bool:
        return self.phase == "done"

    def gate_means(self) -> Tuple[float, float]:
        """Sliding means of the B0 rotation and translation losses (NaN before any step)."""
        if not self.history:
            return float("nan"), float("nan")
        rot = sum(h[0] for h in self.history) / len(self.history)
        trans = sum(h[1] for h in self.history) / len(self.history)
        return rot, trans

    def _enter(self, phase: str) -> None:
        self.transitions.append({"step": self.step, "from": self.phase, "to": phase,
                                 "threshold_before": self.threshold})
        self.phase = phase
        self.history.clear()
        self.level_start = self.step
        if phase == "decay":
            self.decay_start = self.step

    def update(self, rot_b0: float, trans_b0: float) -> bool:
        """Record the finished step's B0 losses and advance; returns True on a transition."""
        self.step += 1
        self.history.append((float(rot_b0), float(trans_b0)))
        before = (self.phase, self.level)
        if self.phase == "warmup" and self.step >= self.warmup_steps:
            self._enter(self._after_warmup())
        elif self.phase == "plateau":
            rot, trans = self.gate_means()
            full = len(self.history) >= self.config.window
            passed = (full and rot < self.config.rot_threshold
                      and trans < self.config.trans_threshold)
            forced = (self.config.max_steps_per_level > 0
                      and self.step - self.level_start >= self.config.max_steps_per_level)
            if passed or forced:
                if self.level + 1 < len(self.levels):
                    self.transitions.append({"step": self.step, "from": "plateau",
                                             "to": "plateau", "threshold_before": self.threshold,
                                             "forced": bool(forced and not passed)})
                    self.level += 1
                    self.history.clear()
                    self.level_start = self.step
                else:
                    self._enter("decay")
        elif self.phase == "decay" and self.step - self.decay_start >= self.decay_steps:
            self._enter("done")
        return (self.phase, self.level) != before

    def state_dict(self) -> Dict:
        return {"phase": self.phase, "level": self.level, "step": self.step,
                "level_start": self.level_start, "decay_start": self.decay_start,
                "history": [list(h) for h in self.history], "transitions": list(self.transitions),
                "levels": list(self.levels)}

    def load_state_dict(self, state: Dict) -> None:
        if state.get("levels") != self.levels:
            raise ValueError(f"curriculum levels differ: saved {state.get('levels')}, "
                             f"configured {self.levels}")
        if state["phase"] not in PHASES:
            raise ValueError(f"unknown curriculum phase {state['phase']!r}")
        self.phase = state["phase"]
        self.level = int(state["level"])
        self.step = int(state["step"])
        self.level_start = int(state["level_start"])
        self.decay_start = int(state["decay_start"])
        self.history = deque((tuple(h) for h in state["history"]), maxlen=self.config.window)
        self.transitions = list(state["transitions"])
