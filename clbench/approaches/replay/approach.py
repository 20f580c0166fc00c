"""`ReplayApproach`: an approach with a replay memory of `buffer_size` samples (the base of ER, A-GEM, DER++, iCaRL).

The memory holds uint8 images, labels (class within its task) and task ids on the device, like the task data;
a replayed batch is normalised by the tasks' own input transform and mixes tasks (`Batch.task_ids`), so its loss
is `Approach.scenario_cross_entropy`: each sample on its own head in the task scenario, over every class seen so
far in the class scenario. With `data.augment` the memory keeps the images as stored (a training batch's
`Batch.images`, never its augmented inputs) and a replayed batch is augmented afresh each time it is drawn, as
Mammoth's buffer returns its samples through the training transform (aimagelab/mammoth@e75a491, utils/buffer.py
`get_data(size, transform=...)`; its models store `not_aug_inputs`). The memory and its random stream are in the
checkpoints, so a resumed run draws the same samples. Its size is reported with every row (`memory_usage`).

Without `data.augment` the memory also keeps each sample's normalised inputs, in the task sequence's `InputCache`
(handed to the memory at `begin_task`; 4 bytes per pixel, not counted in the memory's size nor checkpointed),
written from the training batch that stored it, so a replayed batch is a gather rather than a normalisation at
every step: the same values the transform gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters
from clbench.approaches.domains import FLOAT_BYTES, INDEX_BYTES, BenchmarkFacts, DomainProblem, memory_problem
from clbench.approaches.parameters import tensor_bytes
from clbench.approaches.replay.buffer import Memory, ReplayBuffer
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.data.transform import InputTransform
from clbench.spec.fields import field


@dataclass(frozen=True)
class ReplayHyperparameters(Hyperparameters):
    """What every replay approach has: the memory's size and how many of its samples a step replays."""

    buffer_size: int = field(200, doc="samples kept in memory, over all tasks (Mammoth's buffer_size; the DER "
                                      "paper's budgets: 200, 500, 5120)", minimum=1)
    replay_batch_size: int = field(64, doc="memory samples replayed per training step (Mammoth's minibatch_size; "
                                           "default: the protocol's batch size)", minimum=1)


