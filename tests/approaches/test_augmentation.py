"""`data.augment` in the loop: which batches are cropped and flipped, from which random stream, and what is kept."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_resnet_spec, tiny_tasks

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.optim import PlainSGD
from clbench.data.augment import random_crop_and_flip
from clbench.seeding import torch_generator

SPEC = tiny_resnet_spec(nf=4, augment=True, training=replace(TINY_TRAINING, max_epochs=2))
PLAIN = replace(SPEC, data=replace(SPEC.data, augment=False))


@pytest.fixture(scope="module")
def tasks():  # type: ignore[no-untyped-def]
    return tiny_tasks(SPEC)


def test_a_training_batch_is_cropped_and_flipped_from_the_augment_stream_and_keeps_its_stored_images(tasks) -> None:
    approach = make_approach("sgd", SPEC, tasks, seed=3)
    data, indices = tasks[0].train, torch.arange(8)
    batch, plain = approach.training_batch(data, indices), data.batch(indices)
    assert torch.equal(batch.images, plain.images)  # the stored images (what a replay memory keeps)
    expected = data.transform(random_crop_and_flip(plain.images, torch_generator(3, "augment")), 0)
    torch.testing.assert_close(batch.inputs, expected, rtol=0, atol=0)
    assert not torch.equal(batch.inputs, plain.inputs)
    same = make_approach("sgd", SPEC, tasks, seed=3).training_batch(data, indices)
    other = make_approach("sgd", SPEC, tasks, seed=4).training_batch(data, indices)
    assert torch.equal(same.inputs, batch.inputs) and not torch.equal(other.inputs, batch.inputs)


def test_without_augment_a_training_batch_is_the_plain_batch(tasks) -> None:
    approach = make_approach("sgd", PLAIN, tasks)
    assert approach.augment_generator is None and "augment_generator" not in approach.state()
    batch = approach.training_batch(tasks[0].train, torch.arange(8))
    assert torch.equal(batch.inputs, tasks[0].train.batch(torch.arange(8)).inputs)


def test_the_crops_do_not_move_the_batch_order(tasks) -> None:
    """The augment stream is its own: with augment on and off, an epoch shuffles the same way."""
    states = []
    for spec in (SPEC, PLAIN):
        approach = make_approach("sgd", spec, tasks)
        optimizer = PlainSGD(list(approach.network.parameters()), lr=0.01)
        approach.train_epoch(0, 0, tasks[0].train, optimizer)
        states.append(approach.batch_generator.get_state())
    assert torch.equal(states[0], states[1])
    assert not torch.equal(torch_generator(0, "augment").get_state(), torch_generator(0, "batch-order").get_state())


def test_evaluation_and_validation_are_never_augmented(tasks) -> None:
    augmented, plain = make_approach("er", SPEC, tasks), make_approach("er", PLAIN, tasks)
    augmented.learn_task(0, tasks)  # trained with crops: weights and batch norm statistics away from the start
    plain.load_state(augmented.state())
    task = tasks[0]
    assert augmented.evaluate_task(task.test, 0, 1) == plain.evaluate_task(task.test, 0, 1)
    assert augmented.evaluate_validation(task.valid, 0) == plain.evaluate_validation(task.valid, 0)


def test_replay_stores_the_stored_images_and_augments_what_it_replays(tasks) -> None:
    approach = make_approach("er", SPEC, tasks, buffer_size=50, replay_batch_size=8)
    approach.begin_task(0, tasks)
    data, indices = tasks[0].train, torch.arange(8)
    batch = approach.training_batch(data, indices)
    approach.network.train()
    approach.training_step(batch, StepInfo(0, 0, 0, 1), approach.make_optimizer(0, 0.01))
    stored = approach.buffer.contents()
    assert torch.equal(stored.images, data.images[:8])  # the images as stored, not the crops
    replayed, memory = approach.replayed()
    assert torch.equal(memory.images, replayed.images)  # the memory's own images, untouched by replay
    assert not torch.equal(replayed.inputs, approach.as_batch(memory).inputs)  # but the inputs are cropped afresh
    assert torch.equal(approach.buffer.contents().images, data.images[:8])


def test_a_checkpoint_keeps_the_augment_stream_and_batch_norm_statistics(tasks) -> None:
    first = make_approach("er", SPEC, tasks)
    first.learn_task(0, tasks)
    saved = io.BytesIO()
    torch.save(first.state(), saved)
    saved.seek(0)
    second = make_approach("er", SPEC, tasks)
    second.load_state(torch.load(saved, weights_only=False))
    statistics = [key for key in first.network.state_dict() if key.endswith("running_mean")]
    assert statistics and all(torch.equal(first.network.state_dict()[key], second.network.state_dict()[key])
                              for key in statistics)
    assert not torch.equal(first.network.state_dict()[statistics[0]], torch.zeros_like(
        first.network.state_dict()[statistics[0]]))  # trained: not the initial statistics
    indices = torch.arange(8)
    assert torch.equal(first.training_batch(tasks[1].train, indices).inputs,
                       second.training_batch(tasks[1].train, indices).inputs)  # the next crops are the same
