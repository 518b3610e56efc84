"""Load weights released with the official G2G code (github.com/WeiYuFei0217/G2G) strictly.

Accepted inputs (fixtures/g2g_official/README.txt, "RELEASED .pth LAYOUT"):

* a G2G-only ``.pth`` as written by the official ``extract_g2g_weights.py``: a plain flat dict
  ``{name: tensor}`` (``Stage2ModelMultiFrame.state_dict()`` without ``backbone.*``);
* a full training checkpoint: a dict whose ``"model_state_dict"`` (or else ``"model"``) entry is
  that state dict, backbone included; ``backbone.*`` entries are dropped here, as the official
  extraction does (the frozen backbone is loaded separately);
* the same flat dict stored as ``.safetensors`` (the golden fixtures).

Key mapping. Our parameter names equal the official ones, so the mapping is the identity with
two exceptions: (1) the persistent buffers ``_img_mean`` / ``_img_std`` (ImageNet normalisation
constants of the official image path, always present in released files) are ignored *by name*;
our G2G modules take backbone features, and image normalisation belongs to the backbone;
(2) a ``module.`` (DDP) or ``_orig_mod.`` (torch.compile) prefix carried by every key is
removed; released files have neither.

Loading is all-or-nothing: every key and shape is checked first, and one ``ValueError`` lists all
missing keys, unexpected keys and shape mismatches; the model is only written to when all match.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Dict, List, Mapping, Optional

import torch
from torch import nn

from g2g_model.model.config import G2GConfig, preset
from g2g_model.model.g2g import G2GModel

LOG = logging.getLogger(__name__)

IGNORED_KEYS = ("_img_mean", "_img_std")
BACKBONE_PREFIX = "backbone."
CHECKPOINT_WRAPPER_KEYS = ("model_state_dict", "model")
WRAPPER_PREFIXES = ("module.", "_orig_mod.")
# Official "phase 1" bridge layers; 0 of them in every released configuration.
ALTERNATING_PREFIXES = tuple(f"bridge.{side}_layers_{group}."
                             for side in ("inter", "intra") for group in ("a", "b"))


def is_safetensors(path: str | os.PathLike) -> bool:
    """True when the file starts like a safetensors file (u64 header length, then ``{``)."""
    with open(path, "rb") as handle:
        start = handle.read(9)
    return len(start) == 9 and start[8:9] == b"{"


def read_official_file(path: str | os.PathLike) -> Any:
    """Read an official ``.pth`` (``torch.load(weights_only=True)``) or flat ``.safetensors``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"official weights file {path!r} does not exist")
    try:
        if is_safetensors(path):  # read into memory, never memory-mapped (SIGBUS)
            from g2g_model.tagged_safetensors import read_safetensors

            return read_safetensors(path)[1]
        # weights_only: a .pth from the internet must not be able to run code on load.
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # the readers raise many types; report them uniformly
        raise ValueError(
            f"cannot read official weights {path!r}: {type(exc).__name__}: {exc}"
        ) from exc


def extract_state_dict(obj: Any) -> Dict[str, torch.Tensor]:
    """The flat G2G state dict (official names, ``backbone.*`` dropped) inside ``obj``."""
    if not isinstance(obj, Mapping):
        raise ValueError(
            f"official weights must be a dict of tensors or a checkpoint dict, got "
            f"{type(obj).__name__}"
        )
    for key in CHECKPOINT_WRAPPER_KEYS:
        if key in obj and isinstance(obj[key], Mapping):
            obj = obj[key]
            break
    non_tensors = sorted(str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor))
    if non_tensors:
        raise ValueError(
            "not a state dict: entries that are not tensors (and no 'model_state_dict' / "
            f"'model' entry): {non_tensors}"
        )
    state = {str(k): v for k, v in obj.items()}
    for prefix in WRAPPER_PREFIXES:
        if state and all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
    return {k: v for k, v in state.items() if not k.startswith(BACKBONE_PREFIX)}


