"""Task construction: a benchmark's data spec + a seed -> a sequence of tasks as tensors on one device.

The seeded order of the tasks, their validation splits and subsamples, and their tensors: uint8 images, labels and
task ids per split (`clbench.data.batches`), one `InputTransform` of per-task tables (`clbench.data.transform`),
rotated tasks' images rotated once (`clbench.data.rotation`), and one `InputCache` of normalised inputs for the
whole sequence, which every split holds (`clbench.data.input_cache`).

The types of the task data are also importable from here, where they were defined before (approaches and plugins
written against `clbench.data.tasks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from clbench.data.batches import Batch, ImageAugmentation, LabelledData, Task, TaskSequence
from clbench.data.input_cache import INPUT_CACHE_BYTES, InputCache
from clbench.data.rotation import ROTATION_RANGE, rotate_images, rotation_angles, rotation_sources
from clbench.data.transform import InputTransform
from clbench.errors import ClbenchError
from clbench.seeding import numpy_generator
from clbench.spec import ONE_DATASET_KINDS, DataSpec, class_blocks, domain_class_problem, task_problem, validation_count

if TYPE_CHECKING:
    from clbench.data.sources import PreparedDataset

__all__ = [
    "ROTATION_RANGE", "Batch", "DatasetLoader", "ImageAugmentation", "InputTransform", "LabelledData", "RawTask",
    "Task", "TaskSequence", "build_tasks", "head_sizes_for", "input_shape_for", "prepared_loader", "raw_tasks",
    "rotate_images", "rotation_angles", "rotation_sources", "stratified_subsample", "task_order", "validation_split",
]


@dataclass(frozen=True)
class RawTask:
    """A task before splitting: numpy arrays and normalisation statistics."""

    name: str
    n_classes: int
    train_images: np.ndarray  # (N, C, H, W) uint8
    train_labels: np.ndarray  # (N,) int64
    test_images: np.ndarray
    test_labels: np.ndarray
    mean: tuple[float, ...]
    std: tuple[float, ...]
    permutation: np.ndarray | None = None  # (D,) for permuted tasks
    rotation: float | None = None  # degrees counter-clockwise, for rotated tasks (applied by `rotate_images`)
    classes: tuple[int, ...] | None = None  # the data set's labels of the task's classes (None: 0..n_classes-1)

    def check(self, validation_fraction: float) -> None:
        """ClbenchError naming the task and its classes if it has one class or a split without samples."""
        problem = task_problem(self.n_classes, len(self.train_labels), len(self.test_labels), validation_fraction)
        if problem is not None:
            classes = self.classes if self.classes is not None else tuple(range(self.n_classes))
            raise ClbenchError(f"task {self.name} (classes {', '.join(map(str, classes))}): {problem}")


DatasetLoader = Callable[[str, str], "PreparedDataset"]  # (name, form) -> the prepared data set


def raw_tasks(spec: DataSpec, seed: int, load: DatasetLoader) -> list[RawTask]:
    """The tasks named by the spec, in their canonical (unshuffled) order."""
    if spec.kind == "mixture":
        return [_whole_dataset(load(name, spec.form)) for name in spec.datasets]
    if spec.kind == "split":
        tasks: list[RawTask] = []
        for name, block in zip(spec.datasets, spec.classes_per_task or ()):
            tasks.extend(_class_blocks(load(name, spec.form), block, spec.remainder))
        return tasks
    if spec.kind == "rotated":
        return _rotations(load(spec.datasets[0], spec.form), spec.n_tasks or 1, seed)
    return _permutations(load(spec.datasets[0], spec.form), spec.n_tasks or 1, seed)


def _whole_dataset(d: PreparedDataset) -> RawTask:
    return RawTask(d.name, d.n_classes, d.train.images, d.train.labels, d.test.images, d.test.labels,
                   tuple(d.mean), tuple(d.std))


def _class_blocks(d: PreparedDataset, block: int, remainder: str) -> list[RawTask]:
    tasks = []
    for blocked in class_blocks(d.name, d.n_classes, block, remainder):
        first = blocked.start
        classes = np.arange(blocked.start, blocked.stop)
        train = np.isin(d.train.labels, classes)
        test = np.isin(d.test.labels, classes)
        name = f"{d.name}:{classes[0]}-{classes[-1]}"
        tasks.append(RawTask(name, len(classes), d.train.images[train], d.train.labels[train] - first,
                             d.test.images[test], d.test.labels[test] - first, tuple(d.mean), tuple(d.std),
                             classes=tuple(int(c) for c in classes)))
    return tasks


def _permutations(d: PreparedDataset, n_tasks: int, seed: int) -> list[RawTask]:
    rng = numpy_generator(seed, "permutations")
    size = int(np.prod(d.train.images.shape[1:]))
    return [
        RawTask(f"{d.name}:perm{k}", d.n_classes, d.train.images, d.train.labels,
                d.test.images, d.test.labels, tuple(d.mean), tuple(d.std), rng.permutation(size))
        for k in range(n_tasks)
    ]


def _rotations(d: PreparedDataset, n_tasks: int, seed: int) -> list[RawTask]:
    return [
        RawTask(f"{d.name}:rot{k}:{angle:.1f}deg", d.n_classes, d.train.images, d.train.labels,
                d.test.images, d.test.labels, tuple(d.mean), tuple(d.std), rotation=float(angle))
        for k, angle in enumerate(rotation_angles(n_tasks, seed))
    ]


def validation_split(n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A seeded shuffle split: (train indices, validation indices), validation = round(fraction * n)."""
    order = rng.permutation(n)
    n_valid = validation_count(n, fraction)
    return np.sort(order[n_valid:]), np.sort(order[:n_valid])


