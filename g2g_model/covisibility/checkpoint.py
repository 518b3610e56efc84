"""Covisibility checkpoints: one safetensors file with JSON metadata.

Tensors: ``model.<name>`` (decoder weights) and, in training checkpoints only,
``optim.<param index>.<name>`` (AdamW moments). Metadata ``g2g_covisibility`` (JSON): format
version, decoder config, preset name, encoder ``{"name", "config_hash"}`` whose tokens the
decoder was trained on, training step, metrics, the optimizer's hyper-parameters and an
``extra`` record (the training config).

Loading builds the decoder from the stored config (or checks a given one field by field), then
loads strictly and names missing/unexpected/mis-shaped keys; a checkpoint trained on another
encoder is refused when the caller says which encoder it uses.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Dict, Optional, Tuple

import torch

from g2g_model.backbones.identity import encoder_mismatch
from g2g_model.tagged_safetensors import read_tagged, write_tagged

from g2g_model.covisibility.model import CovisibilityConfig, CovisibilityDecoder

LOG = logging.getLogger(__name__)

CKPT_FORMAT = "g2g_covisibility"
CKPT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt or does not match the model / encoder in use."""


def load_float_state(model: torch.nn.Module, tensors: Dict[str, torch.Tensor], what: str,
                     path) -> torch.nn.Module:
    """Load the floating-point ``tensors`` (stored float16) into ``model`` strictly: a missing,
    unexpected, misshapen or non-finite tensor raises ``CheckpointError`` naming them all.
    Returns the model in eval mode."""
    expected = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
    wrong = sorted(k for k in set(expected) | set(tensors)
                   if k not in expected or k not in tensors
                   or tensors[k].shape != expected[k].shape
                   or not torch.isfinite(tensors[k]).all())
    if wrong:
        raise CheckpointError(f"{what} {path} does not fit its header: missing, unexpected, "
                              f"misshapen or non-finite tensors {wrong}")
    model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    return model.eval()


def save_checkpoint(
    path,
    model: CovisibilityDecoder,
    step: int = 0,
    encoder: Optional[Dict] = None,
    preset: str = "",
    metrics: Optional[Dict] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
    extra: Optional[Dict] = None,
) -> pathlib.Path:
    """Write a checkpoint atomically; include the optimizer state to allow resuming.

    ``extra`` is any JSON-serialisable record kept with it (e.g. the training config).
    """

    path = pathlib.Path(path)
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in
               model.state_dict().items()}
    optim_meta = None
    if optimizer is not None:
        state = optimizer.state_dict()
        optim_meta = {"param_groups": state["param_groups"], "scalars": {}}
        for idx, entry in state["state"].items():
            for name, value in entry.items():
                if torch.is_tensor(value):
                    tensors[f"optim.{idx}.{name}"] = value.detach().cpu().contiguous()
                else:
                    optim_meta["scalars"][f"{idx}.{name}"] = value
    meta = {
        "format": CKPT_FORMAT, "version": CKPT_VERSION, "config": model.config.to_dict(),
        "preset": preset, "encoder": encoder or {}, "step": int(step),
        "metrics": metrics or {}, "optimizer": optim_meta, "extra": extra or {},
    }
    return write_tagged(path, CKPT_FORMAT, meta, tensors)


def _read(path) -> Tuple[Dict, Dict[str, torch.Tensor]]:
    return read_tagged(path, CKPT_FORMAT, CKPT_VERSION, "covisibility checkpoint",
                       CheckpointError)


def read_checkpoint_meta(path) -> Dict:
    """The metadata of a checkpoint (config, preset, encoder, step, metrics)."""
    return _read(path)[0]


class EncoderMismatch(CheckpointError):
    """A covisibility model was trained on another encoder's tokens than the ones it gets."""


def check_encoder(stored: Optional[Dict], expected: Optional[Dict], what: str) -> None:
    """Raise ``CheckpointError`` when ``what`` (a decoder or embedding file) was trained on
    tokens of another encoder than ``expected`` ``{"name", "config_hash"}`` (None: no check)."""
    if not expected:
        return
    theirs = stored or {}
    key = encoder_mismatch(theirs, expected)
    if key:
        raise EncoderMismatch(
            f"{what} was trained on tokens of encoder {theirs.get('name')!r} (config "
            f"{theirs.get('config_hash')}), but the tokens come from "
            f"{expected.get('name')!r} (config {expected.get('config_hash')}): {key} differs")


def load_checkpoint(
    path,
    model: Optional[CovisibilityDecoder] = None,
    expect_encoder: Optional[Dict] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
) -> Tuple[CovisibilityDecoder, Dict]:
    """Build (or check) the decoder and load weights strictly.

    Args:
        path: checkpoint file.
        model: load into this decoder; its config must equal the stored one. When None, a
            decoder is built from the stored config.
        expect_encoder: ``{"name", "config_hash"}`` of the encoder producing the tokens.
        optimizer: also restore its state (the checkpoint must hold one).
    Returns:
        (model, metadata).
    """
    meta, tensors = _read(path)
    stored = CovisibilityConfig.from_dict(meta["config"])
    if model is None:
        model = CovisibilityDecoder(stored)
    elif model.config != stored:
        diff = {k: (v, getattr(model.config, k)) for k, v in stored.to_dict().items()
                if stored.to_dict()[k] != model.config.to_dict()[k]}
        raise CheckpointError(
            f"checkpoint {path} was trained with a different decoder config; "
            f"field: (checkpoint, model) = {diff}"
        )
    check_encoder(meta.get("encoder"), expect_encoder, f"checkpoint {path}")
    weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    shapes = sorted(k for k in set(own) & set(weights) if own[k].shape != weights[k].shape)
    if missing or unexpected or shapes:
        raise CheckpointError(
            f"checkpoint {path} does not fit the decoder: missing keys {missing}, unexpected "
            f"keys {unexpected}, shape mismatches {shapes}"
        )
    model.load_state_dict(weights, strict=True)
    if optimizer is not None:
        _load_optimizer(optimizer, meta, tensors, str(path))
    LOG.info("loaded covisibility checkpoint %s (step %s)", path, meta.get("step"))
    return model, meta


def _load_optimizer(optimizer, meta: Dict, tensors: Dict, what: str) -> None:
    optim_meta = meta.get("optimizer")
    if not optim_meta:
        raise CheckpointError(f"checkpoint {what} holds no optimizer state to resume from")
    state: Dict[int, Dict] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = value
    for key, value in optim_meta["scalars"].items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    try:
        optimizer.load_state_dict({"state": state, "param_groups": optim_meta["param_groups"]})
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"optimizer state in {what} does not fit: {exc}") from None
