"""Freeze submodules by name and keep them frozen (STYLE item 4).

:func:`freeze_modules` takes ``fnmatch`` patterns over qualified submodule names (as listed by
``model.named_modules()``, e.g. ``"backbone"``, ``"backbone.blocks.*"``, ``"*.norm"``). A pattern
matching nothing raises ``ValueError`` (a typo must not silently train the backbone). Every
parameter below a matched module gets ``requires_grad = False``, and the module (with its whole
subtree) is put in eval mode and *stays* there when ``model.train()`` is called later, so dropout
and any batch statistics of the frozen part behave as at inference.

The eval lock is an instance-level override of ``train`` on each frozen module; it survives
``copy.deepcopy`` and pickling and does not change ``state_dict`` keys.
:func:`unfreeze_modules` removes it.
"""

from __future__ import annotations

import fnmatch
import logging
from typing import Iterable, List, Union

from torch import nn

logger = logging.getLogger(__name__)

_FLAG = "_g2g_frozen"


class _EvalLock:
    """Stands in for ``module.train`` on a frozen module: always switches to eval.

    A plain object (not a bound method) so that deepcopy and pickling keep the lock.
    """

    def __init__(self, module: nn.Module):
        self.module = module

    def __call__(self, mode: bool = True) -> nn.Module:
        return nn.Module.train(self.module, False)


def _as_patterns(patterns: Union[str, Iterable[str]]) -> List[str]:
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    if not pats:
        raise ValueError("patterns must name at least one submodule, got an empty list")
    for p in pats:
        if not isinstance(p, str) or not p:
            raise ValueError(f"every pattern must be a non-empty string, got {p!r}")
    return pats


def match_module_names(model: nn.Module, patterns: Union[str, Iterable[str]]) -> List[str]:
    """Qualified submodule names matched by the patterns (top-most matches only), in model order.

    Raises:
        ValueError: a pattern matches no submodule (the message lists the top-level names).
    """
    names = [n for n, _ in model.named_modules() if n]
    matched = set()
    for pattern in _as_patterns(patterns):
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            top = sorted({n.split(".")[0] for n in names})
            raise ValueError(
                f"freeze pattern {pattern!r} matches no submodule; top-level modules: {top}"
            )
        matched.update(hits)
    # Drop matches nested inside another match: freezing the parent covers them.
    return [n for n in names if n in matched
            and not any(n.startswith(m + ".") for m in matched)]


def freeze_modules(model: nn.Module, patterns: Union[str, Iterable[str]]) -> List[str]:
    """Freeze the submodules matched by ``patterns``; returns the frozen (top-most) names."""
    frozen = match_module_names(model, patterns)
    n_params = 0
    for name in frozen:
        module = model.get_submodule(name)
        for param in module.parameters():
            param.requires_grad_(False)
            n_params += param.numel()
        for sub in module.modules():
            setattr(sub, _FLAG, True)
            # Instance attribute shadows nn.Module.train for this object only.
            object.__setattr__(sub, "train", _EvalLock(sub))
        nn.Module.train(module, False)
    logger.info("froze %d module(s) (%d parameters): %s", len(frozen), n_params, frozen)
    return frozen


def unfreeze_modules(model: nn.Module, patterns: Union[str, Iterable[str]]) -> List[str]:
    """Undo :func:`freeze_modules` for the matched submodules (train mode follows the parent)."""
    names = match_module_names(model, patterns)
    for name in names:
        module = model.get_submodule(name)
        for param in module.parameters():
            param.requires_grad_(True)
        for sub in module.modules():
            if sub.__dict__.pop("train", None) is not None:
                sub.__dict__.pop(_FLAG, None)
        module.train(model.training)
    return names


def is_frozen(module: nn.Module) -> bool:
    """True if ``module`` was frozen by :func:`freeze_modules`."""
    return bool(module.__dict__.get(_FLAG, False))


def frozen_module_names(model: nn.Module) -> List[str]:
    """Top-most frozen submodule names of ``model``."""
    names = [n for n, m in model.named_modules() if n and is_frozen(m)]
    return [n for n in names if not any(n.startswith(m + ".") for m in names)]