def stratified_subsample(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of a seeded subsample of `size` samples with (up to rounding) the class proportions of `labels`."""
    if size >= len(labels):
        return np.arange(len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    quotas = np.floor(counts / counts.sum() * size).astype(int)
    remainder = size - quotas.sum()
    quotas[np.argsort(-(counts / counts.sum() * size - quotas), kind="stable")[:remainder]] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:q] for c, q in zip(classes, quotas)]
    return np.sort(np.concatenate(chosen))


def task_order(n_tasks: int, shuffle: bool, seed: int) -> list[int]:
    """The seeded order of the tasks (identity when not shuffled)."""
    return list(numpy_generator(seed, "task-order").permutation(n_tasks)) if shuffle else list(range(n_tasks))


def build_tasks(spec: DataSpec, seed: int, load: DatasetLoader, device: torch.device | str = "cpu",
                max_tasks: int | None = None, cache_bytes: int = INPUT_CACHE_BYTES) -> TaskSequence:
    """Build the seeded task sequence: order, validation split, subsamples, tensors on `device`.

    `max_tasks` keeps only the first tasks of the seeded order (`clbench bench` needs two); they are the same
    tensors as in the full sequence, since every seeded stream is consumed task by task in that order.
    `cache_bytes`: the budget of the sequence's kept normalised inputs (`InputCache`; 0: none kept).
    """
    raws = raw_tasks(spec, seed, load)
    order = task_order(len(raws), spec.shuffle_tasks, seed)
    raws = [raws[i] for i in order][:max_tasks]
    if spec.scenario == "domain":
        problem = domain_class_problem([raw.n_classes for raw in raws], [raw.name for raw in raws])
        if problem is not None:
            raise ClbenchError(problem)
    flatten = spec.form == "mnist28"
    transform = _transform(raws, flatten, spec.normalize).to(torch.device(device))
    split_rng = numpy_generator(seed, "validation-split")
    sample_rng = numpy_generator(seed, "subsample")
    cache = InputCache(cache_bytes)
    tasks = tuple(_task(t, raw, spec, transform, split_rng, sample_rng, device, cache) for t, raw in enumerate(raws))
    shape = raws[0].train_images.shape[1:]
    input_shape = (int(np.prod(shape)),) if flatten else tuple(int(s) for s in shape)
    return TaskSequence(tasks, input_shape)


def _transform(raws: Sequence[RawTask], flatten: bool, normalize: bool = True) -> InputTransform:
    """Each task's tables: its data set's mean and std, or 0 and 1 (`data.normalize` false: pixels / 255)."""
    mean = torch.tensor([raw.mean for raw in raws], dtype=torch.float32)
    std = torch.tensor([raw.std for raw in raws], dtype=torch.float32)
    if not normalize:
        mean, std = torch.zeros_like(mean), torch.ones_like(std)
    permutations = None
    if raws[0].permutation is not None:
        permutations = torch.from_numpy(np.stack([raw.permutation for raw in raws])).long()
    return InputTransform(mean, std, permutations, flatten)


def _task(index: int, raw: RawTask, spec: DataSpec, transform: InputTransform, split_rng: np.random.Generator,
          sample_rng: np.random.Generator, device: torch.device | str, cache: InputCache) -> Task:
    raw.check(spec.validation_fraction)
    train_idx, valid_idx = validation_split(len(raw.train_labels), spec.validation_fraction, split_rng)
    if spec.max_train_samples is not None:
        train_idx = train_idx[stratified_subsample(raw.train_labels[train_idx], spec.max_train_samples, sample_rng)]
        n_valid = 0 if spec.validation_fraction == 0 else max(
            1, int(round(len(train_idx) * spec.validation_fraction / (1 - spec.validation_fraction))))
        valid_idx = valid_idx[stratified_subsample(raw.train_labels[valid_idx], n_valid, sample_rng)]
    test_idx = np.arange(len(raw.test_labels))
    if spec.max_test_samples is not None:
        test_idx = stratified_subsample(raw.test_labels, spec.max_test_samples, sample_rng)

    def tensors(images: np.ndarray, labels: np.ndarray, idx: np.ndarray, evaluated: bool) -> LabelledData:
        x = torch.from_numpy(np.ascontiguousarray(images[idx]))
        x = (x if raw.rotation is None else rotate_images(x, raw.rotation)).to(device)
        y = torch.from_numpy(labels[idx].astype(np.int64)).to(device)
        ids = torch.full_like(y, index)
        return LabelledData(x, y, ids, transform, index, cache, evaluated)

    return Task(index, raw.name, raw.n_classes, tensors(raw.train_images, raw.train_labels, train_idx, False),
                tensors(raw.train_images, raw.train_labels, valid_idx, True),
                tensors(raw.test_images, raw.test_labels, test_idx, True))


def prepared_loader(data_dir: Path) -> DatasetLoader:
    """A loader reading the prepared cache of `clbench fetch` (fails with a clear message if missing)."""
    from clbench.data.sources import load_dataset

    return lambda name, form: load_dataset(name, data_dir, form)


def head_sizes_for(spec: DataSpec, n_classes: Callable[[str], int]) -> tuple[int, ...]:
    """Classes per task in canonical order, from the spec and each data set's class count (no data needed)."""
    if spec.kind == "mixture":
        return tuple(n_classes(name) for name in spec.datasets)
    if spec.kind in ONE_DATASET_KINDS:
        return (n_classes(spec.datasets[0]),) * (spec.n_tasks or 1)
    sizes: list[int] = []
    for name, block in zip(spec.datasets, spec.classes_per_task or ()):
        sizes.extend(len(blocked) for blocked in class_blocks(name, n_classes(name), block, spec.remainder))
    return tuple(sizes)


def input_shape_for(spec: DataSpec) -> tuple[int, ...]:
    """The network input shape of a data form: (784,) for mnist28, (3, 32, 32) for image32."""
    return (784,) if spec.form == "mnist28" else (3, 32, 32)
