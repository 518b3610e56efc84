"""The G2G model of a node: loading the checkpoint (or the embedded default), the group size it
takes (read from the checkpoint's header, for parameter checks before loading) and describing
what was loaded for the start-up log."""

from __future__ import annotations

import functools
import os
import pathlib
from typing import Optional, Tuple

PRECISIONS = ("auto", "fp32", "bf16")


BACKBONE_WEIGHTS_DESCRIPTION = (
    "local weights of the checkpoint's external backbone (a MapAnything V1 folder with "
    "config.json + model.safetensors, e.g. the G2G release's map-anything-model/, or one file); "
    "needed by a converted official checkpoint, empty for checkpoints that include their "
    "backbone (the embedded defaults)")


def load_pipeline(checkpoint: str, device: str, task: str, precision: str = "auto",
                  backbone_weights: str = "", rotation_matching: bool = True):
    """The G2G pipeline for a node: the given checkpoint, else the embedded default.

    ``precision``: ``auto`` (bf16 where it is fast, see ``G2GPipeline``), ``fp32`` (what
    ``g2g-eval`` runs: bag evaluations use it so that both give the same numbers) or ``bf16``.
    ``backbone_weights``: see :data:`BACKBONE_WEIGHTS_DESCRIPTION` (the node parameter).
    ``rotation_matching``: True lets a relocalization checkpoint take its rotation from feature
    matches (``G2GPipeline``'s "auto"); False keeps G2G's own rotation.
    Raises ``ValueError`` / ``FileNotFoundError`` with the reason for a bad checkpoint,
    backbone weights that are missing, wrong or do not belong to the checkpoint, or a bad
    precision.
    """
    from g2g_model.estimation.pipeline import G2GPipeline

    matching = "auto" if rotation_matching else False
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if checkpoint:
        pipeline = G2GPipeline.from_checkpoint(checkpoint, device=device,
                                               backbone_weights=backbone_weights or None,
                                               rotation_matching=matching)
    elif backbone_weights:
        raise ValueError(f"backbone_weights={backbone_weights!r} needs a checkpoint for that "
                         "backbone (parameter checkpoint, e.g. a converted official release); "
                         "the embedded default includes its own backbone")
    else:
        pipeline = G2GPipeline.default(task, device=device, rotation_matching=matching)
    if precision != "auto":
        pipeline.bf16 = precision == "bf16"
    return pipeline


def model_max_frames(checkpoint: str, task: str) -> Tuple[Optional[int], str]:
    """``(W, model)``: the most frames per group that the model a node loads for ``checkpoint``
    (empty: the embedded default of ``task``) takes, read from the checkpoint's header only
    (cheap enough for a parameter check), and the model named for messages. W is None when it
    is not known before loading (official weights without our header, a missing or unreadable
    file: configure then says why)."""
    from g2g_model.estimation.pipeline import UNTRAINED_MAX_FRAMES
    from g2g_model.assets import default_checkpoint

    path = checkpoint or default_checkpoint(task)
    if path is None:
        return UNTRAINED_MAX_FRAMES, f"the untrained stand-in for {task}"
    name = (f"checkpoint {checkpoint}" if checkpoint
            else f"the embedded default {pathlib.Path(path).name}")
    try:
        stat = os.stat(path)
        return _header_max_frames(os.fspath(path), stat.st_mtime_ns, stat.st_size), name
    except (OSError, ValueError):
        return None, name


@functools.lru_cache(maxsize=16)
def _header_max_frames(path: str, mtime_ns: int, size: int) -> Optional[int]:
    """``config.max_frames`` of our checkpoint's header (cached per file version)."""
    from g2g_model.model.checkpoint import read_header

    frames = read_header(path)["config"].get("max_frames")
    return frames if isinstance(frames, int) and not isinstance(frames, bool) else None


def window_size_problem(window_size: int, max_frames: Optional[int], model: str
                        ) -> Optional[str]:
    """Why ``window_size`` cannot be used with a model taking ``max_frames`` per group, or
    None (also when W is unknown)."""
    if max_frames is None or window_size <= max_frames:
        return None
    return (f"window_size {window_size} exceeds what {model} takes: groups of at most "
            f"{max_frames} frames (its max_frames W)")


def describe_model(pipeline, checkpoint: str, task: str, encoder_only: bool = False) -> str:
    """What a node loaded, for its start-up log: the checkpoint file (the embedded default's
    name when ``checkpoint`` is empty), backbone and preset, and whether the rotation comes from
    feature matches (not for ``encoder_only`` users: the map builder); says so for random
    weights."""
    from g2g_model.assets import default_checkpoint

    if pipeline.untrained:
        return f"untrained stand-in for {task} (RANDOM weights)"
    header = pipeline.header
    source = checkpoint or f"embedded default {default_checkpoint(task).name}"
    backbone = (header.get("backbone") or {}).get("name", "?")
    preset = header.get("preset") or "custom config"
    matching = ("; rotation from feature matches where they agree"
                if getattr(pipeline, "rotation_matcher", None) is not None and not encoder_only
                else "")
    return f"{source} (backbone {backbone}, {preset}){matching}"
