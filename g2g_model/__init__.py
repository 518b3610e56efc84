"""G2G: group-to-group pose estimation (pure Python / PyTorch, no ROS imports).

The pose estimator is ``from g2g_model import G2GPipeline`` (defined in
:mod:`g2g_model.estimation.pipeline`). Importing the package stays cheap: the names below are
looked up on first use, so a command that needs only the maps or the metrics does not load torch.
"""

import importlib
import sys
import types

__version__ = "0.1.0"

#: Names the package exports, and the module that defines each.
_EXPORTS = {
    "G2GPipeline": "g2g_model.estimation.pipeline",
    "Prediction": "g2g_model.estimation.pipeline",
}
#: Module paths of earlier releases that stay importable, and the module that holds their
#: contents now (``from g2g_model.inference import G2GPipeline`` keeps working).
_MOVED = {"g2g_model.inference": "g2g_model.estimation.pipeline"}


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    moved = f"{__name__}.{name}"
    if moved in _MOVED:
        return sys.modules[moved]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _MovedModule(types.ModuleType):
    """An earlier module path: its attributes are read from the module that holds them now."""

    def __init__(self, name: str, target: str):
        super().__init__(name, f"Moved to :mod:`{target}`.")
        self._target = target

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._target), attr)

    def __dir__(self):
        return dir(importlib.import_module(self._target))


for _old, _new in _MOVED.items():
    sys.modules.setdefault(_old, _MovedModule(_old, _new))
