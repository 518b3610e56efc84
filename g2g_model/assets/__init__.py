"""The files shipped in this folder and the registry that names them.

The embedded default checkpoints, one per task, are looked up here by the pose estimator, the
window selector, the ROS nodes and the benchmarks alike. The backbones' own weights
(:mod:`g2g_model.backbones.mobilenet_v2`, :mod:`g2g_model.backbones.aliked`) live here too;
``NOTICE.md`` records where every file comes from.
"""

from __future__ import annotations

import pathlib
from typing import Optional

ASSETS = pathlib.Path(__file__).resolve().parent

DEFAULT_CHECKPOINTS = {
    "relocalization": ASSETS / "g2g_reloc_mnv2.safetensors",
    "rig_odometry": ASSETS / "g2g_rig_mnv2.safetensors",
    "covisibility": ASSETS / "covis_mnv2.safetensors",
    "covisibility_embedding": ASSETS / "covis_embedding_mnv2.safetensors",
    "covisibility_image_embedding": ASSETS / "covis_image_embedding.safetensors",
    "covisibility_pair_verifier": ASSETS / "covis_pair_verifier.safetensors",
}


def default_checkpoint(task: str = "relocalization") -> Optional[pathlib.Path]:
    """The embedded default checkpoint for a task, or None if it is not shipped (yet)."""
    if task not in DEFAULT_CHECKPOINTS:
        raise ValueError(f"unknown task {task!r}; known: {sorted(DEFAULT_CHECKPOINTS)}")
    path = DEFAULT_CHECKPOINTS[task]
    return path if path.is_file() else None
