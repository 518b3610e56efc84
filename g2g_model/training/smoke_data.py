"""A tiny simulator collection (64 x 64 images) for smoke runs and tests of the training code.

``make_smoke_collection(root)`` renders one small scene with two traversals of the ``ring4`` rig
(or another ``rig_preset``), labels overlap (same camera), mines W = 3 window pairs and lists rig
pairs; it takes a few seconds and is skipped when ``root`` already holds it.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

SMOKE_WINDOW = 3


def make_smoke_collection(root: str | Path, frames: int = 16, image_size: int = 64,
                          split: str = "train", num_scenes: int = 1,
                          rig_preset: str = "ring4") -> Path:
    """Build (or reuse) the collection; returns ``root``."""
    from g2g_model.data import cli as data_cli
    from g2g_model.data.sim import cli as sim_cli

    root = Path(root)
    if (root / "rig_pairs.csv").is_file() and (root / f"pairs_w{SMOKE_WINDOW}.json").is_file():
        return root
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sim_cli.main(["--out", str(root), "--split", split, "--num-scenes", str(num_scenes),
                      "--traversals", "2", "--frames", str(frames), "--scene-preset", "small",
                      "--rig-preset", rig_preset, "--image-size", str(image_size)])
        data_cli.main(["overlap", str(root), "--cam-pairs", "same"])
        data_cli.main(["mine", str(root), "--window", str(SMOKE_WINDOW), "--top-k", "10",
                       "--min-score", "0.0"])
        data_cli.main(["rig-pairs", str(root), "--max-distance", "1.0"])
    return root


def smoke_config(root: str | Path, out_dir: str | Path, task: str = "reloc", **sections):
    """A tiny :class:`TrainConfig` over a smoke collection (compact_xs + G2G ``tiny``).

    ``sections`` update the nested sections, e.g. ``optim={"decay_steps": 4}``.
    """
    from g2g_model.training.config import config_from_dict

    index = {"reloc": f"pairs_w{SMOKE_WINDOW}.json", "rig": "rig_pairs.csv", "pretrain": ""}
    weights = Path(out_dir).parent / "smoke_backbone.safetensors"
    if task != "pretrain" and not weights.is_file():
        _save_random_backbone(weights)
    values = {
        "task": task, "out_dir": str(out_dir), "seed": 0, "log_every": 1,
        "checkpoint_every": 4,
        "data": {"root": str(root), "index": index[task], "group_size": 3, "frame_stride": 1},
        "model": {"backbone": "compact", "backbone_preset": "compact_xs", "g2g_preset": "tiny",
                  "g2g_overrides": {"max_frames": 4},
                  "backbone_weights": "" if task == "pretrain" else str(weights),
                  "freeze": [] if task == "pretrain" else ["backbone"]},
        "optim": {"lr": 1e-3, "batch_size": 2, "warmup_steps": 2, "decay_steps": 4},
        "curriculum": {"enabled": task == "reloc", "start": 0.3, "stop": 0.2, "step": 0.1,
                       "window": 2, "max_steps_per_level": 2},
        "cache": {"enabled": False, "noise_variants": 2},
    }
    for name, update in sections.items():
        if isinstance(values.get(name), dict):
            values[name].update(update)
        else:
            values[name] = update
    return config_from_dict(values)


def _save_random_backbone(path: Path) -> None:
    """A seeded, untrained compact_xs backbone file (stands in for a stage-1 checkpoint)."""
    import torch

    from g2g_model.backbones.compact import CompactBackbone
    from g2g_model.backbones.compact_checkpoint import save_compact_checkpoint

    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        backbone = CompactBackbone("compact_xs")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # ranks may race: write atomically
    save_compact_checkpoint(backbone, tmp)
    os.replace(tmp, path)
