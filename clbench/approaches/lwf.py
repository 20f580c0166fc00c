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

import torch

from clbench.approaches.datatypes import Hyperparameters, StepInfo
from clbench.approaches.previous_model import ApproachWithPreviousModel
from clbench.approaches.regularizers import distillation_loss
from clbench.data.batches import Batch
from clbench.spec.fields import field


@dataclass(frozen=True)
class LwFHyperparameters(Hyperparameters):
    """LwF's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(100.0, doc="gradient-norm clipping (reference lwf: 100)",
                                  minimum=0.0, special={0.0: "no clipping"})
    lamb: float = field(2.0, doc="weight of the distillation loss (Li & Hoiem 2017: lambda_o; reference 2, "
                                 "grid 0.1, 0.5, 1, 2, 4, 8, 10)", minimum=0.0)
    temperature: float = field(1.0, doc="distillation temperature T (the paper used 2; reference 1, grid 0.5, "
                                        "1, 2, 4)", minimum=1e-3)


class LwF(ApproachWithPreviousModel):
    """Cross-entropy on the new task plus distillation of every earlier head towards the previous model.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/lwf.py`.
    """

    name = "lwf"
    summary = "learning without forgetting (Li & Hoiem 2017)"
    hyperparameters_class = LwFHyperparameters
    hparams: LwFHyperparameters

    def distillation(self, inputs: torch.Tensor, features: torch.Tensor, stage: int) -> torch.Tensor:
        """Per-sample distillation summed over the heads of tasks < `stage`: (B,); zeros on the first task."""
        total = torch.zeros(features.shape[0], device=features.device, dtype=features.dtype)  # (B,)
        if stage == 0:
            return total
        tasks = self.multihead.distinct_heads(stage)  # the domain scenario's shared head: once
        for task, previous_logits in zip(tasks, self.previous.logits(inputs, tasks, stage)):  # (B, n_task) each
            logits = self.multihead.heads[task](features)  # (B, n_task)
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
