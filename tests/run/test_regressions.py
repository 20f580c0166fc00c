"""Regression tests built from hand-made inputs, each aimed at a line that a one-line change could break unseen."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from stopping import Stop, StopInTask2
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

from clbench import metrics, results
from clbench.approaches import ewc as ewc_module
from clbench.approaches.regularizers import merge_fisher
from clbench.approaches.schedule import PlateauSchedule
from clbench.data.batches import TaskSequence
from clbench.results import read_run_file
from clbench.run import engine
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import execute
from clbench.run.plan import data_identity, plan_runs
from clbench.run.rows import evaluate_stage
from clbench.spec import BenchmarkSpec, DataSpec, NetworkSpec, TrainingSpec, load_benchmark

NAN = np.nan

# ---------------------------------------------------------------- max-previous forgetting

# stage t (rows) x task u (columns); each old task's column goes up and then down, or down and then up
UP_AND_DOWN = np.array([
    [0.50, NAN, NAN, NAN],
    [0.70, 0.60, NAN, NAN],
    [0.60, 0.90, 0.40, NAN],
    [0.55, 0.30, 0.80, 0.90],
])


def test_max_previous_forgetting_takes_the_best_earlier_stage_not_the_first_or_the_last() -> None:
    # task 0: best before the end 0.70 (stage 1, neither its first nor the last earlier stage), final 0.55
    # task 1: best 0.90 (stage 2), final 0.30; task 2: only 0.40 before the end, final 0.80 (it improved)
    expected = ((0.70 - 0.55) + (0.90 - 0.30) + (0.40 - 0.80)) / 3
    assert metrics.max_previous_forgetting(UP_AND_DOWN) == pytest.approx(expected)


def test_max_previous_forgetting_ignores_stages_before_a_task_was_learned() -> None:
    """Accuracies above the diagonal (a task evaluated before it was trained) are not a 'best'."""
    evaluated_early = np.where(np.isnan(UP_AND_DOWN), 0.99, UP_AND_DOWN)
    expected = ((0.70 - 0.55) + (0.90 - 0.30) + (0.40 - 0.80)) / 3
    assert metrics.max_previous_forgetting(evaluated_early) == pytest.approx(expected)


# ---------------------------------------------------------------- each old task scored with its own head

HEAD_METHODS = ["sgd", "sgd-f", "ewc", "hat", "imm-mean", "imm-mode", "lwf", "lfl", "joint"]  # PNN, PathNet: own nets


def _answers_class_u(network: torch.nn.Module) -> None:
    """Head u ignores its input and answers class u (zero weights, a bias only on class u)."""
    with torch.no_grad():
        for u, head in enumerate(network.heads):
            head.weight.zero_()
            head.bias.zero_()
            head.bias[u] = 10.0


def _all_labelled(tasks: TaskSequence, label_of_task: Callable[[int], int]) -> TaskSequence:
    """The same tasks with every test label of task u replaced by `label_of_task(u)`."""
    relabelled = []
    for task in tasks.tasks:
        test = dataclasses.replace(task.test, labels=torch.full_like(task.test.labels, label_of_task(task.index)))
        relabelled.append(dataclasses.replace(task, test=test))
    return dataclasses.replace(tasks, tasks=tuple(relabelled))


@pytest.mark.parametrize("method", HEAD_METHODS)
def test_each_old_task_is_scored_with_its_own_head_when_all_heads_have_the_same_size(method: str) -> None:
    spec = tiny_spec(kind="permuted", n_tasks=3)  # three heads of 10 classes: a wrong head raises no IndexError
    tasks = tiny_tasks(spec)
    assert len(set(tasks.head_sizes)) == 1
    approach = make_approach(method, spec, tasks)
    if not hasattr(approach.network, "heads"):
        pytest.skip(f"{method}: no per-task `heads` to set by hand")
    approach.network.eval()
    _answers_class_u(approach.network)

    right = _task_aware(evaluate_stage(approach, _all_labelled(tasks, lambda u: u), 2))
    wrong = _task_aware(evaluate_stage(approach, _all_labelled(tasks, lambda u: (u + 1) % 3), 2))

    assert [result.accuracy for result in right] == [1.0, 1.0, 1.0]
    assert [result.accuracy for result in wrong] == [0.0, 0.0, 0.0]
    assert [result.n for result in right] == [len(task.test) for task in tasks.tasks]


def _task_aware(evaluations: list) -> list:  # type: ignore[type-arg]
    """The task-aware results of `evaluate_stage`'s (task, evaluation, result, seconds), in task order."""
    return [result for _, evaluation, result, _ in evaluations if evaluation == "task-aware"]


