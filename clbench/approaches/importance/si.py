"""SI: synaptic intelligence (Zenke, Poole & Ganguli, ICML 2017).

While task t trains, every step adds its first-order loss decrease to a running path integral per parameter,
omega += -g * delta (eq. 3), with g the gradient of the task loss alone (the penalty's analytic gradient
2 c Omega (theta - theta*) is subtracted from the step's gradient before clipping) and delta the step's change.
After the task (best weights restored), Omega += omega / ((theta_end - theta_start)^2 + xi) (eq. 5) and the
anchor theta* becomes the current weights. From the second task on the loss is CE + c sum Omega (theta -
theta*)^2 (eq. 4). Only the shared body is tracked and penalised: each task's head is trained at its own task
only and never changes afterwards, so it needs no protection.

Two details follow the authors' code (ganguli-lab/pathint) under clbench's protocol:
- the accumulated Omega is clipped at zero after each task (`pathint/protocols.py`: relu(Omega_old +
  omega / (delta^2 + xi))), so the penalty is never concave for a weight;
- omega is kept with the best-validation weights and restored with them (`epoch_state`): the steps of the
  epochs that early stopping throws away do not count, so omega, theta_end and the anchor all describe the
  same training (Zenke et al. trained a fixed number of epochs, without early stopping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.importance.functions import (
    ParameterDict,
    clip_at_zero,
    quadratic_penalty_gradient,
    si_importance,
    si_path_step,
)
from clbench.approaches.importance.penalty import ImportancePenalty
from clbench.approaches.regularizers import detached_copy
from clbench.data.batches import TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class SIHyperparameters(Hyperparameters):
    """SI's hyper-parameters (defaults: Zenke et al.'s permuted-MNIST code, c = 0.1, xi = 0.1)."""

    clip_grad_norm: float = field(100.0, doc="gradient-norm clipping (clbench: 100, as the reference's ewc)",
                                  minimum=0.0, special={0.0: "no clipping"})
    c: float = field(0.1, doc="penalty strength c (Zenke et al. eq. 4; pmnist 0.1, split MNIST 1; grid 0.01, "
                              "0.03, 0.1, 0.5, 1)", minimum=0.0)
    xi: float = field(0.1, doc="damping xi of Omega's denominator (Zenke et al. eq. 5; ganguli-lab/pathint: 0.1 "
                               "fig_permuted_mnist, 1e-3 fig_split_mnist and fig_transfer_cifar)", minimum=0.0)


class SI(ImportancePenalty):
    """Quadratic penalty towards the previous weights, weighted by each parameter's path-integral importance.

    The authors' code: ganguli-lab/pathint `pathint/protocols.py` (the importance and its update), with the
    notebooks of each figure (`fig_permuted_mnist`, `fig_split_mnist`, `fig_transfer_cifar`) for xi and c.
    """

    name = "si"
    summary = "synaptic intelligence (Zenke et al. 2017)"
    hyperparameters_class = SIHyperparameters
    hparams: SIHyperparameters
    revision = 1  # 1: Omega clipped at zero, omega kept with the best epoch (runs before have other numbers)

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.omega: ParameterDict = self.zeros()  # running path integral of the current task
        self.start: ParameterDict = detached_copy(self.body)  # theta at the current task's start
        self.step_gradients: ParameterDict = {}  # task-loss gradient of the step in progress
        self.step_start: ParameterDict = {}  # theta before the step in progress

    def strength(self) -> float:
        return self.hparams.c

    def zeros(self) -> ParameterDict:
        return {name: torch.zeros_like(p) for name, p in self.body.items()}

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        self.omega = self.zeros()
        self.start = detached_copy(self.body)

    def before_step(self, step: StepInfo) -> None:
        """Record the task loss's gradient (the step's gradient minus the penalty's) and theta before the step."""
        gradients = {name: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
                     for name, p in self.body.items()}
        if step.stage > 0:
            penalty = quadratic_penalty_gradient(self.body, self.anchor, self.importance, self.hparams.c)
            gradients = {name: gradients[name] - penalty[name] for name in gradients}
        self.step_gradients = gradients
        self.step_start = detached_copy(self.body)

    def after_step(self, step: StepInfo) -> None:
        with torch.no_grad():
            deltas = {name: p.detach() - self.step_start[name] for name, p in self.body.items()}
            self.omega = si_path_step(self.omega, self.step_gradients, deltas)

    def epoch_state(self) -> ParameterDict:
        """omega so far: kept with each best epoch's weights, so the task's omega ends at the best epoch."""
        return {name: value.clone() for name, value in self.omega.items()}

    def restore_epoch_state(self, state: ParameterDict) -> None:
        self.omega = state

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.consolidate(si_importance(self.omega, self.start, detached_copy(self.body), self.hparams.xi))

    def kept_importance(self, total: ParameterDict) -> ParameterDict:
        """Omega clipped at zero, as the authors' code keeps it (`functions.clip_at_zero`)."""
        return clip_at_zero(total)

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "omega": self.omega, "start": self.start}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        self.omega = self.on_device(state.get("omega", {})) or self.zeros()
        self.start = self.on_device(state.get("start", {})) or detached_copy(self.body)
