"""`TrainingInputs`: a training batch gathers rows of its split's inputs normalised once, instead of normalising its
images at every step; the values must be those of the transform, and the kept inputs never change."""

from __future__ import annotations

import pytest
import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.data.batches import LabelledData
from clbench.data.tasks import InputCache, TrainingInputs
from clbench.data.transform import InputTransform


def split_of(task: int, n: int = 6) -> LabelledData:
    """n images of 1x2x2 pixels of task `task` (of 2), normalised by hand-picked means and stds, pixels permuted."""
    images = torch.arange(n * 4, dtype=torch.uint8).reshape(n, 1, 2, 2) * 10
    transform = InputTransform(torch.tensor([[0.1], [0.5]]), torch.tensor([[0.2], [0.25]]),
                               torch.tensor([[3, 2, 1, 0], [0, 1, 2, 3]]), flatten=True)
    return LabelledData(images, torch.arange(n) % 2, torch.full((n,), task), transform, task)


def test_a_batch_has_the_transforms_values_by_hand() -> None:
    data, kept = split_of(0), TrainingInputs()
    indices = torch.tensor([4, 1])
    batch = data.batch(indices, training_inputs=kept)
    # image 4 is 160, 170, 180, 190 (x10 of 16..19), image 1 is 40, 50, 60, 70; task 0: (x/255 - 0.1) / 0.2, reversed
    expected = torch.tensor([[190, 180, 170, 160], [70, 60, 50, 40]]) / 255.0
    torch.testing.assert_close(batch.inputs, (expected - 0.1) / 0.2)
    assert torch.equal(batch.inputs, data.batch(indices).inputs)  # bit for bit the per-batch transform's
    assert torch.equal(batch.images, data.images[[4, 1]]) and torch.equal(batch.targets, torch.tensor([0, 1]))


def test_the_kept_inputs_are_computed_once_per_split_and_never_changed_through_a_batch() -> None:
    data, kept = split_of(1), TrainingInputs()
    first = kept.of(data)
    assert first is not None and kept.of(data) is first  # once per split
    assert torch.equal(first, data.transform(data.images, 1))  # task 1's normalisation and permutation
    before = first.clone()
    data.batch(torch.tensor([0, 2]), training_inputs=kept).inputs.add_(1.0)  # a batch is a copy
    assert torch.equal(kept.of(data), before)
    other = split_of(1)
    assert kept.of(other) is not first  # another split: its own inputs, the last ones dropped


def test_a_split_of_mixed_tasks_keeps_each_samples_own_tasks_inputs() -> None:
    """Joint training's and iCaRL's stage splits: each row normalised and permuted by its own task's tables."""
    mixed = LabelledData(split_of(0).images, torch.zeros(6, dtype=torch.long), torch.tensor([0, 1] * 3),
                         split_of(0).transform, -1)
    kept = TrainingInputs()
    batch = mixed.batch(torch.tensor([4, 1]), training_inputs=kept)
    # image 4 (task 0) is 160..190: (x/255 - 0.1) / 0.2, reversed; image 1 (task 1) is 40..70: (x/255 - 0.5) / 0.25
    expected = torch.stack([(torch.tensor([190, 180, 170, 160]) / 255.0 - 0.1) / 0.2,
                            (torch.tensor([40, 50, 60, 70]) / 255.0 - 0.5) / 0.25])
    torch.testing.assert_close(batch.inputs, expected)
    assert torch.equal(batch.inputs, mixed.batch(torch.tensor([4, 1])).inputs)  # the per-batch transform's bits
    assert batch.task == -1 and batch.task_ids is not None and batch.task_ids.tolist() == [0, 1]
    assert torch.equal(batch.images, mixed.images[[4, 1]])


