"""Continual-learning approaches: one file (or folder) per method over `base.Approach`, found through one table.

`BUILTINS` maps each built-in method's name to the "module:Class" that defines it: the same form as a plugin's
`--method package.module:Class`, and the one line a new built-in adds here. Nothing is imported at import time,
so this package and a method folder's `__init__` are torch-free: `clbench report` imports a method's monitoring
reporter (e.g. `clbench.approaches.hat.report`) without torch.

The registry (`clbench.approaches.registry`: `REGISTRY`, `ORIGINS`, `register`, `lookup`, `approach_names`, ...)
imports torch and registers every built-in; import its names, `resolve` (`clbench.approaches.resolution`),
`Approach` (`base`) and its data (`datatypes`) from the modules that define them.
"""

from __future__ import annotations

BUILTINS: dict[str, str] = {
    "adahat": "clbench.approaches.adahat.approach:AdaHat",
    "agem": "clbench.approaches.replay.agem:AGEM",
    "bic": "clbench.approaches.bic.approach:BiC",
    "derpp": "clbench.approaches.replay.derpp:DERPlusPlus",
    "er": "clbench.approaches.replay.er:ExperienceReplay",
    "er-ace": "clbench.approaches.replay.er_ace:ERACE",
    "ewc": "clbench.approaches.ewc:EWC",
    "gdumb": "clbench.approaches.replay.gdumb:GDumb",
    "gpm": "clbench.approaches.gpm.approach:GPM",
    "hat": "clbench.approaches.hat.approach:Hat",
    "icarl": "clbench.approaches.replay.icarl:ICaRL",
    "imm-mean": "clbench.approaches.imm:IMMMean",
    "imm-mode": "clbench.approaches.imm:IMMMode",
    "joint": "clbench.approaches.joint:Joint",
    "lfl": "clbench.approaches.lfl:LFL",
    "lucir": "clbench.approaches.lucir.approach:LUCIR",
    "lwf": "clbench.approaches.lwf:LwF",
    "mas": "clbench.approaches.importance.mas:MAS",
    "packnet": "clbench.approaches.packnet.approach:PackNet",
    "pathnet": "clbench.approaches.pathnet.approach:PathNetApproach",
    "pnn": "clbench.approaches.pnn.approach:ProgressiveNetworks",
    "random": "clbench.approaches.random_classifier:RandomClassifier",
    "sgd": "clbench.approaches.sgd:SGD",
    "sgd-f": "clbench.approaches.sgd_frozen:SGDFrozen",
    "si": "clbench.approaches.importance.si:SI",
    "supsup": "clbench.approaches.supsup.approach:SupSup",
    "wsn": "clbench.approaches.wsn.approach:WSN",
    "xder": "clbench.approaches.replay.xder:XDER",
}
"""Built-in method name -> "module:Class" (registered by `clbench.approaches.registry`, as plugins are)."""

__all__ = ["BUILTINS"]
