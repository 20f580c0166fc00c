"""The replay memory's kept inputs: the normalised inputs of each stored sample, in the task sequence's
`InputCache`, so that a replayed batch is a gather. A cache: the same values the transform gives, slot for slot,
written through with the images, never in the memory's size or its checkpoints, computed again from the images
after a write without them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_resnet_spec, tiny_spec, tiny_tasks

from clbench.approaches.replay.buffer import ReplayBuffer
from clbench.data.input_cache import InputCache
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import execute
from clbench.run.plan import plan_runs


def numbered(start: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Samples numbered start..start+n-1: uint8 2x2 images of the number, labels = the number, task 0; and
    inputs = 1000 + the number in both of their 2 features (so a slot's input names its sample)."""
    numbers = torch.arange(start, start + n)
    images = numbers.to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone()
    inputs = (1000.0 + numbers.float()).view(n, 1).expand(n, 2).clone()
    return images, numbers, inputs


def offer(buffer: ReplayBuffer, start: int, n: int, generator: torch.Generator, with_inputs: bool = True) -> None:
    images, numbers, inputs = numbered(start, n)
    buffer.add_reservoir(images, numbers, torch.zeros(n, dtype=torch.long), generator,
                         inputs=inputs if with_inputs else None)


class ByHand:
    """A transform written for these tests: 1000 + the image's first pixel + 100 x task, in 2 features; `calls`
    counts the images it normalised."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, images: torch.Tensor, task_ids: torch.Tensor) -> torch.Tensor:
        self.calls.append(int(images.shape[0]))
        return (1000.0 + images[:, 0, 0, 0].float() + 100.0 * task_ids.float()).view(-1, 1).expand(-1, 2).clone()


def cached_buffer(capacity: int, cache: InputCache | None = None) -> tuple[ReplayBuffer, ByHand]:
    buffer, transform = ReplayBuffer(capacity), ByHand()
    buffer.use_input_cache(InputCache() if cache is None else cache, transform)
    return buffer, transform


def test_each_slot_keeps_the_inputs_of_the_sample_it_holds() -> None:
    buffer, transform = cached_buffer(5)
    generator = torch.Generator().manual_seed(3)
    offer(buffer, 0, 7, generator)
    assert buffer.contents().inputs is None  # nothing computed before the first use
    kept = buffer.kept_inputs()
    assert kept is not None and transform.calls == [5]  # computed once, from the 5 stored images
    for start in range(7, 60, 7):  # reservoir replacements land on drawn slots: written through
        offer(buffer, start, 7, generator)
    stored = buffer.contents()
    assert stored.inputs is not None and buffer.seen == 63 and transform.calls == [5]
    assert stored.inputs[:, 0].tolist() == [1000.0 + label for label in stored.labels.tolist()]
    assert stored.labels.tolist() != [0, 1, 2, 3, 4]  # replacements happened
    drawn = buffer.sample(3, torch.Generator().manual_seed(0))
    assert drawn.inputs is not None
    assert drawn.inputs[:, 1].tolist() == [1000.0 + label for label in drawn.labels.tolist()]


def test_a_write_through_keeps_the_rows_a_fresh_normalisation_gives() -> None:
    """Permuted tasks, a memory that fills and then replaces drawn slots: after every write the kept rows equal the
    transform of the stored images, and the entry was computed once (the writes kept it valid)."""
    spec = tiny_spec("mlp", kind="permuted")
    tasks = tiny_tasks(spec)
    train, cache = tasks[1].train, tasks[1].train.cache
    buffer = ReplayBuffer(12)
    buffer.use_input_cache(cache, train.transform)
    generator = torch.Generator().manual_seed(0)
    computed = []
    for step, start in enumerate(range(0, 40, 5)):
        task = step % 2
        batch = tasks[task].train.batch(torch.arange(start, start + 5), training=True)
        buffer.add_reservoir(batch.images, batch.targets, torch.full((5,), task), generator, inputs=batch.inputs)
        kept = buffer.kept_inputs()
        computed.append(kept)
        stored = buffer.contents()
        assert stored.inputs is not None and torch.equal(stored.inputs, train.transform(stored.images,
                                                                                        stored.task_ids))
    assert all(kept is computed[0] for kept in computed)  # one tensor throughout: never computed again
    assert set(buffer.contents().task_ids.tolist()) == {0, 1}


def test_without_a_cache_the_memory_keeps_no_inputs() -> None:
    buffer = ReplayBuffer(4)
    offer(buffer, 0, 6, torch.Generator().manual_seed(1))
    assert buffer.kept_inputs() is None and buffer.sample(2, torch.Generator()).inputs is None
    assert buffer.contents().inputs is None


def test_the_kept_inputs_are_no_part_of_the_memory_size_nor_of_its_checkpoint() -> None:
    (with_inputs, _), without = cached_buffer(4), ReplayBuffer(4)
    offer(with_inputs, 0, 6, torch.Generator().manual_seed(1))
    offer(without, 0, 6, torch.Generator().manual_seed(1), with_inputs=False)
    assert with_inputs.kept_inputs() is not None and without.kept_inputs() is None
    assert with_inputs.nbytes == without.nbytes == 4 * (4 + 8 + 8)  # 2x2 uint8 image, int64 label and task
    assert with_inputs.state_dict().keys() == without.state_dict().keys()
    assert "inputs" not in with_inputs.state_dict()


def test_a_write_without_inputs_leaves_them_to_be_computed_again() -> None:
    buffer, transform = cached_buffer(4)
    generator = torch.Generator().manual_seed(2)
    offer(buffer, 0, 3, generator)
    assert buffer.kept_inputs() is not None and transform.calls == [3]
    offer(buffer, 3, 1, generator, with_inputs=False)  # slot 3 without its inputs: the entry is dropped
    assert buffer.contents().inputs is None
    drawn = buffer.sample(2, generator)
    assert drawn.inputs is not None and transform.calls == [3, 4]  # computed again, from the 4 stored images
    assert drawn.inputs[:, 0].tolist() == [1000.0 + label for label in drawn.labels.tolist()]
    offer(buffer, 4, 30, generator)  # from then on the writes keep them
    stored = buffer.contents()
    assert stored.inputs is not None and transform.calls == [3, 4]
    assert stored.inputs[:, 0].tolist() == [1000.0 + label for label in stored.labels.tolist()]


def test_set_contents_and_a_loaded_checkpoint_compute_the_inputs_again() -> None:
    buffer, _ = cached_buffer(4)
    offer(buffer, 0, 4, torch.Generator().manual_seed(0))
    assert buffer.kept_inputs() is not None
    images, numbers, _ = numbered(10, 2)
    buffer.set_contents(images, numbers, torch.tensor([1, 2]))  # iCaRL's exemplar sets
    assert buffer.contents().inputs is None
    assert buffer.kept_inputs()[:2, 0].tolist() == [1110.0, 1211.0]  # 1000 + n + 100 task

    restored, _ = cached_buffer(4)
    restored.load_state_dict(buffer.state_dict())
    assert restored.contents().inputs is None
    assert torch.equal(restored.kept_inputs()[:2], buffer.contents().inputs)
    empty, _ = cached_buffer(4)
    assert empty.kept_inputs() is None  # nothing stored: nothing to compute


def test_a_checkpoint_loaded_over_kept_inputs_drops_them() -> None:
    """A memory that keeps the inputs of samples 0..3 loads a checkpoint of samples 20..23 (new image tensors, whose
    version counters start anew): none of the old inputs stay; computed again they are the new samples' own."""
    (buffer, _), other = cached_buffer(4), ReplayBuffer(4)
    offer(buffer, 0, 4, torch.Generator().manual_seed(0))
    offer(other, 20, 4, torch.Generator().manual_seed(0), with_inputs=False)
    assert buffer.kept_inputs() is not None
    buffer.load_state_dict(other.state_dict())
    assert buffer.contents().inputs is None and buffer.contents().labels.tolist() == [20, 21, 22, 23]
    assert buffer.sample(4, torch.Generator().manual_seed(1)).inputs[:, 0].sort().values.tolist() == [
        1020.0, 1021.0, 1022.0, 1023.0]  # 1000 + n, task 0


