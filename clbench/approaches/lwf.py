"""LwF: learning without forgetting (Li & Hoiem 2017).

Training task t > 1: cross-entropy on the current head + lamb * sum over earlier heads u < t of the
distillation loss between the current network's head u and the same head of the network frozen after task
t-1 (eval mode, no dropout), both softened by the temperature T (`regularizers.distillation_loss`). The body
and the earlier heads both learn. The validation loss includes the distillation term, as in the reference.
On the first task there is no earlier model and the term is exactly 0. In the domain scenario every task's head is
one shared head: its outputs are distilled once (`MultiHeadNet.distinct_heads`), towards the previous model's
shared head.

As the reference: no warm-up of the new head (the paper's optional first step) and no weight decay; the
recorded outputs are recomputed on each batch from the frozen model, which is the same thing as recording
them once because the frozen model is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.parameters import tensors_to
from clbench.approaches.regularizers import ParameterDict, distillation_loss, frozen_network
from clbench.data.tasks import Batch, TaskSequence
from clbench.nets import MultiHeadNet
from clbench.spec.fields import field


class WithPreviousModel(Approach):
    """Keeps a frozen copy of the network as it was after the previous task (LwF, LFL)."""

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.previous_weights: ParameterDict = {}  # state_dict after the previous task; {} before task 2
        self.previous: MultiHeadNet | None = None  # built from previous_weights: eval mode, no gradients

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.set_previous(self.snapshot())

    def set_previous(self, weights: ParameterDict) -> None:
        self.previous_weights = weights
        self.previous = frozen_network(self.build_network, weights, self.device) if weights else None  # type: ignore[assignment]

    def require_previous(self, stage: int) -> MultiHeadNet:
        """The previous model; training a later task without it (state not loaded) is an error."""
        if self.previous is None:
            raise RuntimeError(f"{self.name}: stage {stage + 1} needs the model of the previous task (load the "
                               "approach's state)")
        return self.previous

    def extra_state(self) -> dict[str, Any]:
        return {"previous_network": self.previous_weights}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        weights = state.get("previous_network", {})
        self.set_previous(tensors_to(weights, self.device))


@dataclass(frozen=True)
class LwFHyperparameters(Hyperparameters):
    """LwF's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(100.0, doc="gradient-norm clipping (reference lwf: 100)", minimum=0.0)
    lamb: float = field(2.0, doc="weight of the distillation loss (Li & Hoiem 2017: lambda_o; reference 2, "
                                 "grid 0.1, 0.5, 1, 2, 4, 8, 10)", minimum=0.0)
    temperature: float = field(1.0, doc="distillation temperature T (the paper used 2; reference 1, grid 0.5, "
                                        "1, 2, 4)", minimum=1e-3)


class LwF(WithPreviousModel):
    """Cross-entropy on the new task plus distillation of every earlier head towards the previous model."""

    name = "lwf"
    summary = "learning without forgetting (Li & Hoiem 2017)"
    hyperparameters_class = LwFHyperparameters
    hparams: LwFHyperparameters

    def distillation(self, inputs: torch.Tensor, features: torch.Tensor, stage: int) -> torch.Tensor:
        """Per-sample distillation summed over the heads of tasks < `stage`: (B,); zeros on the first task."""
        total = torch.zeros(features.shape[0], device=features.device, dtype=features.dtype)  # (B,)
        if stage == 0:
            return total
        previous = self.require_previous(stage)
        with torch.no_grad():
            previous_features = previous.features(inputs)  # (B, F)
        for task in self.multihead.distinct_heads(stage):  # the domain scenario's shared head: once
            logits = self.multihead.heads[task](features)  # (B, n_task)
            previous_logits = previous.heads[task](previous_features)  # (B, n_task)
            total = total + distillation_loss(logits, previous_logits, self.hparams.temperature)
        return total

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        features = self.multihead.features(batch.inputs)  # (B, F)
        cross_entropy = self.scenario_cross_entropy(features, batch, step.stage)[0]
        return cross_entropy + self.hparams.lamb * self.distillation(batch.inputs, features, step.stage).mean()

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.multihead.features(batch.inputs)  # (B, F)
        loss, correct = self.scenario_cross_entropy(features, batch, stage, reduction="sum")
        loss = loss + self.hparams.lamb * self.distillation(batch.inputs, features, stage).sum()
        return loss, correct
