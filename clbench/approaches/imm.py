"""IMM: incremental moment matching (Lee et al. 2017), mean-IMM and mode-IMM, both with L2-transfer.

While training task t > 1 the loss is cross-entropy + regularization/2 * ||theta - theta_{t-1}||^2 (L2-transfer,
also in the validation loss), theta_{t-1} the merged model of the earlier tasks. After the task (best weights
restored) the network is merged with theta_{t-1}, and the merged weights are written into the network: they
are the model that is evaluated and carried on to the next task.

Multi-head decision: heads are task-specific, so the merge and the L2-transfer cover the body only; each
head keeps the weights its own task trained (earlier heads get no gradient afterwards). The reference merges
and L2-anchors every parameter, which averages the new head with its untrained copy (mean-IMM) and pulls it
towards its initialisation; that is a quirk of its multi-head port, not the method. In the domain scenario the
one head every task shares is merged and L2-anchored with the body (`named_shared_parameters`).

Batch norm (resnet18): its scale and shift are parameters and are merged; its running statistics are buffers, not
moments of the posterior the paper merges, and stay those of the last task's training (estimated with the unmerged
weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters
from clbench.approaches.parameters import named_shared_parameters, tensors_to
from clbench.approaches.regularizers import (
    ParameterDict,
    detached_copy,
    imm_mean_merge,
    imm_mode_merge,
    l2_transfer_penalty,
    task_fisher,
)
from clbench.data.batches import TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class IMMMeanHyperparameters(Hyperparameters):
    """Mean-IMM's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(10000.0, doc="gradient-norm clipping (reference imm-mean: 10000)",
                                  minimum=0.0, special={0.0: "no clipping"})
    regularization: float = field(1e-4, doc="L2-transfer strength (Lee et al. 2017; reference 1e-4, grid 1e-2, "
                                            "5e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-6)", minimum=0.0)


@dataclass(frozen=True)
class IMMModeHyperparameters(Hyperparameters):
    """Mode-IMM's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(1000.0, doc="gradient-norm clipping (reference imm-mode: 1000)", minimum=0.0)
    regularization: float = field(0.01, doc="L2-transfer strength (Lee et al. 2017; reference default 0.01, "
                                            "grid 10, 1, 0.1, 0.01, 1e-3, 1e-4, 1e-5; its comment says best "
                                            "was 1)", minimum=0.0)
    fisher_batch_size: int = field(20, doc="batch size of the batch-wise Fisher estimate (reference "
                                           "utils.fisher_matrix_diag: 20)", minimum=1)
    fisher_dropout: bool = field(True, doc="estimate the Fisher in training mode, dropout active, as the "
                                           "reference does (false: eval mode)")
    merge_epsilon: float = field(1e-8, doc="added to each task's Fisher in the merge, so that weights no task's "
                                           "Fisher constrains are averaged (clbench; the reference set them to 0)",
                                 minimum=1e-20)


class IMM(Approach):
    """Shared mechanics: L2-transfer to the previous merged body, merge after each task, write it back."""

    hparams: IMMMeanHyperparameters | IMMModeHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.anchor: ParameterDict = {}  # body name -> merged weights after the previous task

    def penalty(self, stage: int) -> torch.Tensor | float:
        if stage == 0:
            return 0.0
        if not self.anchor:
            raise RuntimeError(f"{self.name}: stage {stage + 1} needs the merged model of earlier tasks (load the "
                               "approach's state)")
        body = dict(named_shared_parameters(self.multihead))
        return l2_transfer_penalty(body, self.anchor, self.hparams.regularization)

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        merged = self.merge(stage, tasks)
        body = dict(named_shared_parameters(self.multihead))
        with torch.no_grad():
            for name, parameter in body.items():
                parameter.copy_(merged[name])
        self.anchor = detached_copy(body)

    def merge(self, stage: int, tasks: TaskSequence) -> ParameterDict:
        """The merged body after task `stage` (the network holds the task's trained weights)."""
        raise NotImplementedError

    def extra_state(self) -> dict[str, Any]:
        return {"anchor": self.anchor}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.anchor = tensors_to(state.get("anchor", {}), self.device)


class IMMMean(IMM):
    """Mean-IMM: the body becomes the uniform average of the bodies trained on each task so far.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/imm_mean.py`.
    """

    name = "imm-mean"
    summary = "incremental moment matching, mean merge with L2-transfer (Lee et al. 2017)"
    hyperparameters_class = IMMMeanHyperparameters

    def merge(self, stage: int, tasks: TaskSequence) -> ParameterDict:
        current = detached_copy(dict(named_shared_parameters(self.multihead)))
        if stage == 0 or not self.anchor:
            return current
        return imm_mean_merge(current, self.anchor, stage)


class IMMMode(IMM):
    """Mode-IMM: the body becomes the Fisher-weighted average of the task-trained bodies.

    Unlike the reference, whose merge loop rebinds a local variable and so never changes the network,
    clbench really writes the merged weights into the network. Each task's Fisher is estimated from the
    cross-entropy alone (the reference's loss also held the L2-transfer term).

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/imm_mode.py`.
    """

    name = "imm-mode"
    summary = "incremental moment matching, Fisher-weighted mode merge with L2-transfer (Lee et al. 2017)"
    hyperparameters_class = IMMModeHyperparameters
    hparams: IMMModeHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.precision: ParameterDict = {}  # body name -> sum over merged tasks of (F_k + epsilon)

    def merge(self, stage: int, tasks: TaskSequence) -> ParameterDict:
        body = dict(named_shared_parameters(self.multihead))
        with self.flops.uncounted():  # but each batch, sampled (counted whole, the Fisher doubled an ewc run)
            fisher = task_fisher(self.network, body, tasks[stage].train, stage, self.hparams.fisher_batch_size,
                                 self.hparams.fisher_dropout, seen=self.class_scenario,
                                 step=partial(self.flops.sampled, "fisher"))
        current = detached_copy(body)
        previous = self.anchor or current
        precision = self.precision or {name: torch.zeros_like(value) for name, value in current.items()}
        merged, self.precision = imm_mode_merge(previous, precision, current, fisher, self.hparams.merge_epsilon)
        return merged

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "precision": self.precision}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        self.precision = tensors_to(state.get("precision", {}), self.device)
