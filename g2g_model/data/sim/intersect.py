"""Ray-primitive intersections of the simulator's ray tracer: axis-aligned boxes (slabs) and
spheres, vectorised over rays (float32)."""

from __future__ import annotations

import numpy as np

EPS = 1e-5  # smallest ray parameter that counts as a hit (no self-intersection)


def ray_box_entry(o: np.ndarray, inv: list, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Entry parameters ``[B,n]`` of rays (origin ``o [3]``, inverse directions ``inv`` = three
    ``[n]`` arrays) into boxes ``lo/hi [B,3]``; inf where missed or starting inside.

    Rays are the inner (contiguous) dimension so every numpy loop runs over ``n``.
    """
    t_in = None
    t_out = None
    for a in range(3):
        t1 = (lo[:, a, None] - o[a]) * inv[a][None, :]
        t2 = (hi[:, a, None] - o[a]) * inv[a][None, :]
        near = np.minimum(t1, t2)
        far = np.maximum(t1, t2, out=t2)
        t_in = near if t_in is None else np.maximum(t_in, near, out=t_in)
        t_out = far if t_out is None else np.minimum(t_out, far, out=t_out)
    hit = (t_out >= t_in) & (t_in > EPS)
    return np.where(hit, t_in, np.float32(np.inf))


def ray_sphere_hit(o: np.ndarray, d: list, c: np.ndarray, r: float) -> np.ndarray:
    """First positive ray parameter ``[n]`` of the hit with a sphere (inf if missed)."""
    oc = o - c
    a = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    b = d[0] * oc[0] + d[1] * oc[1] + d[2] * oc[2]
    cc = np.float32(oc @ oc - r * r)
    disc = b * b - a * cc
    t = (-b - np.sqrt(np.maximum(disc, 0.0))) / a
    return np.where((disc >= 0) & (t > EPS), t, np.float32(np.inf))
