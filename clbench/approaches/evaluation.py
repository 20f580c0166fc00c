"""Evaluating a network on a split in large batches, without autograd (`Approach.evaluate`,
`evaluate_validation`, `evaluate_task` wire these in; the caller puts the network in eval mode).

Evaluations (`evaluate_task`): task-aware is the argmax over the task's own head; task-agnostic is the argmax over
the concatenated heads of tasks 1..max(t, u) (FACIL's TAg in `calculate_metrics`), stored only when
`predicts_without_task_id()`. In the domain scenario the two are one number (the argmax over the shared head,
which needs no task id): it is stored once, as the task-aware rows, and `clbench report` shows it for either
`--evaluation` with a note saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.nn import functional

from clbench.approaches.datatypes import TASK_AGNOSTIC, TASK_AWARE, Evaluation
from clbench.data.batches import Batch, LabelledData

Measure = Callable[[Batch], tuple[torch.Tensor, torch.Tensor]]
"""A batch -> (summed loss, number correct)."""

Autocast = Callable[[], AbstractContextManager[Any]]
"""The approach's autocast context (`Approach.autocast`)."""


def mean_over_batches(data: LabelledData, measure: Measure, batch_size: int, device: torch.device,
                      autocast: Autocast) -> Evaluation:
    """Mean loss and accuracy of `measure` over `data` in batches of `batch_size` (inference mode).

    Sums stay on the device; one host sync at the end.
    """
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.long)
    with torch.inference_mode(), autocast():
        for chunk in data.batches(batch_size):
            loss, right = measure(data.batch(chunk))
            loss_sum += loss.float()
            correct += right
    n = max(1, len(data))
    return Evaluation(float(loss_sum) / n, float(correct) / n, len(data))


def aware_and_agnostic_sums(logits: torch.Tensor, targets: torch.Tensor, start: int, width: int) -> torch.Tensor:
    """(4,): summed cross-entropy and number correct on the task's own head (`logits[:, start:start + width]`,
    against the class within the task), then over every candidate class (against the global class index)."""
    own = logits[:, start:start + width]  # (B, n_task): the task's head
    global_targets = targets + start  # (B,) global class indices
    return torch.stack([
        functional.cross_entropy(own, targets, reduction="sum").float(),
        (own.argmax(1) == targets).sum().float(),
        functional.cross_entropy(logits, global_targets, reduction="sum").float(),
        (logits.argmax(1) == global_targets).sum().float()])


def aware_and_agnostic(data: LabelledData, predict_classes: Callable[[torch.Tensor], torch.Tensor], start: int,
                       width: int, batch_size: int, device: torch.device,
                       autocast: Autocast) -> dict[str, Evaluation]:
    """The task-aware and task-agnostic evaluations of a task whose classes are outputs start..start+width-1 of
    `predict_classes(inputs)` (B, candidate classes): one forward pass per batch."""
    sums = torch.zeros(4, device=device)  # aware loss, aware correct, agnostic loss, agnostic correct
    with torch.inference_mode(), autocast():
        for chunk in data.batches(batch_size):
            batch = data.batch(chunk)
            sums += aware_and_agnostic_sums(predict_classes(batch.inputs), batch.targets, start, width)
    loss_aware, right_aware, loss_agnostic, right_agnostic = sums.tolist()
    n = max(1, len(data))
    return {TASK_AWARE: Evaluation(loss_aware / n, right_aware / n, len(data)),
            TASK_AGNOSTIC: Evaluation(loss_agnostic / n, right_agnostic / n, len(data))}
