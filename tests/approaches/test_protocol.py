"""The training protocol: lr schedule, early stopping and best-weights restore."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks

from clbench.approaches.schedule import FixedEpochs, PlateauSchedule
from clbench.spec import TrainingSpec


def test_schedule_decays_after_patience_and_stops_below_lr_min() -> None:
    schedule = PlateauSchedule(TrainingSpec(lr=0.05, lr_factor=3, lr_min=1e-4, patience=5))
    assert schedule.step(1.0) == (True, False)
    decisions = [schedule.step(2.0) for _ in range(5)]
    assert decisions[:4] == [(False, False)] * 4 and decisions[4] == (False, True)
    assert schedule.lr == pytest.approx(0.05 / 3) and schedule.patience == 5
    assert schedule.step(0.5) == (True, False) and schedule.best_loss == 0.5


def test_fixed_epochs_never_improve_never_change_the_lr_and_report_the_last_loss() -> None:
    """Without early stopping the one loop keeps the last weights: no improvement (no snapshot, nothing
    restored), the protocol's lr throughout, and the task log's validation loss the last epoch's."""
    schedule = FixedEpochs(TrainingSpec(lr=0.05, patience=1, lr_min=0.04, early_stopping=False))
    assert not schedule.restores_best and PlateauSchedule.restores_best
    assert [schedule.step(loss) for loss in (3.0, 1.0, 2.0)] == [(False, False)] * 3
    assert schedule.lr == 0.05 and not schedule.stopped and schedule.best_loss == 2.0


def test_schedule_reaches_the_reference_lr_sequence() -> None:
    """0.05, 0.0167, 0.00556, 0.00185, 6.17e-4, 2.06e-4, then stop: 31 epochs at least."""
    schedule = PlateauSchedule(TrainingSpec())
    lrs, epochs = [], 0
    schedule.step(1.0)
    epochs += 1
    while not schedule.stopped:
        lrs.append(schedule.lr)
        schedule.step(2.0)
        epochs += 1
    assert sorted(set(lrs), reverse=True) == pytest.approx([0.05, 0.05 / 3, 0.05 / 9, 0.05 / 27, 0.05 / 81, 0.05 / 243])
    assert epochs == 31


def test_learn_task_stops_on_plateau_and_restores_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scripted validation losses: best at epoch 2, then no improvement; lr decays, stops; epoch-2 weights back."""
    training = replace(TINY_TRAINING, patience=2, lr_factor=10.0, lr_min=0.004, max_epochs=50, lr=0.05)
    spec = tiny_spec("mlp", training=training)
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    losses = iter([3.0, 1.0] + [2.0] * 100)
    snapshots: list[dict[str, torch.Tensor]] = []
    original = approach.evaluate_validation

    def scripted(data, stage):  # type: ignore[no-untyped-def]
        snapshots.append(approach.snapshot())
        return replace(original(data, stage), loss=next(losses))

    monkeypatch.setattr(approach, "evaluate_validation", scripted)
    log = approach.learn_task(0, tasks)
    # patience 2: epochs 3,4 -> lr 0.005; epochs 5,6 -> lr 0.0005 < 0.004 -> stop after 6 epochs
    assert log.epochs == 6 and log.best_epoch == 2 and log.best_valid_loss == 1.0
    assert log.final_lr == pytest.approx(0.0005)
    for key, value in approach.network.state_dict().items():
        assert torch.equal(value, snapshots[1][key]), key
    assert not torch.equal(snapshots[1]["layers.0.weight"], snapshots[-1]["layers.0.weight"])


def test_max_epochs_bounds_training() -> None:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2, patience=50))
    tasks = tiny_tasks(spec)
    log = make_approach("sgd", spec, tasks).learn_task(0, tasks)
    assert log.epochs == 2 and log.batches == 2 * -(-len(tasks[0].train) // TINY_TRAINING.batch_size)


def test_joint_restarts_from_initial_weights_on_all_seen_tasks() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("joint", spec, tasks)
    train, valid = approach.training_data(1, tasks)
    assert len(train) == len(tasks[0].train) + len(tasks[1].train)
    assert set(train.task_ids.tolist()) == {0, 1} and train.task == -1
    approach.learn_task(0, tasks)
    approach.begin_task(1, tasks)
    for key, value in approach.initial_weights.items():
        assert torch.equal(approach.network.state_dict()[key], value)