# ---------------------------------------------------------------- the lr schedule


def test_a_validation_loss_equal_to_the_best_is_not_an_improvement() -> None:
    schedule = PlateauSchedule(TrainingSpec(lr=0.09, lr_factor=3.0, lr_min=1e-4, patience=2))

    assert schedule.step(0.5) == (True, False)
    assert schedule.step(0.5) == (False, False)  # equal: patience 2 -> 1, the best stays 0.5
    assert (schedule.best_loss, schedule.patience, schedule.lr) == (0.5, 1, 0.09)
    assert schedule.step(0.5) == (False, True)  # equal again: patience spent, lr 0.09 / 3
    assert schedule.lr == pytest.approx(0.03) and schedule.patience == 2 and not schedule.stopped
    assert schedule.step(0.4999) == (True, False) and schedule.best_loss == 0.4999 and schedule.patience == 2


def test_the_schedule_stops_when_the_lr_falls_below_lr_min_after_equal_losses() -> None:
    schedule = PlateauSchedule(TrainingSpec(lr=0.03, lr_factor=3.0, lr_min=0.005, patience=1))

    assert schedule.step(1.0) == (True, False)
    assert schedule.step(1.0) == (False, True) and schedule.lr == pytest.approx(0.01)  # 0.01 >= 0.005: go on
    assert schedule.step(1.0) == (False, False) and schedule.stopped  # 0.01 / 3 < 0.005


# ---------------------------------------------------------------- the data hash

BASE_DATA = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(5,), remainder="error",
                     n_tasks=None, shuffle_tasks=False, validation_fraction=0.15, max_train_samples=None,
                     max_test_samples=None)
OTHER_VALUE = {"kind": "mixture", "datasets": ("mnist", "fashion-mnist"), "form": "image32", "classes_per_task": (2,),
               "remainder": "keep", "n_tasks": 3, "shuffle_tasks": True, "validation_fraction": 0.2,
               "max_train_samples": 500, "max_test_samples": 100, "scenario": "class", "augment": True,
               "normalize": False}


def _with_data(data: DataSpec) -> BenchmarkSpec:
    network = NetworkSpec(kind="mlp", hidden=(8,))
    return BenchmarkSpec("b", "a benchmark", "<test>", None, data, network, TrainingSpec(), {})


def test_every_data_setting_is_covered_by_this_test() -> None:
    assert set(OTHER_VALUE) == {f.name for f in dataclasses.fields(DataSpec)}


@pytest.mark.parametrize("key", sorted(OTHER_VALUE))
def test_the_data_hash_changes_with_each_data_setting(key: str) -> None:
    changed = dataclasses.replace(BASE_DATA, **{key: OTHER_VALUE[key]})
    assert getattr(changed, key) != getattr(BASE_DATA, key)

    assert data_identity(_with_data(changed)) != data_identity(_with_data(BASE_DATA))


def test_the_data_hash_is_the_same_for_equal_data_settings() -> None:
    assert data_identity(_with_data(dataclasses.replace(BASE_DATA))) == data_identity(_with_data(BASE_DATA))


SET_DATA = ["data.max_train_samples=500", "data.max_test_samples=100", "data.validation_fraction=0.2",
            "data.shuffle_tasks=true", "data.classes_per_task=[2]", "data.remainder=keep"]


@pytest.mark.parametrize("override", SET_DATA)
def test_data_settings_from_set_change_the_data_hash(override: str) -> None:
    base = data_identity(load_benchmark("mnist2"))

    assert data_identity(load_benchmark("mnist2", [override])) != base


def test_settings_from_set_outside_data_keep_the_data_hash() -> None:
    """The references (joint, random) of a run are found by this hash: training settings must not split them."""
    base = data_identity(load_benchmark("mnist2"))
    assert data_identity(load_benchmark("mnist2", ["training.max_epochs=3", "network.hidden=[16,16]"])) == base


