"""X-DER: eXtended dark experience replay (Boschini, Bonicelli, Buzzega, Porrello & Calderara 2022, TPAMI,
"Class-Incremental Continual Learning into the eXtended DER-verse").

DER++ whose stored logits are updated, over the output of every head of the sequence side by side (Mammoth's one
output layer). The terms of a step of task t, as the authors ship them (aimagelab/mammoth@e75a491 `models/xder.py`
`observe`, lines 146-293; on/off as its `get_parser` defaults, lines 24-43):

- the stream: the cross-entropy of the batch on task t's head only (line 154). On.
- alpha: the mean squared error between the network's logits on a memory batch and the stored ones, every head
  (lines 158-172). On (Mammoth requires it; no default).
- beta: the cross-entropy of a second memory batch over the heads of tasks < t (lines 174-181). On (required).
- the future-past update: for the memory samples of both batches (merged, duplicates dropped), with probability
  1 / (times the sample was replayed this task), the stored logits of heads t.. are replaced by the network's
  outputs, scaled so their largest is at most gamma times the stored logit of the sample's class (lines 202-213,
  `xder_terms.update_logits`). On (gamma 0.85).
- lambd: consistency of the future heads (t+1..), a SupCon loss on `simclr_num_aug` augmented views of the batch
  and `simclr_batch_size` memory samples (lines 215-242; temperature `simclr_temp`). On (0.05); here only with
  `data.augment` (below).
- constr_eta, constr_margin: the future constraint, a hinge pushing every future head's largest logit below the own
  head's by the margin, on the batch and the memory samples (lines 257-271). On (`future_constraint` 1).
- the past constraint: the same hinge between the softmax of the current head and the (detached) earlier heads
  (lines 273-286). Off by default (`past_constraint` 0); available as `past_constraint: true`.
- align_bn: from task 1 the batch's forward pass does not update batch norm's running statistics; the first memory
  batch, joined by replay_batch_size // t samples of the batch, does (lines 150, 162-169). On; it changes nothing
  on a network without batch norm (the joined samples are then not computed).
- dp_weight (a distance-preserving SPKD term on the future heads, lines 244-255): off by default (0), not
  implemented.

At the end of task t (`end_task`, lines 59-130) the memory is rebuilt, not filled by reservoir: the earlier classes
keep their first buffer_size // (classes seen) samples, and the free slots go to task t's classes in equal quotas
(the remainder to classes drawn at random), taken from a shuffled pass over the task's training data with their
logits then, whose earlier heads are scaled by `update_logits` below gamma times the logit of the class (the past
update). Then every memory sample of an earlier task gets heads t.. replaced the same way (the future update).

Where clbench departs: the consistency term's views are `data.augment`'s random crop and flip (`clbench.data.augment`),
not Mammoth's `strong_aug` (random resized crop, colour jitter, grayscale, flip; `utils/augmentations.py`), and
without `data.augment` the term is off (seq-MNIST: Mammoth's xder cannot run there, its seq-mnist has no
denormalisation transform for `strong_aug` and three-channel grayscale weights). The loss is X-DER's own in both
scenarios (Mammoth trains once for class-IL and task-IL), whatever `training.class_loss` says; the domain scenario
is refused (one shared head has no past or future heads). Heads may differ in size (Mammoth's `cpt` is one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.domains import FLOAT_BYTES, BenchmarkFacts, DomainProblem, memory_problem
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.approaches.replay.buffer import Memory
from clbench.approaches.replay.functions import logit_matching_loss
from clbench.approaches.replay.xder_terms import (
    class_quotas,
    contrastive_consistency,
    first_occurrences,
    margin_violation,
    own_head_max,
    update_logits,
)
from clbench.data.augment import random_crop_and_flip
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.spec.fields import field

SOURCE = "Mammoth models/xder.py get_parser"


@dataclass(frozen=True)
class XDERHyperparameters(ReplayHyperparameters):
    """X-DER's weights (defaults: Mammoth `models/xder.py` `get_parser`, lines 26-41; alpha and beta, which Mammoth
    requires, from its `models/config/xder_rpc.yaml` seq-cifar100 buffer 500)."""

    alpha: float = field(0.1, doc="weight of the logit matching (MSE) term (required in Mammoth; xder_rpc.yaml "
                                  "seq-cifar100 0.1)", minimum=0.0)
    beta: float = field(0.5, doc="weight of the replayed labels' cross-entropy on the earlier heads (required in "
                                 "Mammoth; xder_rpc.yaml seq-cifar100 0.5)", minimum=0.0)
    gamma: float = field(0.85, doc=f"the updated logits' largest is at most gamma x the class's ({SOURCE}: 0.85)",
                         minimum=0.0)
    lambd: float = field(0.05, doc=f"weight of the future heads' SupCon consistency, only with data.augment ({SOURCE}: "
                                   "0.05)", minimum=0.0)
    simclr_temp: float = field(5.0, doc=f"the SupCon temperature ({SOURCE}: 5)", above=0.0)
    simclr_batch_size: int = field(64, doc=f"memory samples joined to the batch for the consistency ({SOURCE}: 64)",
                                   minimum=0)
    simclr_num_aug: int = field(4, doc=f"augmented views of each sample for the consistency ({SOURCE}: 4)",
                                minimum=2)
    constr_eta: float = field(0.1, doc=f"weight of the past and future constraints ({SOURCE}: 0.1)", minimum=0.0)
    constr_margin: float = field(0.3, doc=f"margin of the past and future constraints ({SOURCE}: 0.3)",
                                 minimum=0.0)
    future_constraint: bool = field(True, doc=f"the future heads kept below the own head by the margin ({SOURCE}: 1)")
    past_constraint: bool = field(False, doc=f"the current head kept above the earlier heads' softmax ({SOURCE}: 0)")
    align_bn: bool = field(True, doc=f"batch norm's running statistics from the memory batch joined by a part of "
                                     f"the batch from task 1 on ({SOURCE}: 1)")


@contextlib.contextmanager
def running_statistics(network: nn.Module, update: bool) -> Iterator[None]:
    """Within: batch norm layers update their running statistics only if `update` (training mode still normalises
    by the batch's own; Mammoth `utils/batch_norm.py` `bn_track_stats`)."""
    layers = [m for m in network.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and m.track_running_stats]
    if update or not layers:
        yield
        return
    for layer in layers:
        layer.track_running_stats = False
    try:
        yield
    finally:
        for layer in layers:
            layer.track_running_stats = True


class XDER(ReplayApproach):
    """DER++ with the stored logits of past and future heads updated, future-head consistency and constraints.

    The authors' code: aimagelab/mammoth@e75a491 `models/xder.py` (variants there: `xder_ce.py`, `xder_rpc.py`).
    """

    name = "xder"
    summary = "eXtended dark experience replay (Boschini et al. 2022)"
    hyperparameters_class = XDERHyperparameters
    hparams: XDERHyperparameters
    refuses_domain = ("X-DER's terms are per head of a class-incremental output (the current head's cross-entropy, "
                      "the earlier and future heads' updates and constraints): one shared head has none; use derpp")

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """The memory's (`ReplayApproach`), then, with data.augment (its consistency term), the simclr_num_aug
        views of each of the batch's and simclr_batch_size memory samples (their images and inputs, 4 bytes a
        number twice) within this machine's memory."""
        problem = super().hyperparameter_problem(hyperparameters, facts)
        assert isinstance(hyperparameters, XDERHyperparameters)
        if problem is not None or not facts.spec.data.augment:
            return problem
        views = (facts.spec.training.batch_size + hyperparameters.simclr_batch_size) * hyperparameters.simclr_num_aug
        return memory_problem("simclr_num_aug", float(views) * facts.input_size * 2 * FLOAT_BYTES,
                              f"{views:,} augmented views per step")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.replays = torch.zeros(self.hparams.buffer_size)  # times each slot was replayed this task (Mammoth
        # `update_counter`)
        sizes = torch.tensor(context.head_sizes, device=self.device)
        self.column_task = torch.repeat_interleave(torch.arange(len(context.head_sizes), device=self.device), sizes)
        self.has_batch_norm = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in self.network.modules())

    # ------------------------------------------------------------------ helpers
    @property
    def n_tasks(self) -> int:
        return len(self.context.head_sizes)

    def start(self, task: int) -> int:
        """Where task `task`'s classes start in the output over every class (the total past the last task)."""
        return self.context.class_offsets[task] if task < self.n_tasks else sum(self.context.head_sizes)

    def every_output(self, inputs: torch.Tensor) -> torch.Tensor:
        """Every head's logits side by side: (B, every class)."""
        return self.multihead.all_heads(self.multihead.features(inputs))

    def draw(self, n: int) -> tuple[torch.Tensor, Memory]:
        """(slots (n,), their samples): n memory samples drawn without replacement (as `ReplayBuffer.sample`)."""
        buffer = self.buffer
        slots = torch.randperm(buffer.size, generator=self.replay_generator)[:n].to(buffer.device)
        assert buffer.images is not None and buffer.logits is not None
        kept = buffer.kept_inputs()
        return slots, Memory(buffer.images[slots], buffer.labels[slots], buffer.task_ids[slots], buffer.logits[slots],
                             kept[slots] if kept is not None else None)

    def global_labels(self, labels: torch.Tensor, task_ids: torch.Tensor) -> torch.Tensor:
        return labels + self.offsets.index_select(0, task_ids)

    # ------------------------------------------------------------------ training step
    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        with self.autocast():
            loss = self.objective(batch, step.stage)
        self.backward_and_step(loss, step, optimizer)
        return loss.detach()

    def objective(self, batch: Batch, stage: int) -> torch.Tensor:
        """The step's loss (Mammoth `observe`); updates the stored logits of the replayed samples on the way."""
        hp, start, end = self.hparams, self.start(stage), self.start(stage + 1)
        with running_statistics(self.network, not hp.align_bn or stage == 0):
            outputs = self.every_output(batch.inputs)  # (B, K)
        loss = functional.cross_entropy(outputs[:, start:end], batch.targets)
        replayed = self.replay_terms(batch, stage) if len(self.buffer) else None
        if replayed is not None:
            loss = loss + replayed[0]
        if stage < self.n_tasks - 1:
            loss = loss + self.future_terms(batch, stage, outputs, replayed)
        if hp.past_constraint and stage > 0:
            seen = functional.softmax(outputs[:, :end], dim=1)  # (B, classes seen)
            bad = seen[:, :start].max(1).values.detach()
            loss = loss + hp.constr_eta * margin_violation(bad, seen[:, start:].max(1).values, hp.constr_margin)
        return loss

    def replay_terms(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                             torch.Tensor]:
        """(alpha and beta terms, the merged memory samples' outputs (M, K), labels (M,), tasks (M,)); updates
        their stored logits of heads stage.. (Mammoth lines 158-213)."""
        hp, n = self.hparams, self.hparams.replay_batch_size
        slots_1, memory_1 = self.draw(n)
        inputs_1 = self.as_batch(memory_1, augment=True).inputs
        if hp.align_bn and self.has_batch_norm:  # the batch's samples join for the running statistics
            joined = torch.cat([inputs_1, batch.inputs[: n // stage]])
            outputs_1 = self.every_output(joined)[: inputs_1.shape[0]]
        else:
            outputs_1 = self.every_output(inputs_1)
        assert memory_1.logits is not None
        loss = hp.alpha * logit_matching_loss(outputs_1, memory_1.logits)
        slots_2, memory_2 = self.draw(n)
        with running_statistics(self.network, not hp.align_bn):
            outputs_2 = self.every_output(self.as_batch(memory_2, augment=True).inputs)
        labels_2 = self.global_labels(memory_2.labels, memory_2.task_ids)
        loss = loss + hp.beta * functional.cross_entropy(outputs_2[:, :self.start(stage)], labels_2)
        keep = first_occurrences(torch.cat([slots_1, slots_2]))
        slots = torch.cat([slots_1, slots_2])[keep]
        outputs = torch.cat([outputs_1, outputs_2])[keep]
        tasks = torch.cat([memory_1.task_ids, memory_2.task_ids])[keep]
        labels = self.global_labels(torch.cat([memory_1.labels, memory_2.labels])[keep], tasks)
        assert memory_2.logits is not None
        stored = torch.cat([memory_1.logits, memory_2.logits])[keep]
        self.update_replayed(slots, stored, outputs.detach(), labels, tasks, stage)
        return loss, outputs, labels, tasks

    def update_replayed(self, slots: torch.Tensor, stored: torch.Tensor, outputs: torch.Tensor, labels: torch.Tensor,
                        tasks: torch.Tensor, stage: int) -> None:
        """The future-past update during training: each replayed sample of an earlier task, accepted with
        probability 1 / (its replays this task), gets heads stage.. of its stored logits from `outputs`."""
        earlier = (tasks < stage).cpu()
        on_host = slots.cpu()
        self.replays[on_host[earlier]] += 1
        draws = torch.rand(int(earlier.sum()), generator=self.replay_generator)
        chosen = earlier.clone()
        chosen[earlier] = draws * self.replays[on_host[earlier]] < 1
        if not bool(chosen.any()):
            return
        chosen = chosen.to(slots.device)
        assert self.buffer.logits is not None
        self.buffer.logits[slots[chosen]] = update_logits(stored[chosen], outputs[chosen].to(stored.dtype),
                                                          labels[chosen], self.start(stage), self.start(self.n_tasks),
                                                          self.hparams.gamma).to(self.buffer.logits.dtype)

    def future_terms(self, batch: Batch, stage: int, outputs: torch.Tensor,
                     replayed: tuple[torch.Tensor, ...] | None) -> torch.Tensor:
        """The future heads' consistency (with data.augment) and constraint (Mammoth lines 215-271)."""
        hp, current, future = self.hparams, self.start(stage), self.start(stage + 1)
        loss = outputs.new_zeros(())
        if hp.lambd > 0 and self.augment_generator is not None:
            loss = loss + hp.lambd * self.consistency(batch, stage)
        if not hp.future_constraint:
            return loss
        bad, good = outputs[:, future:].max(1).values, outputs[:, current:future].max(1).values
        if replayed is not None:
            _, memory_outputs, _, tasks = replayed
            bad = torch.cat([bad, memory_outputs[:, future:].max(1).values])
            good = torch.cat([good, own_head_max(memory_outputs, tasks, self.column_task)])
        return loss + hp.constr_eta * margin_violation(bad, good, hp.constr_margin)

    def consistency(self, batch: Batch, stage: int) -> torch.Tensor:
        """The SupCon term of the future heads on augmented views of memory samples and the batch's images."""
        hp = self.hparams
        assert batch.images is not None and self.augment_generator is not None and self.transform is not None
        images, labels = batch.images, self.class_targets(batch)
        tasks = self.task_ids(batch)
        if len(self.buffer):
            memory = self.draw(hp.simclr_batch_size)[1]
            images = torch.cat([memory.images, images])
            labels = torch.cat([self.global_labels(memory.labels, memory.task_ids), labels])
            tasks = torch.cat([memory.task_ids, tasks])
        views = random_crop_and_flip(images.repeat_interleave(hp.simclr_num_aug, 0), self.augment_generator)
        inputs = self.transform(views, tasks.repeat_interleave(hp.simclr_num_aug, 0))
        with running_statistics(self.network, not hp.align_bn):
            outputs = self.every_output(inputs)[:, self.start(stage + 1):]  # (N*A, future classes)
        return contrastive_consistency(outputs, labels, hp.simclr_num_aug,
                                       list(self.context.head_sizes[stage + 1:]), hp.simclr_temp)

    # ------------------------------------------------------------------ the memory at the end of a task
    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """Rebuild the memory (Mammoth `end_task`): keep an equal share of each earlier class, fill the rest with
        the task's classes and their (past-updated) logits, then update the earlier samples' heads stage..."""
        training = self.network.training
        self.network.train()
        with torch.no_grad(), running_statistics(self.network, False):
            if stage > 0:
                self.keep_earlier_classes(self.hparams.buffer_size // self.start(stage + 1))
            self.add_task_samples(stage, tasks[stage].train)
            self.update_earlier_samples(stage)
        self.replays.zero_()
        self.network.train(training)

    def keep_earlier_classes(self, per_class: int) -> None:
        """Keep the first `per_class` samples of each class in the memory (in slot order, classes in order)."""
        stored = self.buffer.contents()
        assert stored.logits is not None
        labels = self.global_labels(stored.labels, stored.task_ids)
        kept = torch.cat([torch.nonzero(labels == label).squeeze(1)[:per_class] for label in labels.unique()])
        logits = stored.logits[kept].clone()
        self.buffer.set_contents(stored.images[kept], stored.labels[kept], stored.task_ids[kept])
        assert self.buffer.logits is not None
        self.buffer.logits[: kept.shape[0]] = logits

    def add_task_samples(self, stage: int, train: LabelledData) -> None:
        """Fill the free slots with the task's classes in equal quotas, from a shuffled pass over its training data
        (augmented when data.augment is on), each with its logits, earlier heads scaled by the past update."""
        quotas = class_quotas(self.buffer.capacity - len(self.buffer), self.context.head_sizes[stage],
                              self.replay_generator)
        order = torch.randperm(len(train), generator=self.replay_generator).to(train.images.device)
        for indices in order.split(self.training_protocol.batch_size):
            if not bool(quotas.any()):
                break
            batch = self.training_batch(train, indices)
            outputs = self.every_output(batch.inputs)  # (B, K)
            labels = self.class_targets(batch)
            if stage > 0:
                outputs = update_logits(outputs, outputs, labels, 0, self.start(stage), self.hparams.gamma)
            taken = torch.zeros(len(indices), dtype=torch.bool)
            for k, label in enumerate(batch.targets.tolist()):
                if quotas[label] > 0:
                    taken[k], quotas[label] = True, quotas[label] - 1
            if bool(taken.any()):
                taken = taken.to(batch.targets.device)
                assert batch.images is not None
                inputs = batch.inputs[taken] if self.augment_generator is None else None
                self.buffer.add_reservoir(batch.images[taken], batch.targets[taken], self.task_ids(batch)[taken],
                                          self.replay_generator, outputs[taken], inputs)

    def update_earlier_samples(self, stage: int) -> None:
        """The future update at the task's end: the memory's samples of earlier tasks get heads stage.. of their
        stored logits from the network now (on a random order of the memory, in batches, augmented as replays)."""
        buffer = self.buffer
        if len(buffer) == 0:
            return
        slots, memory = self.draw(len(buffer))
        outputs = torch.cat([self.every_output(self.as_batch(part, augment=True).inputs)
                             for part in split_memory(memory, self.training_protocol.batch_size)])
        earlier = memory.task_ids < stage
        if not bool(earlier.any()):
            return
        assert memory.logits is not None and buffer.logits is not None
        labels = self.global_labels(memory.labels, memory.task_ids)
        buffer.logits[slots[earlier]] = update_logits(memory.logits[earlier], outputs[earlier], labels[earlier],
                                                      self.start(stage), self.start(self.n_tasks), self.hparams.gamma)

    # ------------------------------------------------------------------ state
    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "replays": self.replays.clone()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        if "replays" in state:
            self.replays = state["replays"].clone()


def split_memory(memory: Memory, size: int) -> list[Memory]:
    """Consecutive parts of at most `size` samples."""
    n = int(memory.labels.shape[0])
    return [Memory(memory.images[i:i + size], memory.labels[i:i + size], memory.task_ids[i:i + size],
                   None if memory.logits is None else memory.logits[i:i + size],
                   None if memory.inputs is None else memory.inputs[i:i + size]) for i in range(0, n, size)]
