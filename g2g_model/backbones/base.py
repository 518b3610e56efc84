"""The backbone interface shared by every frozen multi-view encoder, and the name registry.

A backbone encodes ONE group of frames in the group's own frame (frame 0 at the identity) from
RGB, per-pixel ray directions (computed from the intrinsics) and camera poses, and returns
geometry-enhanced patch features. Camera extrinsics enter G2G only here.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Type

import torch
from torch import nn

_REGISTRY: Dict[str, Type["Backbone"]] = {}


class Backbone(nn.Module):
    """Base class. Subclasses set ``name`` and implement :meth:`forward`.

    Attributes:
        feature_dim: D, the channel width of the returned features.
        patch_size: pixels per patch side; P = (H / patch_size) * (W / patch_size).
        image_size: (H, W) the backbone expects; :mod:`g2g_model.estimation.pipeline` resizes to
            it.
    """

    name: str = ""
    feature_dim: int
    patch_size: int
    image_size: tuple

    def forward(
        self,
        images: torch.Tensor,
        intrinsics: torch.Tensor,
        cam_to_anchor: torch.Tensor,
    ) -> torch.Tensor:
        """Encode groups of frames.

        Args:
            images: ``[B, N, 3, H, W]`` float RGB in [0, 1] (un-normalised; each backbone applies
                its own normalisation).
            intrinsics: ``[B, N, 3, 3]`` pinhole K in pixels of the given H x W.
            cam_to_anchor: ``[B, N, 4, 4]`` T_{X0<-Xi}, frame 0 is the identity, metres,
                OpenCV axes.

        Returns:
            ``[B, N, P, D]`` patch features.
        """
        raise NotImplementedError

    def num_patches(self, height: int, width: int) -> int:
        return (height // self.patch_size) * (width // self.patch_size)

    @classmethod
    def from_config_dict(cls, config: Optional[dict]) -> "Backbone":
        """Build from a JSON-able config (None = the default preset). Subclasses override."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from a config dict")

    def config_dict(self) -> dict:
        """The JSON-able config that :meth:`from_config_dict` rebuilds this backbone from."""
        return self.config.to_dict()

    def load_weights(self, path: str) -> None:
        """Load weights from a local file, strictly. Subclasses with external weights override."""
        raise NotImplementedError(f"{type(self).__name__} has no external weight loader")

    @classmethod
    def from_weights(cls, path: str, config: Optional[dict] = None) -> "Backbone":
        """Build and load from a local weights file or folder (``config``: as for
        :meth:`from_config_dict`; backbones whose weights carry their sizes override this to
        read them there when ``config`` is None)."""
        backbone = cls.from_config_dict(config)
        backbone.load_weights(path)
        return backbone


def register_backbone(name: str) -> Callable[[Type[Backbone]], Type[Backbone]]:
    """Class decorator: make a backbone constructible by name (no ``eval`` of strings)."""

    def wrap(cls: Type[Backbone]) -> Type[Backbone]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"backbone name {name!r} is already registered to {_REGISTRY[name]}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def backbone_class(name: str) -> Type[Backbone]:
    """Look up a registered backbone class; unknown names raise ``ValueError`` listing choices."""
    _import_builtin_backbones()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown backbone {name!r}; registered backbones: {sorted(_REGISTRY)}"
        ) from None


def build_backbone(name: str, config: Optional[dict] = None) -> "Backbone":
    """Construct a registered backbone by name from its config dict (None = default preset)."""
    return backbone_class(name).from_config_dict(config)


def registered_backbones() -> list:
    _import_builtin_backbones()
    return sorted(_REGISTRY)


def _import_builtin_backbones() -> None:
    # Importing the modules runs their @register_backbone decorators. Kept lazy so that importing
    # this base module stays cheap and free of side effects.
    import importlib

    # upstream_mapanything imports Meta's package only when an adapter is built.
    for module in ("g2g_model.backbones.mapanything_v1", "g2g_model.backbones.compact",
                   "g2g_model.backbones.upstream_mapanything"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
