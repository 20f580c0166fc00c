"""The task and class scenarios (`data.scenario`) and the two evaluations of every run.

The class scenario trains over every class seen so far (the seen tasks' heads side by side, FACIL's
`--all-outputs`); approaches whose prediction needs the task id train on their task's head in both scenarios and
store task-aware rows only. Old results keep their identity: `data.scenario: task` is left out of the hashes.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pandas as pd
import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import SHORT_SETTINGS, TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.random_classifier import RandomClassifier
from clbench.approaches.registry import REGISTRY
from clbench.approaches.sgd import SGD
from clbench.errors import ClbenchError
from clbench.run.checkpoints import checkpoint_path, load_checkpoint
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.run_files import write_run_file
from clbench.spec import load_benchmark

CPU = torch.device("cpu")
FAST = dataclasses.replace(TINY_TRAINING, max_epochs=2)


def run(results: Path, method: str, scenario: str, observer=None):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", training=FAST, scenario=scenario)
    if method in SHORT_SETTINGS:
        spec = dataclasses.replace(spec, approaches={method: SHORT_SETTINGS[method]})
    [plan] = plan_runs(spec, [method], [0], results)
    return execute(plan, device=CPU, loader=synthetic_loader(n_train=160, n_test=60), observer=observer)


# every approach but those that refuse the class scenario (gpm: `refuses_class`, tested in test_gpm_approach.py)
@pytest.mark.parametrize("method", sorted(name for name, cls in REGISTRY.items() if not cls.refuses_class))
def test_every_approach_runs_in_the_class_scenario_with_the_evaluations_it_has(method: str, tmp_path: Path) -> None:
    outcome = run(tmp_path / "class", method, "class")
    frame = pd.DataFrame(outcome.rows)
    cls = REGISTRY[method]
    assert (frame["scenario"] == "class").all() and frame["accuracy"].between(0, 1).all()
    assert set(frame["evaluation"]) == ({"task-aware"} if cls.needs_task_id else {"task-aware", "task-agnostic"})
    task_run = run(tmp_path / "task", method, "task")
    assert outcome.plan.config_hash != task_run.plan.config_hash
    assert outcome.plan.reference_hash != task_run.plan.reference_hash  # references are matched per scenario
    if cls.needs_task_id or method in ("icarl", "supsup", "xder"):  # the same numbers in both scenarios
        # needs_task_id: trained on its task's head; icarl: the authors' loss, one sigmoid per class seen, is the
        # same in both (as Mammoth trains it), and its nearest-mean prediction takes the task's classes or all;
        # supsup: each task's masks trained on its own outputs, the task inferred at test time in both; xder: one
        # loss over every head in both, as Mammoth trains it once and reports both settings
        assert same_numbers(outcome.rows, task_run.rows)
    elif method != "random":  # the class scenario's loss trains another network
        assert not same_numbers(outcome.rows, task_run.rows)


def test_scenario_task_keeps_the_hashes_of_results_stored_before_the_field_existed(tmp_path: Path) -> None:
    default = plan_runs(load_benchmark("mnist2"), ["sgd", "joint"], [0], tmp_path)
    explicit = plan_runs(load_benchmark("mnist2", ["data.scenario=task"]), ["sgd", "joint"], [0], tmp_path)
    other = plan_runs(load_benchmark("mnist2", ["data.scenario=class"]), ["sgd", "joint"], [0], tmp_path)
    identity = [(p.config_hash, p.data_hash, p.reference_hash) for p in default]
    assert identity == [(p.config_hash, p.data_hash, p.reference_hash) for p in explicit]
    assert "scenario" not in default[0].config["data"]
    # measured with clbench at be35c4d, before `data.scenario` existed (`plan_runs` of the shipped mnist2)
    assert identity == [("5ff51f1b4daa", "d41d58af454c", "a24228baeb90"),
                        ("0619c1a58837", "d41d58af454c", "a24228baeb90")]
    assert all(o.config_hash != d.config_hash and o.data_hash != d.data_hash for o, d in zip(other, default))
    assert other[0].config["data"]["scenario"] == "class"


def _second_task_batch(scenario: str):  # type: ignore[no-untyped-def]
    spec = tiny_spec("mlp", scenario=scenario)
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    batch = tasks[1].train.batch(slice(0, 16))
    return approach, tasks, batch


def test_the_class_scenario_loss_is_the_cross_entropy_over_every_class_seen_so_far() -> None:
    approach, tasks, batch = _second_task_batch("class")
    net = approach.multihead
    net.eval()
    loss = approach.loss(batch, StepInfo(1, 0, 0, 1))
    features = net.features(batch.inputs)
    logits = torch.cat([net.heads[0](features), net.heads[1](features)], dim=1)  # tasks 1 and 2: 4 + 4 classes
    assert tasks.head_sizes[:2] == (4, 4) and logits.shape[1] == 8
    by_hand = -functional.log_softmax(logits, 1)[torch.arange(16), batch.targets + 4].mean()
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-6)
    loss.backward()
    assert net.heads[0].weight.grad.abs().sum() > 0  # the old head competes for the sample
    assert net.heads[2].weight.grad is None  # a future task's classes are not among the candidates


def test_the_task_scenario_loss_touches_only_the_tasks_own_head() -> None:
    approach, _, batch = _second_task_batch("task")
    approach.loss(batch, StepInfo(1, 0, 0, 1)).backward()
    heads = approach.multihead.heads
    assert heads[0].weight.grad is None and heads[1].weight.grad.abs().sum() > 0


def test_an_approach_overriding_predict_stores_no_task_agnostic_rows_unless_it_says_how() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)

    class OwnPredict(SGD):
        def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
            return self.network(inputs, task) * 2

    class OwnBoth(OwnPredict):
        def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
            return self.network(inputs, n_tasks - 1, seen=True) * 2

    sgd = make_approach("sgd", spec, tasks)
    own = OwnPredict(sgd.context, sgd.hparams)
    both = OwnBoth(sgd.context, sgd.hparams)
    assert sgd.predicts_without_task_id() and not own.predicts_without_task_id() and both.predicts_without_task_id()
    assert set(own.evaluate_task(tasks[0].test, 0, 1)) == {"task-aware"}
    assert set(both.evaluate_task(tasks[0].test, 0, 1)) == {"task-aware", "task-agnostic"}


def test_the_random_reference_guesses_the_pooled_training_labels_of_the_candidate_tasks() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach: RandomClassifier = make_approach("random", spec, tasks)
    # task 1: 300 training samples, all class 0; task 2: 100, all class 1 -> pooled: 3/4 on class 0 of task 1
    approach.frequencies = {0: torch.tensor([1.0, 0, 0, 0], dtype=torch.float64),
                            1: torch.tensor([0, 1.0, 0, 0], dtype=torch.float64)}
    approach.train_sizes = {0: 300, 1: 100}
    test = dataclasses.replace(tasks[0].test, labels=torch.zeros(4000, dtype=torch.long),
                               images=tasks[0].test.images[:1].expand(4000, -1, -1, -1))
    results = approach.evaluate_task(test, 0, 2)
    # 4000 draws: binomial standard error sqrt(.75 * .25 / 4000) = 0.0068; 0.03 is over 4 standard errors
    assert results["task-agnostic"].accuracy == pytest.approx(0.75, abs=0.03)
    assert results["task-aware"].accuracy == 1.0  # task 1's own frequencies: always class 0
    unlearned = approach.evaluate_task(dataclasses.replace(test, labels=torch.zeros(4000, dtype=torch.long)), 2, 3)
    assert unlearned["task-aware"].accuracy == pytest.approx(1 / tasks.head_sizes[2], abs=0.03)  # chance


def test_a_run_checkpointed_by_an_earlier_clbench_resumes_with_the_whole_matrix(tmp_path: Path) -> None:
    reference = run(tmp_path / "reference", "ewc", "task")
    with pytest.raises(Stop):
        run(tmp_path / "stopped", "ewc", "task", observer=StopInTask2())
    [plan] = plan_runs(tiny_spec("mlp", training=FAST), ["ewc"], [0], tmp_path / "stopped")
    checkpoint = load_checkpoint(plan.run_dir, 0)
    old_rows = [{key: value for key, value in row.items() if key not in ("evaluation", "scenario", "split")}
                for row in checkpoint["rows"]
                if row["evaluation"] == "task-aware" and row["split"] == "test" and 1 <= row["task"] <= row["stage"]]
    assert len(old_rows) == 1  # what schema 1 stored after task 1
    old_rows[0]["stage_epochs"] = 99  # the training log of the old rows is kept
    torch.save({**checkpoint, "rows": old_rows}, checkpoint_path(plan.run_dir, 0))
    (plan.run_dir / "manifest.json").unlink()  # an earlier clbench wrote none

    resumed = execute(plan, device=CPU, loader=synthetic_loader(n_train=160, n_test=60))

    assert resumed.resumed_after_stage == 1 and same_numbers(resumed.rows, reference.rows)
    assert {row["stage_epochs"] for row in resumed.rows if row["stage"] == 1} == {99}


def test_a_run_checkpointed_before_validation_rows_resumes_with_them(tmp_path: Path) -> None:
    """A schema-2 checkpoint (test rows, no `split`): its test rows are kept as stored (a stored number changed
    here would show), the validation rows of the checkpointed stages are evaluated, and the run ends with the
    uninterrupted run's rows."""
    reference = run(tmp_path / "reference", "ewc", "task")
    with pytest.raises(Stop):
        run(tmp_path / "stopped", "ewc", "task", observer=StopInTask2())
    [plan] = plan_runs(tiny_spec("mlp", training=FAST), ["ewc"], [0], tmp_path / "stopped")
    checkpoint = load_checkpoint(plan.run_dir, 0)
    old_rows = [{**{key: value for key, value in row.items() if key != "split"}, "schema_version": 2}
                for row in checkpoint["rows"] if row["split"] == "test"]
    assert len(old_rows) == 2 * 3 * 2  # what schema 2 stored after task 1: stages 0-1 x 3 tasks x 2 evaluations
    old_rows[0]["task_name"] = "stored"  # the test rows are kept as the checkpoint holds them, not re-evaluated
    torch.save({**checkpoint, "rows": old_rows}, checkpoint_path(plan.run_dir, 0))
    (plan.run_dir / "manifest.json").unlink()  # an earlier clbench wrote none

    resumed = execute(plan, device=CPU, loader=synthetic_loader(n_train=160, n_test=60))

    assert resumed.resumed_after_stage == 1 and same_numbers(resumed.rows, reference.rows)
    assert resumed.rows[0]["task_name"] == "stored" and {row["schema_version"] for row in resumed.rows} == {3}


