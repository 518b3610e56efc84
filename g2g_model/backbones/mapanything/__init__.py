"""Building blocks of the MapAnything V1 feature path (our own implementation).

The backbone itself, :class:`g2g_model.backbones.mapanything_v1.MapAnythingV1Backbone`, and its
checkpoint loader live one level up and in :mod:`.checkpoint`.
"""

from .config import PRESETS, MapAnythingV1Config, preset

__all__ = ["MapAnythingV1Config", "PRESETS", "preset"]