class ReplayApproach(Approach):
    """Keeps a `ReplayBuffer`; subclasses decide what goes in and how replayed samples enter the loss.

    The memory's plumbing only: drawing (`replayed`), storing (`store`), checkpoints and `memory_usage`. Each method's
    file holds its whole step: ER's and DER++'s `training_step` (draw, loss, step, store), A-GEM's `before_step`
    (the projection) and `end_task` (its episodic memory).
    """

    hyperparameters_class = ReplayHyperparameters
    hparams: ReplayHyperparameters
    # The memory keeps buffer_size // (classes seen) samples per class (iCaRL, LUCIR, BiC, GDumb): a memory smaller
    # than the benchmark's classes keeps none of some class, which the method's prediction or fit then lacks.
    per_class_memory: ClassVar[bool] = False
    memories: ClassVar[int] = 1  # memories of `buffer_size` samples (BiC: its exemplars and its held-out samples)

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """A memory that cannot be allocated (each sample: its uint8 image, its normalised inputs, label, task id
        and logits over every class), or, for a memory per class, smaller than the benchmark's classes."""
        assert isinstance(hyperparameters, ReplayHyperparameters)
        size = hyperparameters.buffer_size
        if cls.per_class_memory and size < facts.n_classes:
            return DomainProblem("buffer_size", f"approach {cls.name} keeps buffer_size // (classes seen) samples "
                                                f"per class, {size} // {facts.n_classes} = 0 after the last task "
                                                f"of this benchmark: use at least {facts.n_classes}")
        sample = 2 * INDEX_BYTES + facts.input_size * (1 + FLOAT_BYTES) + facts.n_classes * FLOAT_BYTES
        return memory_problem("buffer_size", float(size) * sample * cls.memories, f"a memory of {size:,} samples")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.buffer = ReplayBuffer(self.hparams.buffer_size, self.device)
        self.replay_generator = context.generator("replay")
        self.transform: InputTransform | None = None  # the tasks' input transform (set at `begin_task`)

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        train = tasks[stage].train
        self.transform = train.transform
        if self.augment_generator is None:  # augmented replays are normalised afresh: nothing to keep
            self.buffer.use_input_cache(train.cache, train.transform)

    def as_batch(self, memory: Memory, augment: bool = False) -> Batch:
        """Memory samples as a normalised batch of mixed tasks; with `augment`, a training batch (augmented when
        `data.augment` is on; its `images` stay the stored ones). The kept inputs when the memory has them and
        nothing is augmented."""
        if memory.inputs is not None and (not augment or self.augment_generator is None):
            return Batch(memory.inputs, memory.labels, -1, memory.task_ids, memory.images)
        assert self.transform is not None, "begin_task sets the input transform"
        data = LabelledData(memory.images, memory.labels, memory.task_ids, self.transform, -1)
        return self.training_batch(data, slice(None)) if augment else data.batch(slice(None))

    def replayed(self) -> tuple[Batch, Memory] | None:
        """`replay_batch_size` samples drawn from the memory for a training step, augmented when `data.augment` is
        on (None while the memory is empty)."""
        if len(self.buffer) == 0:
            return None
        memory = self.buffer.sample(self.hparams.replay_batch_size, self.replay_generator)
        return self.as_batch(memory, augment=True), memory

    @staticmethod
    def task_ids(batch: Batch) -> torch.Tensor:
        """Each sample's task: (B,)."""
        if batch.task_ids is not None:
            return batch.task_ids
        return torch.full_like(batch.targets, batch.task)

    def store(self, batch: Batch, logits: torch.Tensor | None = None) -> None:
        """Offer a batch's samples (and logits) to the memory by reservoir sampling; their normalised inputs too
        unless `data.augment` is on (the batch's inputs are then augmented ones, which the memory must not keep)."""
        assert batch.images is not None, "training batches carry their uint8 images"
        inputs = batch.inputs if self.augment_generator is None else None
        self.buffer.add_reservoir(batch.images, batch.targets, self.task_ids(batch), self.replay_generator, logits,
                                  inputs)

    def features_of(self, data: LabelledData) -> torch.Tensor:
        """The body's features of `data` in eval mode, without autograd: (N, F) (for herding and class means)."""
        self.network.eval()
        with torch.inference_mode():
            return torch.cat([self.multihead.features(data.batch(chunk).inputs)
                              for chunk in data.batches(self.training_protocol.eval_batch_size)])

    def keep_exemplars(self, stage: int, per_class: int, candidates: LabelledData,
                       choose: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """The memory after task `stage` (iCaRL's Algorithms 4 and 5): the first `per_class` of each earlier class's
        samples in the memory, in their stored order, then for each of the task's classes the samples of
        `candidates` that `choose(members)` picks, in its order (members: that class's indices in `candidates`)."""
        offsets, sizes = self.context.class_offsets, self.context.head_sizes
        images: list[torch.Tensor] = []  # earlier classes first, then the new ones
        labels: list[torch.Tensor] = []
        task_ids: list[torch.Tensor] = []
        if len(self.buffer) and offsets[stage]:
            stored = self.buffer.contents()
            global_labels = stored.labels + self.offsets.index_select(0, stored.task_ids)
            index = torch.cat([torch.nonzero(global_labels == label).squeeze(1)[:per_class]
                               for label in range(offsets[stage])])
            images.append(stored.images.index_select(0, index))
            labels.append(stored.labels.index_select(0, index))
            task_ids.append(stored.task_ids.index_select(0, index))
        for label in range(sizes[stage]):
            members = torch.nonzero(candidates.labels == label).squeeze(1)
            order = members[choose(members).to(members.device)]
            images.append(candidates.images.index_select(0, order))
            labels.append(candidates.labels.index_select(0, order))
            task_ids.append(torch.full_like(order, stage))
        self.buffer.set_contents(torch.cat(images), torch.cat(labels), torch.cat(task_ids))

    def memory_usage(self) -> tuple[int, int]:
        return len(self.buffer), tensor_bytes(self.extra_state())

    def log_scalars(self, stage: int) -> dict[str, float]:
        """The memory's samples and the fraction of `buffer_size` they fill."""
        return {"buffer_samples": float(len(self.buffer)), "buffer_fill": len(self.buffer) / self.buffer.capacity}

    def extra_state(self) -> dict[str, Any]:
        return {"buffer": self.buffer.state_dict(), "replay_generator": self.replay_generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if "buffer" in state:
            self.buffer.load_state_dict(state["buffer"])
        if "replay_generator" in state:
            self.replay_generator.set_state(state["replay_generator"])


def joined(first: Batch, second: Batch) -> Batch:
    """Two batches as one batch of mixed tasks (inputs, targets, task ids and uint8 images concatenated)."""
    images = (torch.cat([first.images, second.images]) if first.images is not None and second.images is not None
              else None)
    return Batch(torch.cat([first.inputs, second.inputs]), torch.cat([first.targets, second.targets]), -1,
                 torch.cat([ReplayApproach.task_ids(first), ReplayApproach.task_ids(second)]), images)
