"""Continual-learning approaches: one file (or folder) per method over `base.Approach`, found through one table.

`BUILTINS` maps each built-in method's name to the "module:Class" that defines it: the same form as a plugin's
`--method package.module:Class`, and the one line a new built-in adds here. Nothing is imported at import time,
so this package and a method folder's `__init__` are torch-free: `clbench report` imports a method's monitoring
reporter (e.g. `clbench.approaches.hat.report`) without torch.

The registry (`clbench.approaches.registry`: `REGISTRY`, `ORIGINS`, `register`, `lookup`, `approach_names`, ...)
imports torch and every built-in; the names in `_EXPORTS` (the registry's, `resolve` from
`clbench.approaches.resolution`, `Approach` and its data) can be imported from here too, which loads the registry on
first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

BUILTINS: dict[str, str] = {
    "agem": "clbench.approaches.replay.agem:AGEM",
    "derpp": "clbench.approaches.replay.derpp:DERPlusPlus",
    "er": "clbench.approaches.replay.er:ExperienceReplay",
    "ewc": "clbench.approaches.ewc:EWC",
    "hat": "clbench.approaches.hat:Hat",
    "icarl": "clbench.approaches.replay.icarl:ICaRL",
    "imm-mean": "clbench.approaches.imm:IMMMean",
    "imm-mode": "clbench.approaches.imm:IMMMode",
    "joint": "clbench.approaches.joint:Joint",
    "lfl": "clbench.approaches.lfl:LFL",
    "lwf": "clbench.approaches.lwf:LwF",
    "mas": "clbench.approaches.importance.mas:MAS",
    "packnet": "clbench.approaches.packnet:PackNet",
    "pathnet": "clbench.approaches.pathnet:PathNetApproach",
    "pnn": "clbench.approaches.pnn:ProgressiveNetworks",
    "random": "clbench.approaches.random_classifier:RandomClassifier",
    "sgd": "clbench.approaches.sgd:SGD",
    "sgd-f": "clbench.approaches.sgd_frozen:SGDFrozen",
    "si": "clbench.approaches.importance.si:SI",
}
"""Built-in method name -> "module:Class" (registered by `clbench.approaches.registry`, as plugins are)."""

_EXPORTS: dict[str, str] = {
    "ORIGINS": "registry", "REGISTRY": "registry", "approach_names": "registry", "lookup": "registry",
    "ResolvedApproach": "resolution", "check_default_grids": "resolution", "resolve": "resolution",
    "Approach": "base", "ApproachContext": "datatypes", "Hyperparameters": "datatypes",
}
"""Name -> the module of this package that defines it, imported on first use (after the registry)."""

__all__ = ["BUILTINS", *_EXPORTS]


def lazy_exports(package: str, module: str, names: Sequence[str]) -> Callable[[str], Any]:
    """A package's module-level `__getattr__` that imports `<package>.<module>` on the first use of one of
    `names`: the package's `__init__` itself imports nothing (and no torch)."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def __getattr__(name: str) -> Any:
    """`from clbench.approaches import REGISTRY, resolve`: the registry is imported first, so that the built-ins
    are registered before any of these names is used."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    importlib.import_module(f"{__name__}.registry")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
