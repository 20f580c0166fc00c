"""The data `clbench bench` times on: the first two tasks of a benchmark's seeded sequence, from the prepared cache
when it holds them, else synthetic images of the real shapes and sizes (a spec's own data sets are always their
real files), and the sequence cut to the batches a measurement needs."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from clbench.data.batches import LabelledData, TaskSequence
from clbench.data.custom import custom_datasets, load_custom, n_classes_lookup
from clbench.data.sources import ImageSet, PreparedDataset, get_source
from clbench.data.tasks import DatasetLoader, build_tasks, head_sizes_for, task_order
from clbench.errors import DataNotFoundError
from clbench.seeding import numpy_generator
from clbench.spec import ONE_DATASET_KINDS, BenchmarkSpec, DataSpec, class_blocks

FORM_SHAPES = {"mnist28": (1, 28, 28), "image32": (3, 32, 32)}
BENCH_TASKS = 2  # task 0 for the epoch, task 1 for the stage-1 step


# ---------------------------------------------------------------------------------------------- data
def raw_task_datasets(data: DataSpec, n_classes: Callable[[str], int]) -> list[str]:
    """The data set of each task in canonical (unshuffled) order, from each data set's class count."""
    if data.kind == "mixture":
        return list(data.datasets)
    if data.kind in ONE_DATASET_KINDS:
        return [data.datasets[0]] * (data.n_tasks or 1)
    names: list[str] = []
    for name, block in zip(data.datasets, data.classes_per_task or ()):
        names += [name] * len(class_blocks(name, n_classes(name), block, data.remainder))
    return names


def sequence_head_sizes(spec: BenchmarkSpec, seed: int) -> tuple[int, ...]:
    """Classes per task of the whole seeded sequence (the network gets every head, as in a run)."""
    sizes = head_sizes_for(spec.data, n_classes_lookup(spec))
    return tuple(sizes[i] for i in task_order(len(sizes), spec.data.shuffle_tasks, seed))


def first_datasets(spec: BenchmarkSpec, seed: int, n_tasks: int = BENCH_TASKS) -> set[str]:
    """The data sets of the first `n_tasks` tasks in the seeded order."""
    names = raw_task_datasets(spec.data, n_classes_lookup(spec))
    return {names[i] for i in task_order(len(names), spec.data.shuffle_tasks, seed)[:n_tasks]}


def synthetic_loader(full_size: Collection[str], seed: int = 0) -> DatasetLoader:
    """A loader of random uint8 images in the shapes of the real data sets, with balanced labels.

    The data sets in `full_size` get their real (paper) train/test sizes, so that an epoch has its real
    length; the others get two images per class (they are loaded but not used by the bench).
    """

    def load(name: str, form: str) -> PreparedDataset:
        source = get_source(name)  # built-in data sets only (see `with_own_datasets`)
        normalisation = source.normalisation(form)
        n_train, n_test = source.paper_sizes if name in full_size else (2 * source.n_classes, source.n_classes)
        rng = numpy_generator(seed, f"synthetic:{name}")

        def make(n: int) -> ImageSet:
            images = rng.integers(0, 256, size=(n, *FORM_SHAPES[form]), dtype=np.uint8)
            labels = rng.permutation(np.arange(n) % source.n_classes).astype(np.int64)
            return ImageSet(images, labels)

        return PreparedDataset(name, source.n_classes, make(n_train), make(n_test), normalisation.mean,
                               normalisation.std)

    return load


def bench_tasks(spec: BenchmarkSpec, seed: int, device: torch.device, data_dir: Path | None = None,
                loader: DatasetLoader | None = None, loader_data: str = "real") -> tuple[TaskSequence, str]:
    """The first two tasks of the seeded sequence on `device`, and "real" or "synthetic".

    With a `loader`, its data are used (labelled `loader_data`); otherwise the prepared cache in `data_dir`
    when every built-in data set of the benchmark is there, else synthetic data of the real sizes. A spec's own
    data sets are always their real files (`with_own_datasets`).
    """
    if loader is not None:
        return build_tasks(spec.data, seed, loader, device, max_tasks=BENCH_TASKS), loader_data
    if data_dir is not None:
        from clbench.data.tasks import prepared_loader

        try:
            cached = with_own_datasets(spec, data_dir, prepared_loader(data_dir))
            return build_tasks(spec.data, seed, cached, device, max_tasks=BENCH_TASKS), "real"
        except DataNotFoundError:
            pass
    synthetic = synthetic_loader(first_datasets(spec, seed), seed)
    if data_dir is not None:
        synthetic = with_own_datasets(spec, data_dir, synthetic)
    return build_tasks(spec.data, seed, synthetic, device, max_tasks=BENCH_TASKS), "synthetic"


def with_own_datasets(spec: BenchmarkSpec, data_dir: Path, loader: DatasetLoader) -> DatasetLoader:
    """`loader`, with the spec's own data sets (`datasets:`) read from their files (converted into the cache of
    `data_dir` when needed, as `clbench train` does): they are local, so the bench never replaces them."""
    own = custom_datasets(spec)
    if not own:
        return loader

    def load(name: str, form: str) -> PreparedDataset:
        return load_custom(own[name], data_dir, form) if name in own else loader(name, form)

    return load


def head(data: LabelledData, n: int) -> LabelledData:
    """The first `n` samples of a split."""
    return replace(data, images=data.images[:n], labels=data.labels[:n], task_ids=data.task_ids[:n])


def shortened(tasks: TaskSequence, train_sizes: Sequence[int], valid_sizes: Sequence[int]) -> TaskSequence:
    """The sequence with task t's training split cut to `train_sizes[t]` and validation to `valid_sizes[t]`."""
    cut = [replace(task, train=head(task.train, train_sizes[t]), valid=head(task.valid, valid_sizes[t]))
           for t, task in enumerate(tasks.tasks)]
    return replace(tasks, tasks=tuple(cut))
