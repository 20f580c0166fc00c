"""Task construction and the seeding contract."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from synthetic import synthetic_loader, tiny_spec

from clbench.data.tasks import build_tasks, head_sizes_for, stratified_subsample, task_order, validation_split
from clbench.errors import SpecError
from clbench.spec import DataSpec, class_blocks
from clbench.spec.fields import identity_dict


def test_split_relabels_class_blocks() -> None:
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(5,), shuffle_tasks=False)
    tasks = build_tasks(spec, 0, synthetic_loader())
    assert tasks.names == ("mnist:0-4", "mnist:5-9") and tasks.head_sizes == (5, 5)
    for task in tasks.tasks:
        assert task.train.labels.min() >= 0 and task.train.labels.max() <= 4
    assert tasks.input_shape == (784,)


def test_validation_split_is_held_out_and_sized() -> None:
    spec = DataSpec(kind="mixture", datasets=("cifar10",), form="image32")
    task = build_tasks(spec, 3, synthetic_loader(n_train=1000))[0]
    assert len(task.valid) == 150 and len(task.train) == 850
    train_rows = {bytes(x) for x in task.train.images.numpy()}
    assert not any(bytes(x) in train_rows for x in task.valid.images.numpy())


def test_permuted_tasks_apply_their_own_permutation() -> None:
    spec = tiny_spec("mlp", kind="permuted")
    tasks = build_tasks(spec.data, 0, synthetic_loader())
    batch0 = tasks[0].test.batch(slice(0, 4))
    batch1 = tasks[1].test.batch(slice(0, 4))
    assert batch0.inputs.shape == (4, 784)
    assert not torch.equal(batch0.inputs, batch1.inputs)
    assert torch.allclose(batch0.inputs.sort(1).values, batch1.inputs.sort(1).values)  # same pixels, permuted


def test_normalize_false_feeds_pixels_over_255_and_true_the_standardised_pixels() -> None:
    """`data.normalize`: false gives Mammoth's seq-mnist inputs (uint8 / 255); true subtracts the data set's mean
    and divides by its std. Expected values from the stored uint8 images and the data set's own statistics."""
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(5,), shuffle_tasks=False)
    raw = build_tasks(replace(spec, normalize=False), 0, synthetic_loader())[0].test
    normalised = build_tasks(spec, 0, synthetic_loader())[0].test
    images = raw.images[:3].reshape(3, -1).double()
    assert torch.allclose(raw.batch(slice(0, 3)).inputs.double(), images / 255, atol=1e-7)
    mean, std = synthetic_loader()("mnist", "mnist28").mean[0], synthetic_loader()("mnist", "mnist28").std[0]
    assert torch.allclose(normalised.batch(slice(0, 3)).inputs.double(), (images / 255 - mean) / std, atol=1e-5)


def test_normalize_left_at_its_default_keeps_the_run_identity() -> None:
    """A field added after results were stored: at its default it is not in the hashed config; false is."""
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(5,))
    assert "normalize" not in identity_dict(spec)
    assert identity_dict(replace(spec, normalize=False))["normalize"] is False


def test_stratified_subsample_keeps_class_proportions() -> None:
    labels = np.array([0] * 600 + [1] * 300 + [2] * 100)
    chosen = stratified_subsample(labels, 100, np.random.default_rng(0))
    assert len(chosen) == 100 and np.bincount(labels[chosen]).tolist() == [60, 30, 10]


def test_max_train_samples_subsamples_each_task() -> None:
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(5,), max_train_samples=50)
    tasks = build_tasks(spec, 0, synthetic_loader(n_train=400))
    assert all(len(task.train) == 50 for task in tasks.tasks)


def test_same_seed_same_tasks_other_seed_other_tasks() -> None:
    spec = DataSpec(kind="mixture", datasets=("cifar10", "svhn", "mnist"), form="image32")
    a, b, c = (build_tasks(spec, seed, synthetic_loader()) for seed in (0, 0, 1))
    assert a.names == b.names
    assert all(torch.equal(x.train.images, y.train.images) for x, y in zip(a.tasks, b.tasks))
    different_order = a.names != c.names
    different_split = not torch.equal(a[0].valid.labels, c[[t.name for t in c.tasks].index(a[0].name)].valid.labels)
    assert different_order or different_split


