"""The G2G model of a node: loading the checkpoint (or the embedded default) and describing what
was loaded for the start-up log."""

from __future__ import annotations

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
    from g2g_model.inference import G2GPipeline

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


def describe_model(pipeline, checkpoint: str, task: str, encoder_only: bool = False) -> str:
    """What a node loaded, for its start-up log: the checkpoint file (the embedded default's
    name when ``checkpoint`` is empty), backbone and preset, and whether the rotation comes from
    feature matches (not for ``encoder_only`` users: the map builder); says so for random
    weights."""
    from g2g_model.inference import default_checkpoint

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
