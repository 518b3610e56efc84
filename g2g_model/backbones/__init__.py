"""Frozen multi-view backbones behind one interface (see :mod:`g2g_model.backbones.base`)."""

from g2g_model.backbones.base import (
    Backbone,
    backbone_class,
    build_backbone,
    register_backbone,
    registered_backbones,
)

__all__ = [
    "Backbone", "backbone_class", "build_backbone", "register_backbone", "registered_backbones",
]
