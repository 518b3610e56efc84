"""The length of a rig step the geometry could not measure, from the last measured speed.

A keyframe step whose rotation and direction the geometry measured but whose length it could
not (straight motion with no overlapping cameras, and no keyframe map to carry the previous
length: ``MotionVerification.length_from_g2g``) takes G2G's length, and G2G predicts a car
standing still (docs/VERIFICATION.md). Within ``hold_s`` of the last step whose length the
geometry did measure, such a step's length is that step's speed times this step's interval
instead, along the geometry's direction: a vehicle's speed changes little within a second (a
standstill the geometry saw forgets the speed: a step that follows it moved). The step stays on
the ``g2g`` path (its length is still not verified) and its position covariance is
``SPEED_SHARE`` of the held length (sd, per axis), since the speed may have changed. A direction
that turned back against the measured velocity (more than 90 deg) keeps G2G's length.

Measured 2026-11-30 (docs/VERIFICATION.md, "A car rig without overlapping cameras").
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

# Standard deviation of a held length, as a share of it: the speed of a car can change by a
# fifth within a second (2 m/s^2 at 10 m/s).
SPEED_SHARE = 0.2


class VelocityHold:
    """``measured(delta, dt_s, stamp_ns)`` after each step whose length the geometry measured
    (``delta`` = base_prev_T_base_now over ``dt_s`` seconds, ending at ``stamp_ns``);
    ``held(delta, dt_s, start_ns)`` for a step whose length it did not: ``(delta with the held
    length, its [3, 3] position covariance, a note for the reason)`` or None (no speed measured
    within ``hold_s`` before the step's start ``start_ns``, the hold off, or the direction
    turned back)."""

    def __init__(self, hold_s: float = 1.0):
        if not hold_s >= 0:
            raise ValueError(f"hold_s must be >= 0, got {hold_s}")
        self.hold_s = float(hold_s)
        self.forget()

    def forget(self) -> None:
        self._velocity: Optional[np.ndarray] = None  # m/s, body frame at the end of the step
        self._stamp_ns: Optional[int] = None

    def measured(self, delta: np.ndarray, dt_s: float, stamp_ns: int) -> None:
        delta = np.asarray(delta, float)
        if not dt_s > 0 or not np.all(np.isfinite(delta)):
            return
        # The translation in the frame the next step starts from (the body at this step's end).
        self._velocity = delta[:3, :3].T @ delta[:3, 3] / dt_s
        self._stamp_ns = int(stamp_ns)

    def held(self, delta: np.ndarray, dt_s: float, start_ns: int
             ) -> Optional[Tuple[np.ndarray, np.ndarray, str]]:
        if self.hold_s <= 0 or self._velocity is None or not dt_s > 0:
            return None
        age = (int(start_ns) - self._stamp_ns) * 1e-9
        if not 0 <= age <= self.hold_s:
            return None
        delta = np.asarray(delta, float)
        t = delta[:3, 3]
        norm = float(np.linalg.norm(t))
        speed = float(np.linalg.norm(self._velocity))
        if norm < 1e-9:  # no direction left to hold the length along
            return None
        if speed > 0 and float(t @ self._velocity) < 0:  # turned back against the velocity
            return None
        length = speed * dt_s
        out = delta.copy()
        out[:3, 3] = t / norm * length
        covariance = np.eye(3) * max((SPEED_SHARE * length) ** 2, 1e-6)
        note = (f"; length {length:.2f} m from the speed measured {age:.2f} s before "
                f"({speed:.2f} m/s; G2G's {norm:.2f} m)")
        return out, covariance, note
