"""EWC: elastic weight consolidation (Kirkpatrick et al. 2017) with one merged diagonal Fisher.

Training loss: cross-entropy on the current head + lamb/2 * sum_i F_i (theta_i - theta*_i)^2 (also in the
validation loss). After each task, with the best weights restored: theta* = the current weights, and the
diagonal Fisher of the task (squared gradients of the cross-entropy with the true labels on its training
set, batch-wise, `regularizers.diagonal_fisher`) is merged with the earlier ones as
F = (F_new + t * F_old) / (t + 1), t the number of earlier tasks (the reference's single-penalty EWC).

The penalty covers every parameter, heads included, as the reference: a task's Fisher is zero on the other
tasks' heads, so the current head is free and earlier heads (which get no cross-entropy gradient) are held.
The reference adds its EWC penalty to the loss it differentiates for the Fisher; there the penalty sits at
its anchor, so its gradient is zero and clbench, which uses the cross-entropy alone, computes the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters
from clbench.approaches.parameters import tensors_to
from clbench.approaches.regularizers import (
    ParameterDict,
    detached_copy,
    ewc_penalty,
    merge_fisher,
    task_fisher,
)
from clbench.data.batches import TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class EWCHyperparameters(Hyperparameters):
    """EWC's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(100.0, doc="gradient-norm clipping (reference ewc: 100)",
                                  minimum=0.0, special={0.0: "no clipping"})
    lamb: float = field(5000.0, doc="penalty strength lambda (Kirkpatrick et al. 2017 eq. 3; reference 5000, "
                                    "grid 500, 1000, 2000, 5000, 10000, 20000, 50000)", minimum=0.0)
    fisher_batch_size: int = field(20, doc="batch size of the batch-wise Fisher estimate (reference "
                                           "utils.fisher_matrix_diag: 20; 1 gives the per-sample estimate)",
                                   minimum=1)
    fisher_dropout: bool = field(True, doc="estimate the Fisher in training mode, dropout active, as the "
                                           "reference does (false: eval mode)")


class EWC(Approach):
    """Quadratic penalty towards the previous weights, weighted by the merged diagonal Fisher.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/ewc.py`.
    """

    name = "ewc"
    summary = "elastic weight consolidation (Kirkpatrick et al. 2017)"
    hyperparameters_class = EWCHyperparameters
    hparams: EWCHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.fisher: ParameterDict = {}  # name -> merged diagonal Fisher of tasks < current
        self.anchor: ParameterDict = {}  # name -> weights after the previous task (theta*)

    def penalty(self, stage: int) -> torch.Tensor | float:
        if stage == 0:
            return 0.0
        if not self.fisher:
            raise RuntimeError(f"ewc: stage {stage + 1} needs the Fisher of earlier tasks (load the approach's state)")
        parameters = dict(self.network.named_parameters())
        return ewc_penalty(parameters, self.anchor, self.fisher, self.hparams.lamb)

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        parameters = dict(self.network.named_parameters())
        with self.flops.uncounted():  # but each batch, sampled (counted whole, the Fisher doubled an ewc run)
            fisher = task_fisher(self.network, parameters, tasks[stage].train, stage, self.hparams.fisher_batch_size,
                                 self.hparams.fisher_dropout, seen=self.class_scenario,
                                 step=partial(self.flops.sampled, "fisher"))
        self.fisher = fisher if stage == 0 or not self.fisher else merge_fisher(fisher, self.fisher, stage)
        self.anchor = detached_copy(parameters)

    def extra_state(self) -> dict[str, Any]:
        return {"fisher": self.fisher, "anchor": self.anchor}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.fisher = tensors_to(state.get("fisher", {}), self.device)
        self.anchor = tensors_to(state.get("anchor", {}), self.device)
