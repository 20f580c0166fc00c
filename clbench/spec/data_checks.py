"""The rules of a spec's `data:` section: which data sets, class blocks of a split, the domain scenario's equal
tasks, the forms a data set has; and the per-task checks (`task_problem`) that task construction shares.

Built-in data sets are checked here against the catalogue (`clbench.spec.catalogue`); a spec's own data sets are
checked when their tasks are built (`clbench.data.tasks.build_tasks`).
"""

from __future__ import annotations

from collections.abc import Sequence

from clbench.errors import SpecError
from clbench.spec.catalogue import CATALOGUE, DATASET_NAMES, datasets_with_form
from clbench.spec.fields import origin_of
from clbench.spec.sections import DataSpec

ONE_DATASET_KINDS = ("permuted", "rotated")  # kinds whose every task is all of one data set, transformed

MIN_TASK_CLASSES = 2  # a one-class task is 100% accurate for every method, `random` included


def class_blocks(dataset: str, n_classes: int, block: int, remainder: str = "error") -> list[range]:
    """Classes 0..n_classes-1 in consecutive blocks of `block` >= 1 (the tasks of a split data set).

    When `block` does not divide `n_classes`, `remainder` says what happens to the rest (`data.remainder`):
    error (SpecError: [3] on MNIST would leave `mnist:9-9` over), keep (a smaller last task), drop (the rest is
    not used) or merge (the rest joins the last full block). A block of one class is a SpecError: a one-class
    task is trivially 100% accurate.
    """
    blocks = _class_blocks(dataset, n_classes, block, remainder)
    single = next((blocked for blocked in blocks if len(blocked) < MIN_TASK_CLASSES), None)
    if single is not None:
        raise SpecError(f"`data.classes_per_task` is {block} for {dataset} ({n_classes} classes, remainder "
                        f"{remainder}): task {dataset}:{single.start}-{single.stop - 1} would have one class; a task "
                        f"needs at least two classes (with one, every method scores 100%)")
    return blocks


def _class_blocks(dataset: str, n_classes: int, block: int, remainder: str) -> list[range]:
    rest = n_classes % block
    full = [range(first, first + block) for first in range(0, n_classes - rest, block)]
    if rest == 0:
        return full
    if remainder == "keep" or (remainder == "merge" and not full):
        return [*full, range(n_classes - rest, n_classes)]
    if remainder == "merge":
        return [*full[:-1], range(full[-1].start, n_classes)]
    if remainder == "drop" and full:
        return full
    divisors = ", ".join(str(d) for d in range(MIN_TASK_CLASSES, n_classes + 1) if n_classes % d == 0)
    raise SpecError(f"`data.classes_per_task` is {block} for {dataset}, which has {n_classes} classes: blocks of "
                    f"{block} leave {rest} class(es) over; use a block size that divides {n_classes} ({divisors}) "
                    f"or set `data.remainder` to keep, drop or merge (now {remainder})")


def validation_count(n_train: int, fraction: float) -> int:
    """How many of a task's `n_train` training samples are held out for validation (`data.validation_fraction`)."""
    return int(round(fraction * n_train))


def task_problem(n_classes: int, n_train: int, n_test: int, validation_fraction: float) -> str | None:
    """Why a task cannot be trained and scored (None if it can): fewer than two classes, or a split without samples.

    A task with no test samples scored 0.0 and dragged every mean down; one with no training or validation
    samples trained nothing. `n_train` is the task's training split before the validation hold-out. A fraction of 0
    asks for no validation split (the online protocol), so an empty one is then what was asked for.
    """
    if n_classes < MIN_TASK_CLASSES:
        return "it has one class; a task needs at least two classes (with one, every method scores 100%)"
    n_valid = validation_count(n_train, validation_fraction)
    sizes = {"training": n_train - n_valid, "validation": n_valid, "test": n_test}
    if validation_fraction == 0:
        sizes.pop("validation")
    empty = [split for split, size in sizes.items() if size <= 0]
    if not empty:
        return None
    counts = ", ".join(f"{split} {size}" for split, size in sizes.items())
    return (f"no {' and no '.join(empty)} samples ({counts}, validation = {validation_fraction:g} of {n_train}); "
            f"every task needs samples in each split")


