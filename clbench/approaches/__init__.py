"""Continual-learning approaches: one file (or folder) per method over `base.Approach`, found through one table.

`BUILTINS` maps each built-in method's name to the "module:Class" that defines it: the same form as a plugin's
`--method package.module:Class`, and the one line a new built-in adds here. Nothing is imported at import time,
so this package and a method folder's `__init__` are torch-free: `clbench report` imports a method's monitoring
reporter (e.g. `clbench.approaches.hat.report`) without torch.

The registry (`clbench.approaches.registry`: `REGISTRY`, `resolve`, `lookup`, `approach_names`, ...) imports
torch and every built-in; its names can be imported from here too, which loads it on first use.
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

_REGISTRY_NAMES = ("ORIGINS", "REGISTRY", "Approach", "ApproachContext", "Hyperparameters", "ResolvedApproach",
                   "approach_names", "check_default_grids", "lookup", "resolve")

__all__ = ["BUILTINS", *_REGISTRY_NAMES]


def lazy_exports(package: str, module: str, names: Sequence[str]) -> Callable[[str], Any]:
    """A package's module-level `__getattr__` that imports `<package>.<module>` on the first use of one of
    `names`: the package's `__init__` itself imports nothing (and no torch)."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


# The registry's names (`from clbench.approaches import REGISTRY, resolve`), imported on first use.
__getattr__ = lazy_exports(__name__, "registry", _REGISTRY_NAMES)
