"""The replay memory's kept inputs: the normalised inputs of each stored sample, beside its uint8 image, so that a
replayed batch is a gather. A cache: the same values the transform gives, slot for slot, never in the memory's
size or its checkpoints, dropped whenever some slot would lack them and computed again from the images."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_resnet_spec, tiny_spec, tiny_tasks

from clbench.approaches.replay.buffer import ReplayBuffer
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


def by_hand(images: torch.Tensor, task_ids: torch.Tensor) -> torch.Tensor:
    """A transform written for these tests: 1000 + the image's first pixel + 100 x task, in 2 features."""
    return (1000.0 + images[:, 0, 0, 0].float() + 100.0 * task_ids.float()).view(-1, 1).expand(-1, 2).clone()


def test_each_slot_keeps_the_inputs_of_the_sample_it_holds() -> None:
    buffer = ReplayBuffer(5)
    generator = torch.Generator().manual_seed(3)
    for start in range(0, 60, 7):  # the memory fills, then reservoir replacements land on drawn slots
        offer(buffer, start, 7, generator)
    stored = buffer.contents()
    assert stored.inputs is not None and buffer.seen == 63
    assert stored.inputs[:, 0].tolist() == [1000.0 + label for label in stored.labels.tolist()]
    assert stored.labels.tolist() != [0, 1, 2, 3, 4]  # replacements happened
    drawn = buffer.sample(3, torch.Generator().manual_seed(0))
    assert drawn.inputs is not None
    assert drawn.inputs[:, 1].tolist() == [1000.0 + label for label in drawn.labels.tolist()]


def test_the_kept_inputs_are_no_part_of_the_memory_size_nor_of_its_checkpoint() -> None:
    with_inputs, without = ReplayBuffer(4), ReplayBuffer(4)
    offer(with_inputs, 0, 6, torch.Generator().manual_seed(1))
    offer(without, 0, 6, torch.Generator().manual_seed(1), with_inputs=False)
    assert with_inputs.inputs is not None and without.inputs is None
    assert with_inputs.nbytes == without.nbytes == 4 * (4 + 8 + 8)  # 2x2 uint8 image, int64 label and task
    assert with_inputs.state_dict().keys() == without.state_dict().keys()
    assert "inputs" not in with_inputs.state_dict()


def test_a_write_without_inputs_drops_them_and_they_stay_dropped_until_filled_again() -> None:
    buffer = ReplayBuffer(4)
    generator = torch.Generator().manual_seed(2)
    offer(buffer, 0, 3, generator)
    offer(buffer, 3, 1, generator, with_inputs=False)  # slot 3 has no inputs: none are kept
    assert buffer.inputs is None and buffer.sample(2, generator).inputs is None
    offer(buffer, 4, 5, generator)  # the filled slots still lack theirs: nothing kept
    assert buffer.inputs is None
    buffer.fill_inputs(by_hand)
    stored = buffer.contents()
    assert stored.inputs is not None
    assert stored.inputs[:, 0].tolist() == [1000.0 + label for label in stored.labels.tolist()]
    offer(buffer, 9, 30, generator)  # from then on the writes keep them
    stored = buffer.contents()
    assert stored.inputs is not None
    assert stored.inputs[:, 0].tolist() == [1000.0 + label for label in stored.labels.tolist()]


def test_set_contents_and_a_loaded_checkpoint_drop_the_inputs_and_fill_inputs_computes_them() -> None:
    buffer = ReplayBuffer(4)
    offer(buffer, 0, 4, torch.Generator().manual_seed(0))
    images, numbers, _ = numbered(10, 2)
    buffer.set_contents(images, numbers, torch.tensor([1, 2]))  # iCaRL's exemplar sets
    assert buffer.inputs is None
    buffer.fill_inputs(by_hand)
    stored = buffer.contents()
    assert stored.inputs is not None and stored.inputs[:, 0].tolist() == [1110.0, 1211.0]  # 1000 + n + 100 task

    restored = ReplayBuffer(4)
    restored.load_state_dict(buffer.state_dict())
    assert restored.inputs is None
    restored.fill_inputs(by_hand)
    assert torch.equal(restored.contents().inputs, stored.inputs)
    empty = ReplayBuffer(4)
    empty.fill_inputs(by_hand)  # nothing stored: nothing to compute
    assert empty.inputs is None


def test_a_checkpoint_loaded_over_kept_inputs_drops_them() -> None:
    """A memory that keeps the inputs of samples 0..3 loads a checkpoint of samples 20..23: none of the old inputs
    stay (they would be replayed beside the new images); filled again they are the new samples' own."""
    buffer, other = ReplayBuffer(4), ReplayBuffer(4)
    offer(buffer, 0, 4, torch.Generator().manual_seed(0))
    offer(other, 20, 4, torch.Generator().manual_seed(0), with_inputs=False)
    assert buffer.inputs is not None
    buffer.load_state_dict(other.state_dict())
    assert buffer.inputs is None and buffer.contents().labels.tolist() == [20, 21, 22, 23]
    assert buffer.sample(2, torch.Generator().manual_seed(1)).inputs is None
    buffer.fill_inputs(by_hand)
    assert buffer.contents().inputs[:, 0].tolist() == [1020.0, 1021.0, 1022.0, 1023.0]  # 1000 + n, task 0


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
    assert len(approach.buffer) == 10 and approach.buffer.inputs is None


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
    monkeypatch.setattr(ReplayBuffer, "fill_inputs", lambda self, transform: None)
    original = ReplayBuffer.add_reservoir

    def without_inputs(self, images, labels, task_ids, generator, logits=None, inputs=None):  # type: ignore[no-untyped-def]
        assert self.inputs is None
        original(self, images, labels, task_ids, generator, logits)

    monkeypatch.setattr(ReplayBuffer, "add_reservoir", without_inputs)
    plan, transformed = run(tmp_path / "transformed", method, scenario)
    weights = load_checkpoint(plan.run_dir, 2)["approach"]["network"]
    assert kept_weights.keys() == weights.keys()
    assert all(torch.equal(kept_weights[name], weights[name]) for name in weights)
    assert [row["accuracy"] for row in kept.rows] == [row["accuracy"] for row in transformed.rows]
    assert [row["memory_bytes"] for row in kept.rows] == [row["memory_bytes"] for row in transformed.rows]
