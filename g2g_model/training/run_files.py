"""The files of a training run directory (``out_dir``) and the resumable state's checks.

``state.pt``: trainable weights, optimizer, curriculum, samplers, step and RNG states;
``model.safetensors`` (G2G tasks) or ``backbone.safetensors`` (stage-1 pretraining): the
exported model; ``train_log.csv`` and ``training.png``: the log.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import torch

from g2g_model.model.checkpoint import save_checkpoint
from g2g_model.training.config import config_from_dict
from g2g_model.training.models import backbone_config_dict

STATE_FILE = "state.pt"
MODEL_FILE = "model.safetensors"
BACKBONE_FILE = "backbone.safetensors"
LOG_FILE = "train_log.csv"
PLOT_FILE = "training.png"

# What must not change between a run and its resumption.
INPUT_FILES = ("backbone_weights", "init_from")    # model.<key>: weights a run starts from
RESUME_SECTIONS = ("task", "model", "data", "seed", "loss", "noise", "cache")
RESUME_OPTIM_KEYS = ("batch_size", "lr", "warmup_steps", "decay_steps")


def check_resume_config(saved: Dict, current: Dict, state_path: Path) -> None:
    """Raise ``ValueError`` when ``state_path`` (config ``saved``) was written by a configuration
    that differs from ``current`` in what a resumed run depends on. Fields added to the
    configuration after ``saved`` was written take their defaults (which keep the earlier
    behaviour), so a long run resumes across such an update."""
    try:
        saved = config_from_dict(saved, where=str(state_path)).to_dict()
    except (TypeError, ValueError):
        pass  # fields since removed or renamed: compared as they are, and reported
    problems = []
    for section in RESUME_SECTIONS:
        if saved.get(section) != current.get(section):
            problems.append(f"{section}: saved {saved.get(section)!r}, now "
                            f"{current.get(section)!r}")
    for key in RESUME_OPTIM_KEYS:
        if saved["optim"].get(key) != current["optim"].get(key):
            problems.append(f"optim.{key}: saved {saved['optim'].get(key)!r}, now "
                            f"{current['optim'].get(key)!r}")
    if problems:
        raise ValueError(f"{state_path} was written by another configuration: "
                         + "; ".join(problems) + " (use another out_dir or --no-resume)")


def input_digests(model_config) -> Dict[str, str]:
    """sha256 of the weight files a run starts from (``model.backbone_weights``,
    ``model.init_from``, where set): kept in the state, the summary and the exported header."""
    from g2g_model.model.checkpoint import sha256_of

    return {key: sha256_of(getattr(model_config, key)) for key in INPUT_FILES
            if getattr(model_config, key, "")}


def check_resume_inputs(saved: Optional[Dict], current: Dict, state_path: Path) -> None:
    """Raise ``ValueError`` when a weight file the run started from has other bytes now (a
    stage-1 backbone re-exported by a longer run, say): resuming would continue training on
    weights that the saved state was not trained with. A state written before the digests were
    recorded (``saved`` None) is not checked."""
    if saved is None:
        return
    changed = [f"model.{key}: sha256 {str(saved.get(key))[:12]} when saved, "
               f"{str(current.get(key))[:12]} now" for key in INPUT_FILES
               if saved.get(key) != current.get(key)]
    if changed:
        raise ValueError(f"{state_path} was trained from other weight files: "
                         + "; ".join(changed) + " (restore the file it was trained from, or "
                         "use another out_dir or --no-resume to train on the new one)")


def rng_state() -> Dict:
    """The torch, numpy and Python global RNG states (saved with a run's state)."""
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
            "python": random.getstate()}


def restore_rng_state(state: Dict) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def export_model(out: Path, config, backbone: torch.nn.Module, g2g: Optional[torch.nn.Module],
                 training: Dict) -> Path:
    """Write the run's model: the compact backbone (task ``pretrain``) or the G2G checkpoint
    (with the backbone's weights when it is the compact one trained here)."""
    if config.task == "pretrain":
        from g2g_model.backbones.compact_checkpoint import save_compact_checkpoint

        path = out / BACKBONE_FILE
        save_compact_checkpoint(backbone, path, {"training": json.dumps(training)})
        return path
    path = out / MODEL_FILE
    include = config.model.backbone == "compact"
    save_checkpoint(path, g2g, preset_name=None, backbone_name=config.model.backbone,
                    backbone_config=backbone_config_dict(config.model) or {},
                    training=training,
                    backbone_state_dict=backbone.state_dict() if include else None)
    return path
