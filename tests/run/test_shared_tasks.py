"""The runs of one command on the same data share one task sequence: built once, the same numbers, one in memory."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from runhelpers import Recorder
from synthetic import SyntheticLoader, synthetic_loader, tiny_spec

from clbench.approaches.sgd import SGD
from clbench.run import shared_tasks
from clbench.run.engine import execute
from clbench.run.execution import Execution, check_execution, run_plans
from clbench.run.plan import plan_runs
from clbench.run.scheduler import RunRequest, grouped_requests, run_in_processes
from clbench.run.shared_tasks import SharedTasks, grouped_by_data

CPU = torch.device("cpu")
SPEC = tiny_spec("mlp", kind="permuted")


class FailingSGD(SGD):
    """SGD that fails in its first epoch, after the run's task sequence was built and evaluated once."""

    def train_epoch(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("out of patience")


@dataclass(frozen=True)
class CountingLoader:
    """`SyntheticLoader` that writes a line to `log` for every data set it loads (worker processes too)."""

    log: Path

    def __call__(self, name: str, form: str):  # type: ignore[no-untyped-def]
        with self.log.open("a") as file:
            file.write(name + "\n")
        return SyntheticLoader()(name, form)


def numbers(rows: list[dict]) -> list[tuple[str, int, int, float, float]]:
    return [(row["split"], row["stage"], row["task"], row["accuracy"], row["loss"]) for row in rows]


def test_grouping_keeps_the_groups_in_first_appearance_and_each_group_in_order() -> None:
    items = ["a1", "b1", "a2", "c1", "b2", "a3"]
    assert grouped_by_data(items, lambda item: item[0]) == ["a1", "a2", "a3", "b1", "b2", "c1"]
    assert grouped_by_data([], lambda item: item) == []


def test_runs_on_the_same_data_follow_each_other_on_one_sequence_with_the_numbers_of_separate_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = synthetic_loader()
    built: list[int] = []
    build = shared_tasks.build_tasks
    monkeypatch.setattr(shared_tasks, "build_tasks", lambda spec, seed, *rest: built.append(seed) or build(
        spec, seed, *rest))
    plans = plan_runs(SPEC, ["sgd", "ewc"], [0, 1], tmp_path / "shared")  # sgd 0, sgd 1, ewc 0, ewc 1
    recorder = Recorder()
    outcomes = run_plans(plans, check_execution(Execution(device="cpu")), loader, recorder)  # in plan order

    launched = [run_id for kind, run_id, _ in recorder.events if kind == "launched"]
    by_id = {plan.run_id: plan for plan in plans}
    assert [(by_id[run_id].method, by_id[run_id].seed) for run_id in launched] == [
        ("sgd", 0), ("ewc", 0), ("sgd", 1), ("ewc", 1)]
    assert built == [0, 1]  # one sequence per seed, not one per run
    monkeypatch.setattr(shared_tasks, "build_tasks", build)
    for outcome in outcomes:  # each run alone, on a sequence of its own
        [alone] = plan_runs(SPEC, [outcome.plan.method], [outcome.plan.seed], tmp_path / "alone")
        separate = execute(alone, device=CPU, loader=loader)
        assert outcome.status == separate.status == "done"
        assert numbers(outcome.rows) == numbers(separate.rows)


def test_the_kept_sequence_is_reused_for_the_same_data_and_freed_before_other_data_is_built(tmp_path: Path) -> None:
    plans = plan_runs(SPEC, ["sgd", "ewc"], [0, 1], tmp_path)
    sgd0, sgd1, ewc0 = plans[0], plans[1], plans[2]
    load = synthetic_loader()
    kept_then: list[bool] = []
    refs: list[weakref.ref] = []

    def loader(name: str, form: str):  # type: ignore[no-untyped-def]
        gc.collect()
        kept_then.append(any(ref() is not None for ref in refs))
        return load(name, form)

    shared = SharedTasks()
    refs.append(weakref.ref(shared.tasks_for(sgd0, loader, CPU)))
    assert shared.tasks_for(ewc0, loader, CPU) is refs[0]() and shared.builds == 1
    kept_then.clear()
    shared.tasks_for(sgd1, loader, "cpu")  # another seed: other permutations and splits
    assert shared.builds == 2 and kept_then == [False]  # seed 0's sequence was gone when seed 1's was loaded


def test_a_failed_run_does_not_leave_its_sequence_to_the_next_run(tmp_path: Path) -> None:
    [plan] = plan_runs(SPEC, ["sgd"], [0], tmp_path)
    failing = replace(plan, approach=replace(plan.approach, cls=FailingSGD))
    shared = SharedTasks()
    with pytest.raises(RuntimeError, match="out of patience"):
        execute(failing, device=CPU, loader=synthetic_loader(), shared=shared)
    assert shared.tasks is None and shared.key is None


def test_a_worker_process_runs_the_runs_on_its_data_on_one_sequence(tmp_path: Path) -> None:
    log = tmp_path / "loads.txt"
    plans = plan_runs(SPEC, ["sgd", "ewc"], [0], tmp_path / "pool")  # one data set per sequence (permuted mnist)
    requests = grouped_requests([RunRequest(plan, "", CountingLoader(log), threads=1) for plan in plans])
    outcomes = run_in_processes(requests, 1, ["cpu"], Recorder())
    assert [outcome.status for outcome in outcomes] == ["done", "done"]
    assert log.read_text().split() == ["mnist"]  # built once, for both runs
    for outcome in outcomes:
        [alone] = plan_runs(SPEC, [outcome.plan.method], [0], tmp_path / "alone")
        assert numbers(outcome.rows) == numbers(execute(alone, device=CPU, loader=synthetic_loader()).rows)


@pytest.mark.parametrize("change", ["images", "labels", "task_ids", "mean"])
def test_a_sequence_changed_in_place_by_a_run_is_built_anew_for_the_next(tmp_path: Path, change: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    sgd0, _, ewc0, _ = plan_runs(SPEC, ["sgd", "ewc"], [0, 1], tmp_path)
    loader, shared = synthetic_loader(), SharedTasks()
    first = shared.tasks_for(sgd0, loader, CPU)
    if change == "images":  # what a plugin writing into its data would do
        first[1].test.images.add_(1)
    elif change == "labels":
        first[0].valid.labels[:2] = 0
    elif change == "task_ids":
        first[2].train.task_ids[0] = 0
    else:
        first[0].train.transform.mean.mul_(2.0)
    with caplog.at_level("WARNING"):
        second = shared.tasks_for(ewc0, loader, CPU)
    assert second is not first and shared.builds == 2 and "changed its task data in place" in caplog.text
    fresh = SharedTasks().tasks_for(ewc0, loader, CPU)
    assert torch.equal(second[1].test.images, fresh[1].test.images)
    assert torch.equal(second[0].valid.labels, fresh[0].valid.labels)
    assert torch.equal(second[2].train.task_ids, fresh[2].train.task_ids)
    assert torch.equal(second[0].train.transform.mean, fresh[0].train.transform.mean)
    assert shared.tasks_for(ewc0, loader, CPU) is second and shared.builds == 2  # unchanged: kept


def test_the_kept_inputs_travel_with_the_kept_sequence(tmp_path: Path) -> None:
    """The next run on the same data finds the evaluation inputs the last one kept: one cache per sequence."""
    sgd0, _, ewc0, _ = plan_runs(SPEC, ["sgd", "ewc"], [0, 1], tmp_path)
    loader, shared = synthetic_loader(), SharedTasks()
    first = shared.tasks_for(sgd0, loader, CPU)
    kept = first[1].test.kept_inputs()
    second = shared.tasks_for(ewc0, loader, CPU)
    assert second is first and second[1].test.cache is first[0].train.cache
    assert kept is not None and second[1].test.kept_inputs() is kept
