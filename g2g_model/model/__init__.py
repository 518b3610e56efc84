"""The trainable G2G modules (perceiver resampler, cross-group bridge, multi-frame pose head).

Import from the submodules, e.g. ``from g2g_model.model.g2g import G2GModel``; this package
file re-exports the main names for convenience and has no side effects.
"""

from g2g_model.model.checkpoint import load_any, load_checkpoint, save_checkpoint
from g2g_model.model.config import PRESETS, G2GConfig, preset
from g2g_model.model.g2g import G2GModel, count_parameters
from g2g_model.model.official import load_official

__all__ = [
    "PRESETS",
    "G2GConfig",
    "G2GModel",
    "count_parameters",
    "load_any",
    "load_checkpoint",
    "load_official",
    "preset",
    "save_checkpoint",
]