def test_validation_split_function_partitions() -> None:
    train, valid = validation_split(100, 0.15, np.random.default_rng(0))
    assert len(valid) == 15 and sorted(np.concatenate([train, valid]).tolist()) == list(range(100))


def test_incremental_cifar_builds_ten_seeded_class_blocks() -> None:
    from synthetic import synthetic_dataset

    from clbench.spec import load_benchmark

    def load(name: str, form: str):  # type: ignore[no-untyped-def]
        classes = {"cifar10": 10, "cifar100": 100}[name]
        return synthetic_dataset(name, classes, 2000, 400, (3, 32, 32), seed=classes)

    spec = load_benchmark("cifar-incremental").data
    tasks = build_tasks(spec, 0, load)
    assert len(tasks) == 10 and sorted(tasks.head_sizes) == [2] * 5 + [20] * 5
    assert {"cifar10:0-1", "cifar10:8-9", "cifar100:0-19", "cifar100:80-99"} <= set(tasks.names)
    assert tasks.names != tuple(sorted(tasks.names))  # seeded order, not the canonical one
    assert build_tasks(spec, 1, load).names != tasks.names
    for task in tasks.tasks:
        assert int(task.train.labels.max()) == task.n_classes - 1 and task.train.images.shape[1:] == (3, 32, 32)


def test_mixture8_orders_its_eight_data_sets_by_seed() -> None:
    from clbench.spec import load_benchmark

    spec = load_benchmark("mixture8").data
    orders = {tuple(spec.datasets[i] for i in task_order(8, True, seed)) for seed in range(5)}
    assert all(sorted(order) == sorted(spec.datasets) for order in orders) and len(orders) == 5


def test_class_blocks_partition_the_classes() -> None:
    assert class_blocks("mnist", 10, 5) == [range(0, 5), range(5, 10)]
    assert class_blocks("cifar100", 100, 20) == [range(0, 20), range(20, 40), range(40, 60), range(60, 80),
                                                 range(80, 100)]
    assert class_blocks("mnist", 10, 10) == [range(0, 10)]


@pytest.mark.parametrize("block, left", [(3, 1), (4, 2), (20, 10)])
def test_split_leaving_a_remainder_is_an_error(block: int, left: int) -> None:
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(block,),
                    shuffle_tasks=False)
    expected = (rf"is {block} for mnist, which has 10 classes: blocks of {block} leave {left} class"
                r".*divides 10 \(2, 5, 10\)")
    with pytest.raises(SpecError, match=expected):
        build_tasks(spec, 0, synthetic_loader())
    with pytest.raises(SpecError, match=expected):
        head_sizes_for(spec, lambda name: 10)


@pytest.mark.parametrize("remainder, expected", [
    ("keep", [range(0, 4), range(4, 8), range(8, 10)]),
    ("drop", [range(0, 4), range(4, 8)]),
    ("merge", [range(0, 4), range(4, 10)]),
])
def test_remainder_options_say_what_happens_to_the_rest(remainder: str, expected: list[range]) -> None:
    assert class_blocks("mnist", 10, 4, remainder) == expected
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(4,), shuffle_tasks=False,
                    remainder=remainder)
    tasks = build_tasks(spec, 0, synthetic_loader())
    assert tasks.names == tuple(f"mnist:{r.start}-{r.stop - 1}" for r in expected)
    assert tasks.head_sizes == head_sizes_for(spec, lambda name: 10) == tuple(len(r) for r in expected)
    assert tasks.tasks[-1].test.labels.max() == len(expected[-1]) - 1  # relabelled from 0 within the task


def test_drop_with_no_full_block_is_an_error() -> None:
    assert class_blocks("mnist", 10, 20, "merge") == [range(0, 10)]
    with pytest.raises(SpecError, match="blocks of 20 leave 10 class"):
        class_blocks("mnist", 10, 20, "drop")