def test_a_memory_handed_another_cache_leaves_the_first() -> None:
    first, second = InputCache(), InputCache()
    buffer, transform = cached_buffer(4, first)
    offer(buffer, 0, 4, torch.Generator().manual_seed(0))
    buffer.kept_inputs()
    buffer.use_input_cache(second, transform)
    assert not first.entries and buffer.kept_inputs() is not None and len(second.entries) == 1


@pytest.mark.parametrize(("method", "scenario"), [("er", "task"), ("derpp", "class"), ("agem", "task")])
def test_a_replayed_batch_has_the_inputs_the_transform_gives_its_images(method: str, scenario: str) -> None:
    spec = tiny_spec("mlp", kind="permuted", scenario=scenario)  # per-task pixel permutations: a gather per task
    tasks = tiny_tasks(spec)
    approach = make_approach(method, spec, tasks, buffer_size=40, replay_batch_size=16)
    approach.begin_task(0, tasks)
    for stage in range(2):
        approach.begin_task(stage, tasks)
        batch = approach.training_batch(tasks[stage].train, torch.arange(30))
        approach.store(batch, torch.zeros(30, sum(tasks.head_sizes)) if method == "derpp" else None)
    replayed = approach.replayed()
    assert replayed is not None and replayed[1].inputs is not None
    batch, memory = replayed
    assert set(memory.task_ids.tolist()) == {0, 1}  # both tasks' permutations in one batch
    assert torch.equal(batch.inputs, tasks[0].train.transform(memory.images, memory.task_ids))