def test_a_checkpoint_that_misses_a_stage_is_refused(tmp_path: Path) -> None:
    outcome = run(tmp_path, "sgd", "task")
    checkpoint = load_checkpoint(outcome.plan.run_dir, 1)
    rows = [row for row in checkpoint["rows"] if row["stage"] != 1]
    (outcome.plan.run_dir / "accuracy.parquet").unlink()
    checkpoint_path(outcome.plan.run_dir, 2).unlink()  # resume from the checkpoint after task 2
    buffer = io.BytesIO()
    torch.save({**checkpoint, "rows": rows}, buffer)
    write_run_file(checkpoint_path(outcome.plan.run_dir, 1), buffer.getvalue())  # a whole file, as written
    with pytest.raises(ClbenchError, match="does not hold stages 0..2"):
        execute(outcome.plan, device=CPU, loader=synthetic_loader(n_train=160, n_test=60))


def test_every_row_records_the_memory_the_approach_kept_after_its_stage(tmp_path: Path) -> None:
    ewc = pd.DataFrame(run(tmp_path / "ewc", "ewc", "task").rows)
    sgd = pd.DataFrame(run(tmp_path / "sgd", "sgd", "task").rows)
    # EWC keeps a Fisher and an anchor of every parameter: 2 x 4 bytes per float32 parameter, from task 1 on
    n_parameters = sum(p.numel() for p in make_approach("ewc", tiny_spec("mlp"), tiny_tasks(tiny_spec("mlp")))
                       .network.parameters())
    assert set(ewc.loc[ewc["stage"] >= 1, "memory_bytes"]) == {2 * 4 * n_parameters}
    assert set(ewc.loc[ewc["stage"] == 0, "memory_bytes"]) == {0}
    assert set(sgd["memory_bytes"]) == {0} and set(ewc["memory_samples"]) == {0}