def _check_class_blocks(data: DataSpec, source: str) -> None:
    """The split's block sizes against the class counts of the built-in data sets (others: when loaded).

    `source` names where `data.classes_per_task` came from: the file, or the `--set`/`--grid` option.
    """
    for name, block in zip(data.datasets, data.classes_per_task or ()):
        if name in DATASET_NAMES:
            try:
                class_blocks(name, CATALOGUE[name].n_classes, block, data.remainder)
            except SpecError as error:
                raise SpecError(f"{source}: {error}") from None


def check_data(data: DataSpec, source: str, own_datasets: tuple[str, ...] = (),
               origins: dict[str, str] | None = None) -> None:
    """SpecError if the `data:` section breaks a rule; `own_datasets`: the names the spec declares under `datasets:`.

    `source` is the spec file; `origins` (dotted key -> the `--set`/`--grid` option that set it) names an option
    instead where one gave the value.
    """
    known = (*DATASET_NAMES, *own_datasets)
    for name in data.datasets:
        if name not in known:
            raise SpecError(f"{origin_of('data.datasets', source, origins or {})}: `data.datasets`: unknown data "
                            f"set {name}; known: {', '.join(known)} (declare your own under `datasets:`)")
    if data.kind == "split" and (data.classes_per_task is None or len(data.classes_per_task) != len(data.datasets)):
        raise SpecError(f"{source}: `data.classes_per_task` needs one value per data set for kind split")
    if data.kind == "split":
        _check_class_blocks(data, origin_of("data.classes_per_task", source, origins or {}))
    if data.kind in ONE_DATASET_KINDS and (data.n_tasks is None or len(data.datasets) != 1):
        raise SpecError(f"{source}: kind {data.kind} needs exactly one data set and `data.n_tasks`")
    if data.scenario == "domain":
        _check_domain_classes(data, origin_of("data.scenario", source, origins or {}))
    _check_form(data, source, own_datasets)
    if data.augment and data.form != "image32":
        raise SpecError(f"{origin_of('data.augment', source, origins or {})}: `data.augment` is the random crop and "
                        f"flip of 3x32x32 images (data.form image32); it is not defined for data.form {data.form}")


def _check_form(data: DataSpec, source: str, own_datasets: tuple[str, ...]) -> None:
    """SpecError if a built-in data set is not prepared in `data.form` (mnist28: mnist and fashion-mnist only); a
    spec's own data sets come in every form."""
    with_form = datasets_with_form(data.form)
    if not set(data.datasets) <= {*with_form, *own_datasets}:
        raise SpecError(f"{source}: `data.form` {data.form} is only for {', '.join(with_form)} and a spec's own data "
                        f"sets")


def domain_class_problem(class_counts: Sequence[int], names: Sequence[str]) -> str | None:
    """Why a task sequence cannot run in the domain scenario (None if it can): its tasks' class counts differ.

    The domain scenario gives class c of every task output unit c of one shared head, so every task must have the
    same number of classes.
    """
    if len(set(class_counts)) <= 1:
        return None
    counts = ", ".join(f"{name} {count}" for name, count in zip(names, class_counts))
    return (f"data.scenario domain needs the same number of classes in every task (class c of every task is output "
            f"c of one shared head); the tasks have {counts} classes: use data.scenario task or class, or tasks of "
            f"equal size")


def _check_domain_classes(data: DataSpec, source: str) -> None:
    """SpecError (one line) if the built-in data sets' tasks of a domain-scenario spec have different class counts;
    a spec's own data sets are checked when their tasks are built (`clbench.data.tasks.build_tasks`)."""
    if data.kind in ONE_DATASET_KINDS or not set(data.datasets) <= set(DATASET_NAMES):
        return
    counts, names = [], []
    if data.kind == "mixture":
        for name in data.datasets:
            counts.append(CATALOGUE[name].n_classes)
            names.append(name)
    else:
        for name, block in zip(data.datasets, data.classes_per_task or ()):
            for blocked in class_blocks(name, CATALOGUE[name].n_classes, block, data.remainder):
                counts.append(len(blocked))
                names.append(f"{name}:{blocked.start}-{blocked.stop - 1}")
    problem = domain_class_problem(counts, names)
    if problem is not None:
        raise SpecError(f"{source}: {problem}")