def test_each_data_setting_from_set_gives_its_own_hash() -> None:
    hashes = {data_identity(load_benchmark("mnist2", [override])) for override in SET_DATA}
    assert len(hashes) == len(SET_DATA)


# ---------------------------------------------------------------- atomic writes


@pytest.mark.parametrize("failure", [OSError, KeyboardInterrupt])
def test_a_crash_before_the_rename_leaves_the_previous_file_and_no_temporary(tmp_path: Path, monkeypatch,
                                                                              failure: type[BaseException]) -> None:
    target = tmp_path / "run.json"
    target.write_text('{"status": "old"}\n')
    renamed: list[tuple[str, str]] = []

    def crash(source: str, destination: str) -> None:
        renamed.append((str(source), str(destination)))
        assert Path(source).read_bytes().startswith(b"{")  # the new content was fully written first
        raise failure("crash between the write and the rename")

    monkeypatch.setattr(results.os, "replace", crash)
    with pytest.raises(failure):
        results.write_json(target, {"status": "new"})

    assert len(renamed) == 1 and renamed[0][1] == str(target) and Path(renamed[0][0]).parent == tmp_path
    assert target.read_text() == '{"status": "old"}\n'
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.json"]


def test_a_crash_while_writing_a_parquet_file_leaves_the_previous_one(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "accuracy.parquet"
    results.write_parquet(target, pd.DataFrame({"stage": [0], "accuracy": [0.5]}))
    before = target.read_bytes()

    def crash(*args: object) -> None:
        raise OSError("no space left on device")

    monkeypatch.setattr(results.os, "fsync", crash)
    with pytest.raises(OSError, match="no space"):
        results.write_parquet(target, pd.DataFrame({"stage": [0, 1], "accuracy": [0.5, 0.7]}))

    assert target.read_bytes() == before
    assert pd.read_parquet(target)["accuracy"].tolist() == [0.5]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["accuracy.parquet"]


def test_an_atomic_write_replaces_the_whole_file_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text("x" * 1000)

    results.write_json(target, {"a": 1})

    assert target.read_text() == '{\n  "a": 1\n}\n'
    assert target.stat().st_mode & 0o777 == 0o644
    assert sorted(path.name for path in tmp_path.iterdir()) == ["run.json"]


# ---------------------------------------------------------------- HAT's monitoring tables after a resume

HAT_SPEC = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3))
HAT_KEYS = {"hat_masks": ["stage", "task", "layer", "unit"], "hat_capacity": ["stage", "mask", "layer"],
            "hat_reuse": ["stage", "task", "later_task"]}


def _hat_run(results_dir: Path, observer=None):  # type: ignore[no-untyped-def]
    [plan] = plan_runs(HAT_SPEC, ["hat"], [0], results_dir)
    execute(plan, device=torch.device("cpu"), loader=synthetic_loader(), observer=observer)
    return plan


def _tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(run_dir / f"{name}.parquet") for name in HAT_KEYS}


def _assert_one_row_per_key_and_as_uninterrupted(run_dir: Path, reference_dir: Path) -> None:
    tables, reference = _tables(run_dir), _tables(reference_dir)
    for name, keys in HAT_KEYS.items():
        table = tables[name]
        assert not table.duplicated(keys).any(), f"{name}: {table[table.duplicated(keys, keep=False)]}"
        assert sorted(table["stage"].unique()) == [1, 2, 3] if name != "hat_reuse" else [2, 3]
        pd.testing.assert_frame_equal(table.drop(columns="run_id"), reference[name].drop(columns="run_id"))
    # one row per gated unit (2 x 32) per stage, and per (earlier, later) task pair seen so far
    assert len(tables["hat_masks"]) == 3 * 64
    pairs = sorted(tables["hat_reuse"][["stage", "task", "later_task"]].itertuples(index=False, name=None))
    assert pairs == [(2, 1, 2), (3, 1, 2), (3, 1, 3), (3, 2, 3)]


def test_hat_tables_have_one_row_per_key_after_a_resume_stopped_in_task_2(tmp_path: Path) -> None:
    reference = _hat_run(tmp_path / "reference")
    with pytest.raises(Stop):
        _hat_run(tmp_path / "stopped", StopInTask2())
    assert sorted(_tables_present(tmp_path / "stopped")) == ["hat_capacity", "hat_masks"]  # after task 1 only

    resumed = _hat_run(tmp_path / "stopped")

    _assert_one_row_per_key_and_as_uninterrupted(resumed.run_dir, reference.run_dir)


