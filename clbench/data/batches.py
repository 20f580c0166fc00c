"""The task data as the loop sees it: `Batch`, `LabelledData` (one split), `Task` and `TaskSequence`.

A split's images stay uint8 on the device and are normalised per batch by its `InputTransform`, unless its
normalised inputs are kept whole in the task sequence's `InputCache` (`clbench.data.input_cache`): an evaluation
split's slice batches are then views of them, a training step's batch a gather of their rows; the same values
either way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from clbench.data.input_cache import TRAINING, InputCache
from clbench.data.transform import InputTransform

ImageAugmentation = Callable[[torch.Tensor], torch.Tensor]
"""uint8 images (B, C, H, W) -> augmented uint8 images of the same shape (`clbench.data.augment`)."""


@dataclass(frozen=True)
class Batch:
    """One batch: normalised inputs, targets, and the task they belong to."""

    inputs: torch.Tensor  # (B, C, H, W) float, or (B, D) for flattened inputs
    targets: torch.Tensor  # (B,) int64, class index within the task
    task: int  # the task of every sample, or -1 when `task_ids` is set
    task_ids: torch.Tensor | None = None  # (B,) int64, per-sample task (joint training, replay)
    images: torch.Tensor | None = None  # (B, C, H, W) uint8: the samples as stored (what a replay buffer keeps)


@dataclass(frozen=True)
class LabelledData:
    """Images and labels of one split, from one task or (joint training) several, on one device."""

    images: torch.Tensor  # (N, C, H, W) uint8
    labels: torch.Tensor  # (N,) int64
    task_ids: torch.Tensor  # (N,) int64
    transform: InputTransform
    task: int  # the single task of all samples, or -1 if mixed
    # the task sequence's cache of normalised inputs (`build_tasks` sets it on every split); None: normalise every
    # batch (a replay memory's samples, data built by hand)
    cache: InputCache | None = field(default=None, compare=False, repr=False)
    # an evaluation split (validation, test): its slice batches are views of its kept inputs
    evaluated: bool = field(default=False, compare=False)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def batch(self, indices: torch.Tensor | slice, augment: ImageAugmentation | None = None,
              training: bool = False) -> Batch:
        """The samples at `indices`: a slice (views) or a 1-D index tensor on the data's device (gathered).

        `augment` (training batches, `data.augment`) changes the uint8 images before they are normalised; the batch's
        `images` stay the stored ones (what a replay buffer keeps), its `inputs` are the augmented ones.
        Without augmentation, the inputs come from the split's kept inputs where there are some: a slice of an
        evaluation split is a view of them; an index batch with `training` (a training step's) gathers their rows
        (a copy: the kept inputs are never changed through a training batch).
        """
        images, labels = _take(self.images, indices), _take(self.labels, indices)
        task_ids = None if self.task >= 0 else _take(self.task_ids, indices)
        kept = None
        if augment is None and isinstance(indices, slice) and self.evaluated and self.task >= 0:
            kept = self.kept_inputs()
            if kept is not None:
                return Batch(kept[indices], labels, self.task, images=images)
        if augment is None and isinstance(indices, torch.Tensor) and training:
            kept = self.kept_inputs(TRAINING)
            if kept is not None:
                return Batch(kept.index_select(0, indices), labels, self.task, task_ids, images)
        seen = images if augment is None else augment(images)  # (B, C, H, W) uint8
        return Batch(self.transform(seen, self.task if task_ids is None else task_ids), labels, self.task, task_ids,
                     images)

    def kept_inputs(self, role: str | None = None) -> torch.Tensor | None:
        """The split's normalised inputs (N, ...) float32 from its cache (computed at the first use), or None without a
        cache or when they do not fit its budget."""
        if self.cache is None:
            return None
        return self.cache.inputs(self, self.input_sources, self.normalised, role)

    @functools.cached_property
    def input_sources(self) -> tuple[torch.Tensor, ...]:
        """What the split's normalised inputs are computed from: images, task ids and the transform's tables."""
        return (self.images, self.task_ids, *self.transform.tables())

    def normalised(self) -> torch.Tensor:
        """The split's normalised inputs, each sample by its own task's tables (`InputTransform.whole`)."""
        return self.transform.whole(self.images, self.task if self.task >= 0 else self.task_ids)

    def batches(self, batch_size: int) -> list[slice]:
        """Contiguous slices covering the data in order (evaluation)."""
        return [slice(start, start + batch_size) for start in range(0, len(self), batch_size)]

    @staticmethod
    def concatenate(parts: Sequence[LabelledData]) -> LabelledData:
        """Several tasks' data as one mixed set (joint training), in the first part's cache."""
        return LabelledData(
            torch.cat([p.images for p in parts]), torch.cat([p.labels for p in parts]),
            torch.cat([p.task_ids for p in parts]), parts[0].transform, -1, parts[0].cache,
        )


def _take(tensor: torch.Tensor, indices: torch.Tensor | slice) -> torch.Tensor:
    """tensor[indices] along dim 0; index tensors go through index_select (on CPU ~10x faster than [])."""
    return tensor[indices] if isinstance(indices, slice) else tensor.index_select(0, indices)


@dataclass(frozen=True)
class Task:
    """One task of the sequence: its position, name, classes and its three splits."""

    index: int  # 0-based position in the sequence
    name: str
    n_classes: int
    train: LabelledData
    valid: LabelledData
    test: LabelledData


@dataclass(frozen=True)
class TaskSequence:
    """All tasks of one run, in the seeded order."""

    tasks: tuple[Task, ...]
    input_shape: tuple[int, ...]  # network input shape, e.g. (784,) or (3, 32, 32)

    def __len__(self) -> int:
        return len(self.tasks)

    def __getitem__(self, index: int) -> Task:
        return self.tasks[index]

    @property
    def head_sizes(self) -> tuple[int, ...]:
        return tuple(task.n_classes for task in self.tasks)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(task.name for task in self.tasks)