def to_model_keys(state: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Map official names onto ours: drop :data:`IGNORED_KEYS`, keep everything else as is."""
    ignored = [k for k in IGNORED_KEYS if k in state]
    if ignored:
        LOG.debug("ignoring official buffers %s (image normalisation belongs to the backbone)",
                  ignored)
    return {k: v for k, v in state.items() if k not in IGNORED_KEYS}


def state_dict_problems(model: nn.Module, state: Mapping[str, torch.Tensor]) -> List[str]:
    """Every reason ``state`` cannot be loaded strictly into ``model`` (empty list = fine)."""
    expected = model.state_dict()
    problems = []
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing:
        problems.append(f"missing keys ({len(missing)}): {missing}")
    if unexpected:
        problems.append(f"unexpected keys ({len(unexpected)}): {unexpected}")
    mismatched = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items() if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    if mismatched:
        problems.append(f"shape mismatches ({len(mismatched)}): {mismatched}")
    # Integer buffers (BatchNorm's num_batches_tracked) load as they are; a file with integers
    # where the model keeps floating-point weights is refused.
    not_float = [k for k in state if k in expected and expected[k].is_floating_point()
                 and not state[k].is_floating_point()]
    if not_float:
        problems.append(f"non-floating-point tensors: {not_float}")
    return problems


def load_state_dict_strictly(model: nn.Module, state: Mapping[str, torch.Tensor],
                             source: str = "state dict") -> None:
    """Validate everything, then load; on any problem raise and leave ``model`` untouched."""
    problems = state_dict_problems(model, state)
    if problems:
        raise ValueError(f"cannot load {source} into {type(model).__name__}: "
                         + "; ".join(problems))
    model.load_state_dict(dict(state), strict=True)


def load_official_state_dict(model: G2GModel, obj: Any, source: str = "official weights") -> None:
    """Load an official state dict / checkpoint dict (see the module docstring) into ``model``."""
    state = to_model_keys(extract_state_dict(obj))
    load_state_dict_strictly(model, state, source)


_LAYER_INDEX = re.compile(r"^(?P<prefix>.+?)\.(?P<index>\d+)\.")


def _count_layers(state: Mapping[str, torch.Tensor], prefix: str) -> int:
    indices = set()
    for key in state:
        match = _LAYER_INDEX.match(key)
        if match and match.group("prefix") == prefix:
            indices.add(int(match.group("index")))
    return len(indices)


def infer_config(state: Mapping[str, torch.Tensor], num_heads: Optional[int] = None,
                 base: Optional[G2GConfig] = None) -> G2GConfig:
    """Recover a :class:`G2GConfig` from official tensor shapes.

    The head count cannot be read from the packed attention weights: it comes from
    ``num_heads`` or else from ``base`` (default: the ``paper`` preset, 8 heads). Fields that
    leave no trace in the weights (dropout, eps, loss form) also come from ``base``.
    """
    base = base or preset("paper")
    state = to_model_keys(extract_state_dict(state))
    required = ("resampler.latents", "bridge.frame_embed", "pose_head.rotation_head.weight",
                "resampler.layers.0.ffn.0.weight")
    absent = [k for k in required if k not in state]
    if absent:
        raise ValueError(f"cannot infer the G2G configuration: missing keys {absent}")
    alternating = sorted(k for k in state if k.startswith(ALTERNATING_PREFIXES))
    if alternating:
        raise ValueError(
            "the file uses alternating inter/intra-group bridge layers "
            "(official bridge_alternating_pairs > 0), which no release uses and this "
            f"implementation does not build: {alternating[:4]} ..."
        )
    latents = state["resampler.latents"]
    hidden = int(latents.shape[1])
    rot_mlp_linears = sum(
        1 for k, v in state.items()
        if k.startswith("pose_head.rot_mlp.") and k.endswith(".weight") and v.dim() == 2
    )
    return base.replace(
        hidden_dim=hidden,
        num_heads=num_heads if num_heads is not None else base.num_heads,
        mlp_ratio=state["resampler.layers.0.ffn.0.weight"].shape[0] / hidden,
        num_latents=int(latents.shape[0]),
        resampler_layers=_count_layers(state, "resampler.layers"),
        bridge_layers=_count_layers(state, "bridge.merged_layers"),
        pose_head_hidden_dim=int(state["pose_head.rotation_head.weight"].shape[1]),
        pose_head_layers=rot_mlp_linears + 1,
        max_frames=int(state["bridge.frame_embed"].shape[0]),
        input_dim=int(state["embed_proj.weight"].shape[1]) if "embed_proj.weight" in state
        else hidden,
        use_anchor_embed="bridge.anchor_embed" in state,
        reinject_anchor_after_merge="bridge.anchor_embed_merge" in state,
    )


def load_official(path: str | os.PathLike, config: Optional[G2GConfig] = None,
                  max_frames: Optional[int] = None,
                  num_heads: Optional[int] = None) -> G2GModel:
    """Build a :class:`G2GModel` and load an official weights file into it.

    Args:
        path: ``.pth`` (flat or full training checkpoint) or flat ``.safetensors``.
        config: the configuration to build; by default inferred from the tensor shapes
            (:func:`infer_config`).
        max_frames: W the caller expects; a file made for another W raises ``ValueError``.
        num_heads: attention heads when ``config`` is not given (default 8, as released).
    """
    obj = read_official_file(path)
    state = extract_state_dict(obj)
    if config is None:
        config = infer_config(state, num_heads=num_heads)
    frame_embed = state.get("bridge.frame_embed")
    if max_frames is not None and frame_embed is not None and frame_embed.shape[0] != max_frames:
        raise ValueError(
            f"{os.fspath(path)!r} holds weights for max_frames={frame_embed.shape[0]} "
            f"(rows of bridge.frame_embed), but max_frames={max_frames} was requested"
        )
    if max_frames is not None and config.max_frames != max_frames:
        raise ValueError(
            f"config.max_frames={config.max_frames} but max_frames={max_frames} was requested"
        )
    model = G2GModel(config)
    load_official_state_dict(model, state, source=repr(os.fspath(path)))
    LOG.info("loaded official G2G weights from %s (max_frames=%d)", os.fspath(path),
             config.max_frames)
    return model