def test_hat_tables_have_one_row_per_key_when_the_crash_came_after_the_tables_were_written(
        tmp_path: Path, monkeypatch) -> None:
    """Stage 2's tables are written, its checkpoint is not: the resume trains task 2 again and writes them again."""
    reference = _hat_run(tmp_path / "reference")
    real_save = engine.save_checkpoint

    def crash_at_stage_2(run_dir, stage, *rest):  # type: ignore[no-untyped-def]
        if stage == 1:
            raise Stop
        real_save(run_dir, stage, *rest)

    monkeypatch.setattr(engine, "save_checkpoint", crash_at_stage_2)
    with pytest.raises(Stop):
        _hat_run(tmp_path / "stopped")
    assert set(pd.read_parquet(tmp_path / "stopped" / _relative_run_dir(reference) / "hat_masks.parquet")["stage"]) \
        == {1, 2}
    monkeypatch.setattr(engine, "save_checkpoint", real_save)

    resumed = _hat_run(tmp_path / "stopped")

    assert read_run_file(resumed.run_dir)["resumed_after_stage"] == 1
    _assert_one_row_per_key_and_as_uninterrupted(resumed.run_dir, reference.run_dir)


def _tables_present(results_dir: Path) -> list[str]:
    return [path.stem for path in results_dir.rglob("hat_*.parquet")]


def _relative_run_dir(plan) -> Path:  # type: ignore[no-untyped-def]
    return plan.run_dir.relative_to(plan.run_dir.parents[len(Path(plan.run_id).parts) - 1])


# ---------------------------------------------------------------- EWC's Fisher merge over three tasks


def test_ewc_merges_the_fisher_of_three_tasks_with_weights_t_over_t_plus_1(monkeypatch) -> None:
    spec = tiny_spec("mlp", n_tasks=3)
    tasks = tiny_tasks(spec)
    approach = make_approach("ewc", spec, tasks)
    names = [name for name, _ in approach.network.named_parameters()]
    per_task = {0: 1.0, 1: 4.0, 2: 10.0}  # each task's own Fisher, the same value on every weight
    calls: list[int] = []

    def fisher_of(network, parameters, data, task, batch_size, dropout, seen=False, step=None):  # type: ignore[no-untyped-def]
        calls.append(task)
        assert data is tasks[task].train
        return {name: torch.full_like(value, per_task[task]) for name, value in parameters.items()}

    monkeypatch.setattr(ewc_module, "task_fisher", fisher_of)
    merged = []
    for stage in range(3):
        approach.end_task(stage, tasks)
        merged.append({float(value.unique()) for value in approach.fisher.values()})

    # t = 0: F0 = 1 ; t = 1: (4 + 1 * 1) / 2 = 2.5 ; t = 2: (10 + 2 * 2.5) / 3 = 5 = mean(1, 4, 10)
    assert merged == [{1.0}, {2.5}, {5.0}]
    assert calls == [0, 1, 2] and sorted(approach.fisher) == sorted(names)
    anchor = approach.anchor[names[0]]
    assert torch.equal(anchor, dict(approach.network.named_parameters())[names[0]].detach())


def test_merge_fisher_at_the_third_task_by_hand() -> None:
    old = {"w": torch.tensor([0.0, 3.0, 6.0])}  # the merge of two tasks
    new = {"w": torch.tensor([9.0, 0.0, 3.0])}

    merged = merge_fisher(new, old, 2)

    assert merged["w"].tolist() == pytest.approx([3.0, 2.0, 5.0])  # (new + 2 * old) / 3


# ---------------------------------------------------------------- the engine's wiring, checked by hand

WEAK_SPEC = tiny_spec("mlp", training=replace(TINY_TRAINING, lr=0.002, max_epochs=1))  # accuracies below 1