@pytest.mark.parametrize("rows", [1, 4, 5, 6, 100])
def test_a_whole_split_is_normalised_a_few_rows_at_a_time_with_the_values_of_one_call(rows: int) -> None:
    """`InputTransform.whole` (what the caches fill themselves with): the bits of one call on the whole split, for
    one task and for a task per row, and never more than `rows` images per call (no full-size temporaries)."""
    data = split_of(1, n=11)
    transform = data.transform
    sizes: list[int] = []

    class Counting(InputTransform):
        def __call__(self, images: torch.Tensor, task: int | torch.Tensor) -> torch.Tensor:
            sizes.append(images.shape[0])
            return transform(images, task)

    counting = Counting(transform.mean, transform.std, transform.permutations, transform.flatten)
    mixed = torch.tensor([0, 1] * 5 + [0])
    for task in (1, mixed):
        sizes.clear()
        whole = counting.whole(data.images, task, rows=rows)
        assert torch.equal(whole, transform(data.images, task))
        assert max(sizes) == min(rows, 11) and sum(sizes) == 11
    assert torch.equal(counting.whole(data.images, mixed, rows=4)[[0, 1]],
                       torch.stack([transform(data.images[:1], 0)[0], transform(data.images[1:2], 1)[0]]))


def test_both_caches_fill_themselves_a_chunk_of_images_at_a_time() -> None:
    sizes: list[int] = []

    class Counting(InputTransform):
        def __call__(self, images: torch.Tensor, task: int | torch.Tensor) -> torch.Tensor:
            sizes.append(images.shape[0])
            return super().__call__(images, task)

    plain = split_of(0).transform
    counting = Counting(plain.mean, plain.std, plain.permutations, plain.flatten)
    images = torch.randint(0, 256, (2500, 1, 2, 2), dtype=torch.uint8)
    data = LabelledData(images, torch.zeros(2500, dtype=torch.long), torch.zeros(2500, dtype=torch.long), counting, 0)
    for fill in (lambda: InputCache().inputs(data), lambda: TrainingInputs().of(data)):
        sizes.clear()
        kept = fill()
        assert kept is not None and torch.equal(kept, plain(images, 0))
        assert sizes == [1024, 1024, 452]


def test_kept_evaluation_inputs_written_into_are_computed_again(caplog: pytest.LogCaptureFixture) -> None:
    cache = InputCache()
    plain = split_of(0)
    data = LabelledData(plain.images, plain.labels, plain.task_ids, plain.transform, 0, cache)
    kept = cache.inputs(data)
    assert kept is not None and cache.inputs(data) is kept  # kept: the same tensor while unchanged
    data.batch(slice(0, 2)).inputs.add_(1.0)  # an approach writing into a batch, a view of the kept inputs
    with caplog.at_level("WARNING"):
        again = cache.inputs(data)
    assert again is not kept and torch.equal(again, data.transform(data.images, 0))
    assert "changed in place" in caplog.text and cache.inputs(data) is again


def test_splits_over_the_budget_are_normalised_per_batch() -> None:
    assert TrainingInputs(budget_bytes=6 * 4 * 4 - 1).of(split_of(0)) is None  # 6 images x 4 pixels x 4 bytes
    assert TrainingInputs(budget_bytes=6 * 4 * 4).of(split_of(0)) is not None


@pytest.mark.parametrize(("method", "stage"), [("sgd", 0), ("joint", 1)])
def test_training_uses_the_kept_inputs_and_learns_the_same_weights(method: str, stage: int) -> None:
    """An epoch with the kept inputs ends with the weights of an epoch that normalises every batch (joint at its
    second stage: a split of two permuted tasks)."""
    spec = tiny_spec("mlp", kind="permuted")
    tasks = tiny_tasks(spec)
    weights = []
    for budget in (1 << 30, 0):  # 0: nothing kept
        approach = make_approach(method, spec, tasks)
        approach.training_inputs = TrainingInputs(budget)
        approach.learn_task(stage, tasks)
        weights.append({name: value.clone() for name, value in approach.network.state_dict().items()})
        assert (approach.training_inputs.inputs is not None) == (budget > 0)
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
