"""The scenarios' losses and the heads they are over, as pure functions of tensors (`Approach` wires them in:
`scenario_cross_entropy`, `class_cross_entropy`, `domain_cross_entropy`, `seen_logits`, `class_targets`).

Scenarios (`data.scenario`): in the task scenario (the paper's) a sample's loss is the cross-entropy on its
task's head. In the class scenario the network is the same, and the heads of the tasks seen so far, concatenated
(task t's classes at offset sum_{u<t} n_u), are one output layer: the loss is the cross-entropy over every class
seen so far, with the sample's global class index, as FACIL trains with `--all-outputs`
(mmasana/FACIL src/approach/finetuning.py `criterion`; src/networks/network.py `LLL_Net.add_head`,
`task_offset`). An approach whose prediction needs the task id beyond picking a head (`needs_task_id`: HAT's
masks, PackNet's, PathNet's paths, PNN's columns) trains on its task's head in both scenarios.

In the domain scenario (van de Ven & Tolias 2019, "Three scenarios for continual learning": the task id is not
given, every task has the same classes) the network is built with its heads tied (`MultiHeadNet.tie_heads`): every
task's head is one Linear module, so class c of every task is output c of that head. Everything that picks
`heads[task]` (the task scenario's loss, `predict`, LwF's distillation, A-GEM's and ER's replayed batches, joint's
mixed batches) therefore uses the shared head without a task id, and the target is the class within the task.
"The output over every class" is that one head (C outputs): `seen_logits` concatenates the distinct heads, and
every task's class offset is 0. The shared head is a shared parameter like the body (`named_shared_parameters`:
SI, MAS and IMM protect and merge it; EWC covers every parameter anyway). Approaches that need the task id
(`needs_task_id`) or that `refuses_domain` (iCaRL) are refused before training (`scenario_refusal`).
"""

from __future__ import annotations

import torch
from torch.nn import functional

from clbench.data.batches import Batch
from clbench.nets import MultiHeadNet


def head_cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                       reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """(cross-entropy of `logits` (B, K) against `targets` (B,), number correct): the loss on one output layer, a
    task's head, the shared head or the heads side by side."""
    loss = functional.cross_entropy(logits, targets, reduction=reduction)
    return loss, (logits.argmax(1) == targets).sum()


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


def class_targets(batch: Batch, offsets: torch.Tensor, class_offsets: tuple[int, ...]) -> torch.Tensor:
    """The batch's targets as indices into the output over every class: task t's class c -> offset_t + c.

    `offsets` (T,) is `class_offsets` on the batch's device, for a batch that mixes tasks (`batch.task_ids`)."""
    if batch.task_ids is not None:
        return batch.targets + offsets.index_select(0, batch.task_ids)  # (B,)
    return batch.targets + class_offsets[batch.task]  # (B,)


def seen_logits(network: MultiHeadNet, features: torch.Tensor, n_tasks: int,
                over_every_output: bool) -> torch.Tensor:
    """The heads of tasks 0..n_tasks-1 on `features`, concatenated: (B, sum of their classes).

    With `over_every_output` (`training.class_loss: all` in the class scenario) and every head asked for, the
    output over every class is one linear map, the heads' weights side by side (`MultiHeadNet.all_heads`: one
    matrix product, as Mammoth's single classifier, equal to the concatenation up to float rounding); otherwise
    each head is applied on its own, as every run stored before `class_loss` computed it, and a head tied across
    tasks (the domain scenario's shared head) once: (B, C)."""
    heads = network.heads
    if n_tasks == len(heads) and over_every_output:
        return network.all_heads(features)
    return torch.cat([heads[task](features) for task in network.distinct_heads(n_tasks)], dim=1)