def test_with_augmentation_the_memory_keeps_no_inputs() -> None:
    spec = tiny_resnet_spec(augment=True)
    tasks = tiny_tasks(spec)
    approach = make_approach("er", spec, tasks, buffer_size=20, replay_batch_size=8)
    approach.begin_task(0, tasks)
    approach.store(approach.training_batch(tasks[0].train, torch.arange(10)))
    assert len(approach.buffer) == 10 and approach.buffer.kept_inputs() is None


def run(tmp_path: Path, method: str, scenario: str):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", kind="permuted", training=replace(TINY_TRAINING, max_epochs=2), scenario=scenario)
    spec = replace(spec, approaches={method: {"buffer_size": 30, "replay_batch_size": 16}})
    [plan] = plan_runs(spec, [method], [0], tmp_path)
    return plan, execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=160, n_test=60))


@pytest.mark.parametrize(("method", "scenario"), [("er", "task"), ("derpp", "class"), ("agem", "class")])
def test_a_run_learns_the_same_weights_with_the_kept_inputs_as_with_the_transform(
        method: str, scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[bool] = []
    sample = ReplayBuffer.sample

    def spied(self, batch_size, generator):  # type: ignore[no-untyped-def]
        memory = sample(self, batch_size, generator)
        drawn.append(memory.inputs is not None)
        return memory

    monkeypatch.setattr(ReplayBuffer, "sample", spied)
    plan, kept = run(tmp_path / "kept", method, scenario)
    assert drawn and all(drawn)  # every replayed batch came with its kept inputs
    kept_weights = load_checkpoint(plan.run_dir, 2)["approach"]["network"]
    use_input_cache = ReplayBuffer.use_input_cache
    monkeypatch.setattr(ReplayBuffer, "use_input_cache",
                        lambda self, cache, transform: use_input_cache(self, None, None))
    drawn.clear()
    plan, transformed = run(tmp_path / "transformed", method, scenario)
    assert drawn and not any(drawn)  # every replayed batch normalised by the transform
    weights = load_checkpoint(plan.run_dir, 2)["approach"]["network"]
    assert kept_weights.keys() == weights.keys()
    assert all(torch.equal(kept_weights[name], weights[name]) for name in weights)
    assert [row["accuracy"] for row in kept.rows] == [row["accuracy"] for row in transformed.rows]
    assert [row["memory_bytes"] for row in kept.rows] == [row["memory_bytes"] for row in transformed.rows]