def _mlp_logits(weights: dict[str, torch.Tensor], images: torch.Tensor, head: int) -> torch.Tensor:
    """Head `head`'s logits of the 2-hidden-layer ReLU MLP in `weights`, written out by hand."""
    x = (images.double().reshape(len(images), -1) / 255 - 0.2) / 0.3  # the synthetic data's mean 0.2, std 0.3
    for layer in (0, 1):
        x = torch.relu(x @ weights[f"layers.{layer}.weight"].double().T + weights[f"layers.{layer}.bias"].double())
    return x @ weights[f"heads.{head}.weight"].double().T + weights[f"heads.{head}.bias"].double()


def _mlp_accuracy(weights: dict[str, torch.Tensor], images: torch.Tensor, labels: torch.Tensor, head: int) -> int:
    """Correct answers of the MLP in `weights` with head `head`."""
    return int((_mlp_logits(weights, images, head).argmax(1) == labels).sum())


def _mlp_agnostic_correct(weights: dict[str, torch.Tensor], images: torch.Tensor, labels: torch.Tensor, task: int,
                          head_sizes: tuple[int, ...], n_candidates: int) -> int:
    """Correct answers without the task id: argmax over heads 0..n_candidates-1 side by side, against the label's
    place among them (task `task`'s classes start after the classes of the tasks before it)."""
    logits = torch.cat([_mlp_logits(weights, images, head) for head in range(n_candidates)], dim=1)
    return int((logits.argmax(1) == labels + sum(head_sizes[:task])).sum())


def test_stored_accuracies_are_those_of_each_stage_checkpoint_on_each_task(tmp_path: Path) -> None:
    [plan] = plan_runs(WEAK_SPEC, ["sgd"], [0], tmp_path)
    execute(plan, device=torch.device("cpu"), loader=synthetic_loader())
    stored = pd.read_parquet(plan.run_dir / "accuracy.parquet")
    tasks = tiny_tasks(WEAK_SPEC)

    expected = []
    for stage in range(3):
        weights = load_checkpoint(plan.run_dir, stage)["approach"]["network"]
        for task in range(stage + 1):
            test = tasks[task].test
            correct = _mlp_accuracy(weights, test.images, test.labels, task)
            expected.append((stage + 1, task + 1, tasks[task].name, correct / len(test), len(test)))

    learned = stored[(stored["evaluation"] == "task-aware") & (stored["task"] <= stored["stage"])
                     & (stored["stage"] >= 1) & (stored["split"] == "test")]
    got = list(learned[["stage", "task", "task_name", "accuracy", "n_test"]].itertuples(index=False, name=None))
    assert [row[:3] + (row[4],) for row in got] == [row[:3] + (row[4],) for row in expected]
    assert [row[3] for row in got] == pytest.approx([row[3] for row in expected], abs=1e-9)
    assert len({row[3] for row in expected}) > 2  # the accuracies differ: a mix-up of stages or tasks shows


def test_stored_task_agnostic_accuracies_are_the_argmax_over_the_candidate_heads(tmp_path: Path) -> None:
    [plan] = plan_runs(WEAK_SPEC, ["sgd"], [0], tmp_path)
    execute(plan, device=torch.device("cpu"), loader=synthetic_loader())
    stored = pd.read_parquet(plan.run_dir / "accuracy.parquet")
    stored = stored[(stored["evaluation"] == "task-agnostic") & (stored["stage"] >= 1) & (stored["split"] == "test")]
    tasks = tiny_tasks(WEAK_SPEC)
    assert len(set(tasks.head_sizes)) > 1  # heads of different sizes: a wrong class offset shows

    expected = {}
    for stage in range(3):  # stage 0 needs the initial weights, which no checkpoint holds
        weights = load_checkpoint(plan.run_dir, stage)["approach"]["network"]
        for task in range(3):  # the candidates: the classes of tasks 0..max(stage, task)
            test = tasks[task].test
            correct = _mlp_agnostic_correct(weights, test.images, test.labels, task, tasks.head_sizes,
                                            max(stage, task) + 1)
            expected[(stage + 1, task + 1)] = correct / len(test)

    got = {(stage, task): accuracy for stage, task, accuracy in stored[["stage", "task", "accuracy"]].to_numpy()}
    assert got.keys() == expected.keys()
    assert [got[key] for key in sorted(got)] == pytest.approx([expected[key] for key in sorted(got)], abs=1e-9)
    assert len(set(expected.values())) > 2
