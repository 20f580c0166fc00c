"""`TrainingInputs`: a training batch gathers rows of its split's inputs normalised once, instead of normalising its
images at every step; the values must be those of the transform, and the kept inputs never change."""

from __future__ import annotations

import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.data.tasks import InputTransform, LabelledData, TrainingInputs


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


def test_mixed_tasks_and_splits_over_the_budget_are_normalised_per_batch() -> None:
    mixed = LabelledData(split_of(0).images, torch.zeros(6, dtype=torch.long), torch.tensor([0, 1] * 3),
                         split_of(0).transform, -1)
    assert TrainingInputs().of(mixed) is None
    assert TrainingInputs(budget_bytes=6 * 4 * 4 - 1).of(split_of(0)) is None  # 6 images x 4 pixels x 4 bytes
    assert TrainingInputs(budget_bytes=6 * 4 * 4).of(split_of(0)) is not None


def test_training_uses_the_kept_inputs_and_learns_the_same_weights() -> None:
    """An epoch with the kept inputs ends with the weights of an epoch that normalises every batch."""
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    weights = []
    for budget in (1 << 30, 0):  # 0: nothing kept
        approach = make_approach("sgd", spec, tasks)
        approach.training_inputs = TrainingInputs(budget)
        approach.learn_task(0, tasks)
        weights.append({name: value.clone() for name, value in approach.network.state_dict().items()})
        assert (approach.training_inputs.inputs is not None) == (budget > 0)
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
