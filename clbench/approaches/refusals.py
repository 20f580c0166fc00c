"""Why an approach cannot run, in one line: one rule (`approach_refusal`) that `list`, `spec`, `train` and `tune` share.

`approach_refusal` answers "why can approach A not run a benchmark with this body, data (its scenario) and resolved
protocol" (a `Refusal`: the spec key that refuses it and the reason, or None), from three checks, in this order:

- A body (`network.kind`) in the approach's `unsupported_networks`, or a bias-free MLP (`network.bias: false`)
  where it has `refuses_bias_free` (`unsupported_network_problem`, the default of the hook
  `Approach.network_problem`); the constructor asks it too.
- A scenario it cannot run in (`scenario_refusal`: `needs_task_id`, `refuses_domain`, `refuses_class`); with the
  built network (`scenario_network_problem`) the constructor asks more.
- A protocol it cannot train under (`early_stopping_problem`, the default of the hook `Approach.protocol_problem`,
  which PathNet and the random classifier override).

`clbench.approaches.resolution.refusal` asks it for a spec and a method; `resolve` raises its message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import nn

from clbench.nets import MultiHeadNet
from clbench.spec import DataSpec, NetworkSpec, TrainingSpec
from clbench.spec.fields import origin_of

if TYPE_CHECKING:
    from clbench.approaches.base import Approach
    from clbench.approaches.datatypes import Hyperparameters


@dataclass(frozen=True)
class Refusal:
    """Why an approach cannot run a benchmark: the spec key whose value refuses it, and the reason in one line."""

    key: str  # `network.kind`, `data.scenario` or `training` (the protocol, with data.validation_fraction)
    reason: str  # one line that names the approach: "approach hat needs the task id ..."

    def message(self, source: str, origins: Mapping[str, str]) -> str:
        """The one-line error: where the refusing value came from (the spec file, or the option that set it; for
        a section key such as `training`, the options that set a key the reason names), then the reason."""
        where = origin_of(self.key, source, origins)
        named = [origin for key, origin in origins.items()
                 if re.search(rf"(?<![\w.]){re.escape(key)}(?!\w)", self.reason)]
        return f"{', '.join(dict.fromkeys(named)) if where == source and named else where}: {self.reason}"


def approach_refusal(cls: type[Approach], network: NetworkSpec, data: DataSpec, training: TrainingSpec,
                     hyperparameters: Hyperparameters) -> Refusal | None:
    """Why approach class `cls` cannot run a benchmark of this body, data (its scenario) and resolved protocol
    (`training` with the approach's own section merged), or None if it can. The one rule: `clbench list` shows it,
    `clbench spec` prints it, `clbench train` and `tune` refuse with it before any run starts."""
    problem = cls.network_problem(network, hyperparameters)
    if problem is not None:
        return Refusal("network.kind", problem)
    problem = scenario_refusal(cls, data.scenario)
    if problem is not None:
        return Refusal("data.scenario", problem)
    problem = cls.protocol_problem(training, data, hyperparameters)
    if problem is not None:
        return Refusal("training", f"approach {cls.name}: {problem}")
    return None


def unsupported_network_problem(name: str, unsupported: dict[str, str], kind: str,
                                bias_free_reason: str = "") -> str | None:
    """Why approach `name` does not run on the body `kind` (its reason in `unsupported`) or without biases
    (`bias_free_reason`, given when the spec sets `network.bias: false`), or None if it does."""
    reason = unsupported.get(kind)
    if reason is not None:
        return f"approach {name} does not run on `network.kind` {kind}: {reason}"
    if bias_free_reason:
        return f"approach {name} does not run with `network.bias: false`: {bias_free_reason}"
    return None


def early_stopping_problem(training: TrainingSpec, data: DataSpec) -> str | None:
    """The base loop's refusal: early stopping without a validation split (None when the protocol is fine)."""
    if training.early_stopping and data.validation_fraction == 0:
        return ("training.early_stopping is true but data.validation_fraction is 0: early stopping needs a "
                "validation split; set training.early_stopping=false (exactly max_epochs epochs, the last "
                "weights kept) or a validation fraction above 0")
    return None


def scenario_refusal(cls: type[Approach], scenario: str) -> str | None:
    """Why approach class `cls` cannot run in `scenario` (one line), or None if it can: in the domain scenario the
    approaches that need the task id (`needs_task_id`: their masks, paths or columns are chosen by it, and the
    scenario gives none) and those that say why they refuse it (`refuses_domain`); in the class scenario those that
    say why they refuse it (`refuses_class`)."""
    if scenario == "class" and cls.refuses_class:
        return f"approach {cls.name} does not run with data.scenario=class: {cls.refuses_class}"
    if scenario != "domain":
        return None
    if cls.needs_task_id:
        return (f"approach {cls.name} needs the task id (its prediction picks the task's masks, paths or columns), "
                f"which data.scenario=domain does not give: run it with data.scenario=task")
    if cls.refuses_domain:
        return f"approach {cls.name} does not run with data.scenario=domain: {cls.refuses_domain}"
    return None


def scenario_network_problem(cls: type[Approach], scenario: str, network: nn.Module,
                             trains_with_base_loss: bool) -> str | None:
    """Why approach class `cls` cannot train `network` in `scenario`, or None if it can.

    The class scenario's loss (the base `loss`) needs a `MultiHeadNet` unless the approach `needs_task_id`. In the
    domain scenario: an approach refused there (`scenario_refusal`), a multi-head network without tied heads (e.g.
    a plugin's `build_network` that builds its own), or another network trained by the base loss: the shared head
    is what the scenario is.
    """
    multihead = isinstance(network, MultiHeadNet)
    if scenario == "class" and cls.refuses_class:
        return scenario_refusal(cls, scenario)
    if scenario == "class" and not cls.needs_task_id and trains_with_base_loss and not multihead:
        return (f"approach {cls.name}: data.scenario=class needs a network with `features` and `heads` (a "
                f"MultiHeadNet); this one is a {type(network).__name__}: run it with data.scenario=task, or set "
                f"`needs_task_id = True` on the approach class")
    if scenario != "domain":
        return None
    refusal = scenario_refusal(cls, scenario)
    if refusal is not None:
        return refusal
    untied = multihead and not network.heads_tied
    if untied or (not multihead and trains_with_base_loss):
        return (f"approach {cls.name}: data.scenario=domain needs a MultiHeadNet with one head shared by every "
                f"task (`MultiHeadNet.tie_heads()` in `build_network`); this one is a {type(network).__name__} "
                f"without tied heads")
    return None
