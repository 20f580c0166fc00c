"""Avalanche's strategies as clbench methods `av-<name>` (the optional extra `avalanche`): torch-free.

`STRATEGIES` maps each method name to the "module:Class" that defines it (`strategies.py`), as `BUILTINS` does for
clbench's own methods; the registry lists them without importing Avalanche or this folder's torch modules, and loads
a class when it is looked up. `avalanche_problem` says, without importing it, whether the installed Avalanche can run
them: absent (the one-line refusal naming the extra) or outside the supported range.

The design (`adapter.py`): clbench's `Approach` drives the Avalanche strategy's own `train(experience)` once per task,
on an experience made from clbench's task tensors; a plugin inside Avalanche's loop runs clbench's protocol there
(validation, lr plateaus, early stopping through Avalanche's `stop_training`, the best weights restored before the
strategy's end-of-experience work, the continual evaluation's step hook); clbench evaluates the trained network.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

DISTRIBUTION = "avalanche-lib"
SUPPORTED = ((0, 6), (0, 7))  # pyproject's `avalanche-lib>=0.6,<0.7`: the strategy signatures `strategies.py` copies
EXTRA_HINT = "pip install 'clbench[avalanche]' (from a checkout: pip install -e '.[avalanche]')"

_TARGET = "clbench.approaches.avalanche.strategies:"
STRATEGIES: dict[str, str] = {name: _TARGET + cls for name, cls in {
    "av-agem": "AvAGEM",
    "av-aetraining": "AvAETraining",
    "av-ar1": "AvAR1",
    "av-bic": "AvBiC",
    "av-cope": "AvCoPE",
    "av-cumulative": "AvCumulative",
    "av-cwrstar": "AvCWRStar",
    "av-der": "AvDER",
    "av-er-ace": "AvERACE",
    "av-er-aml": "AvERAML",
    "av-ewc": "AvEWC",
    "av-expertgatestrategy": "AvExpertGateStrategy",
    "av-featurereplay": "AvFeatureReplay",
    "av-fromscratchtraining": "AvFromScratchTraining",
    "av-gdumb": "AvGDumb",
    "av-gem": "AvGEM",
    "av-generativereplay": "AvGenerativeReplay",
    "av-gss-greedy": "AvGSSGreedy",
    "av-icarl": "AvICaRL",
    "av-jointtraining": "AvJointTraining",
    "av-learningtoprompt": "AvLearningToPrompt",
    "av-lfl": "AvLFL",
    "av-lwf": "AvLwF",
    "av-mas": "AvMAS",
    "av-mer": "AvMER",
    "av-mir": "AvMIR",
    "av-naive": "AvNaive",
    "av-packnet": "AvPackNet",
    "av-pnnstrategy": "AvPNNStrategy",
    "av-replay": "AvReplay",
    "av-scr": "AvSCR",
    "av-streaminglda": "AvStreamingLDA",
    "av-synapticintelligence": "AvSynapticIntelligence",
    "av-vaetraining": "AvVAETraining",
}.items()}
"""Method name (`av-` + Avalanche's class name in lower case, `_` as `-`) -> "module:Class"."""


def avalanche_version() -> str | None:
    """The installed avalanche-lib's version, or None when it is not installed (nothing imported)."""
    if importlib.util.find_spec("avalanche") is None:
        return None
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def avalanche_problem() -> str | None:
    """Why Avalanche's methods cannot run with the Avalanche installed here (one line), or None when they can."""
    version = avalanche_version()
    if version is None:
        return f"Avalanche (avalanche-lib) is not installed: the av-* methods need the optional extra `avalanche`: " \
               f"{EXTRA_HINT}"
    major_minor = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if not SUPPORTED[0] <= major_minor < SUPPORTED[1]:
        return (f"the av-* methods need avalanche-lib >=0.6,<0.7 (the signatures their hyper-parameters copy), not "
                f"{version}: {EXTRA_HINT}")
    return None


__all__ = ["DISTRIBUTION", "STRATEGIES", "avalanche_problem", "avalanche_version"]
