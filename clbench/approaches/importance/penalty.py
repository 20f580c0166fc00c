"""The base of the importance-weighted quadratic penalties (SI, MAS): what they share, once.

Both keep a per-parameter importance Omega of the shared body, summed over the tasks learned so far, and the
anchor theta* (the body's weights after the previous task), and from the second task on add
strength * sum_k Omega_k (theta_k - theta*_k)^2 to the loss (`functions.quadratic_penalty`). Heads are
not penalised: each is trained at its own task only; in the domain scenario the one head every task shares is
(`named_shared_parameters`: body and shared head), as every task trains it like the body. A subclass computes a
task's importance and calls `consolidate` at the end of the task, and says which hyper-parameter is the strength.

Monitoring: `penalty_stiffness` after each task, per parameter tensor of the body: max and mean Omega, the max of
lr * 2 * strength * Omega (the training lr the next task starts at) and how many weights exceed 2, where plain
SGD oscillates around the anchor instead of settling (`functions.penalty_stiffness`), and the minimum
of Omega and its negative entries before SI's clipping at zero. Zenke et al. and
Aljundi et al. trained with Adam, which rescales steps; the paper's protocol is plain SGD at lr 0.05, so a
strength tuned for Adam can be unstable here. `clbench report --monitoring` shows the table.
"""

from __future__ import annotations

from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters
from clbench.approaches.importance.functions import (
    ParameterDict,
    accumulate_importance,
    penalty_stiffness,
    quadratic_penalty,
    stiffness_rows,
)
from clbench.approaches.parameters import named_shared_parameters, tensors_to
from clbench.approaches.regularizers import detached_copy
from clbench.data.batches import TaskSequence


class ImportancePenalty(Approach):
    """Quadratic penalty towards the previous task's weights, weighted by a per-parameter importance."""

    monitoring_reporter = "clbench.approaches.importance.report:PenaltyReporter"

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.body = dict(named_shared_parameters(self.multihead))
        self.importance: ParameterDict = {}  # Omega of the tasks before the current one (summed)
        self.anchor: ParameterDict = {}  # theta* = the body's weights after the previous task
        self.before_clipping: ParameterDict | None = None  # the last accumulation before SI's clip (monitoring)

    def strength(self) -> float:
        """The penalty's strength (SI's c, MAS's lambda)."""
        raise NotImplementedError

    def penalty(self, stage: int) -> torch.Tensor | float:
        if stage == 0:
            return 0.0
        if not self.importance:
            raise RuntimeError(f"{self.name}: stage {stage + 1} needs the importance of earlier tasks (load the state)")
        return quadratic_penalty(self.body, self.anchor, self.importance, self.strength())

    def consolidate(self, task_importance: ParameterDict) -> None:
        """After a task: add its importance to Omega and anchor the penalty at the current weights."""
        self.before_clipping = accumulate_importance(task_importance, self.importance)
        self.importance = self.kept_importance(self.before_clipping)
        self.anchor = detached_copy(self.body)

    def kept_importance(self, total: ParameterDict) -> ParameterDict:
        """The accumulated importance the penalty uses (default: the sum itself; SI clips it at zero)."""
        return total

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`penalty_stiffness`: the importance and its SGD step stability per body parameter after task `stage`."""
        if not self.importance:
            return {}
        return {"penalty_stiffness": stiffness_rows(self.importance, self.strength(), self.training_protocol.lr,
                                                    before_clipping=self.before_clipping)}

    def log_scalars(self, stage: int) -> dict[str, float]:
        """The largest Omega of the tasks before `stage` and the largest stiffness lr * 2 * strength * Omega over the
        body (`functions.penalty_stiffness`; above 2 plain SGD oscillates); none before the first task ends."""
        if not self.importance:
            return {}
        stiffness = penalty_stiffness(self.importance, self.strength(), self.training_protocol.lr)
        return {"importance_max": max(float(value.max()) for value in self.importance.values()),
                "stiffness_max": max(float(value.max()) for value in stiffness.values())}

    def extra_state(self) -> dict[str, Any]:
        return {"importance": self.importance, "anchor": self.anchor}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.importance = self.on_device(state.get("importance", {}))
        self.anchor = self.on_device(state.get("anchor", {}))

    def on_device(self, values: dict[str, torch.Tensor]) -> ParameterDict:
        return tensors_to(values, self.device)
