"""Joint (multitask) training: the reference A_J of the forgetting ratio.

At stage t a fresh copy of the initial network is trained on tasks 1..t together (each sample's loss on its
own head; in the class scenario, the cross-entropy over every class of tasks 1..t); row t of its accuracy
matrix is the multitask reference for every approach at stage t.
"""

from __future__ import annotations

import torch
from torch.nn import functional

from clbench.approaches.base import Approach, ApproachContext, Hyperparameters, StepInfo, tensors_to
from clbench.data.tasks import Batch, LabelledData, TaskSequence


def multihead_loss(features: torch.Tensor, heads: torch.nn.ModuleList, batch: Batch, n_heads: int,
                   reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of each sample on its own task's head: (loss, number correct).

    Every head is applied to every sample (heads are small) and the per-sample loss is picked by task id,
    which avoids data-dependent indexing (no host-device sync).
    """
    assert batch.task_ids is not None
    losses = torch.zeros_like(batch.targets, dtype=features.dtype)  # (B,)
    correct = torch.zeros_like(batch.targets, dtype=torch.bool)  # (B,)
    for task in range(n_heads):
        logits = heads[task](features)  # (B, n_task)
        mine = batch.task_ids == task  # (B,)
        targets = torch.where(mine, batch.targets, torch.zeros_like(batch.targets))
        task_losses = functional.cross_entropy(logits, targets, reduction="none")
        losses = torch.where(mine, task_losses, losses)
        correct = torch.where(mine, logits.argmax(1) == targets, correct)
    loss = losses.mean() if reduction == "mean" else losses.sum()
    return loss, correct.sum()


class Joint(Approach):
    """Multitask reference: retrains from the initial weights on all tasks seen so far."""

    name = "joint"
    summary = "multitask reference A_J: tasks 1..t trained together from scratch at each stage"
    is_reference = True

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.initial_weights = self.snapshot()

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        self.restore(self.initial_weights)

    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        seen = [tasks[u] for u in range(stage + 1)]
        return (LabelledData.concatenate([task.train for task in seen]),
                LabelledData.concatenate([task.valid for task in seen]))

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        features = self.multihead.features(batch.inputs)
        if self.class_scenario:
            return self.class_cross_entropy(features, batch, step.stage)[0]
        return multihead_loss(features, self.multihead.heads, batch, step.stage + 1)[0]

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.multihead.features(batch.inputs)
        if self.class_scenario:
            return self.class_cross_entropy(features, batch, stage, reduction="sum")
        return multihead_loss(features, self.multihead.heads, batch, stage + 1, reduction="sum")

    def extra_state(self) -> dict[str, object]:
        return {"initial_weights": self.initial_weights}

    def load_extra_state(self, state: dict[str, object]) -> None:
        weights: dict[str, torch.Tensor] = state["initial_weights"]  # type: ignore[assignment]
        self.initial_weights = tensors_to(weights, self.device)
