"""`ScenarioLosses`: the loss of a batch in the run's scenario (`data.scenario`: task, class or domain), as the
methods every approach inherits (`Approach` derives from it); the mathematics is in `losses`, its pure functions.

What it reads of its approach: `context` (the scenario, heads, class offsets and `training.class_loss`), `offsets`
(the class offsets as a tensor on the device), `network` and `needs_task_id`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from clbench.approaches import losses
from clbench.approaches.datatypes import ApproachContext
from clbench.data.batches import Batch
from clbench.nets import MultiHeadNet


class ScenarioLosses:
    """The scenario's cross-entropies and heads of an approach's `network` (see `clbench.approaches.losses`)."""

    context: ApproachContext
    offsets: torch.Tensor  # (T,) where each task's classes start in the output over every class
    network: nn.Module
    needs_task_id: ClassVar[bool] = False

    @property
    def class_scenario(self) -> bool:
        """True when the loss is over every class seen so far (`data.scenario: class`, task id not needed)."""
        return self.context.scenario == "class" and not self.needs_task_id

    @property
    def domain_scenario(self) -> bool:
        """True in the domain scenario (`data.scenario: domain`): one head shared by every task, no task id."""
        return self.context.scenario == "domain"

    def class_targets(self, batch: Batch) -> torch.Tensor:
        """The batch's targets as indices into the output over every class: task t's class c -> offset_t + c."""
        return losses.class_targets(batch, self.offsets, self.context.class_offsets)  # (B,)

    def seen_logits(self, features: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """The heads of tasks 0..n_tasks-1 on `features`, concatenated: (B, sum of their classes); one linear map
        over every output with `training.class_loss: all` in the class scenario (`losses.seen_logits`)."""
        return losses.seen_logits(self.multihead, features, n_tasks, self.loss_over_every_output)

    def scenario_cross_entropy(self, features: torch.Tensor, batch: Batch, stage: int,
                               reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """(cross-entropy, number correct) of a batch from the body's `features`, in the run's scenario: each
        sample on its own task's head in the task scenario, over every class of tasks 0..stage in the class
        scenario (`class_cross_entropy`). The batch may mix tasks (`batch.task_ids`: joint training, replay)."""
        if self.class_scenario:
            return self.class_cross_entropy(features, batch, stage, reduction)
        if self.domain_scenario:
            return self.domain_cross_entropy(features, batch, reduction)
        if batch.task_ids is not None:
            return losses.multihead_loss(features, self.multihead.heads, batch, stage + 1, reduction)
        logits = self.multihead.heads[batch.task](features)  # (B, n_task)
        return losses.head_cross_entropy(logits, batch.targets, reduction)

    @property
    def loss_over_every_output(self) -> bool:
        """True when the class scenario's loss is over every output of the sequence (`training.class_loss: all`)."""
        return self.class_scenario and self.context.training.class_loss == "all"

    def loss_tasks(self, stage: int) -> int:
        """How many tasks' heads the class scenario's loss is over at `stage` (`training.class_loss`): the tasks seen
        so far, stage + 1 (`seen`, and always outside the class scenario), or every task of the sequence (`all`)."""
        return len(self.context.head_sizes) if self.loss_over_every_output else stage + 1

    def class_cross_entropy(self, features: torch.Tensor, batch: Batch, stage: int,
                            reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """(cross-entropy over the classes of `loss_tasks(stage)` tasks, number correct): the class scenario's
        loss, over the classes of tasks 0..stage (`training.class_loss: seen`) or over every output (`all`)."""
        logits = self.seen_logits(features, self.loss_tasks(stage))  # (B, classes in the loss)
        return losses.head_cross_entropy(logits, self.class_targets(batch), reduction)

    def domain_cross_entropy(self, features: torch.Tensor, batch: Batch,
                             reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """(cross-entropy on the shared head, number correct): the domain scenario's loss, whatever tasks the batch
        mixes; the target is the class within the sample's task."""
        logits = self.multihead.heads[0](features)  # (B, C): every task's head is this one
        return losses.head_cross_entropy(logits, batch.targets, reduction)

    @property
    def multihead(self) -> MultiHeadNet:
        """The network as a MultiHeadNet (for approaches that need `features` and `heads`)."""
        assert isinstance(self.network, MultiHeadNet)
        return self.network
