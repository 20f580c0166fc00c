"""Validation rows (results schema 3): every run evaluates each task's held-out validation split at every
stage, in both evaluations, beside the test rows; reports read test rows unless `--split validation` is given.

The expected numbers come from a hand loop over `tasks[u].valid` with the network's own heads and an argmax, or by
hand from the stored rows, never from the evaluation code under test.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks
from torch.nn import functional
from typer.testing import CliRunner

from clbench.cli import app
from clbench.cli.progress import final_means, stage_line
from clbench.errors import ResultsError
from clbench.metrics import accuracy_matrices
from clbench.report.loading import load_results
from clbench.report.tables import build_report
from clbench.results import select_split
from clbench.run.checkpoints import load_checkpoint
from clbench.run.engine import SilentObserver, execute
from clbench.run.plan import plan_runs
from clbench.spec import TrainingSpec

CPU = torch.device("cpu")
BARELY_TRAINED = replace(TINY_TRAINING, lr=0.002, max_epochs=1)  # accuracies well below 100%: splits differ
TESTS = Path(__file__).resolve().parents[1]
OLD_RESULTS = TESTS / "fixtures" / "old-results"


def trained(tmp_path: Path, training: TrainingSpec = TINY_TRAINING) -> pd.DataFrame:
    [plan] = plan_runs(tiny_spec("mlp", training=training), ["sgd"], [0], tmp_path)
    outcome = execute(plan, device=CPU, loader=synthetic_loader())
    assert outcome.status == "done"
    return pd.read_parquet(plan.run_dir / "accuracy.parquet").assign(run_dir=str(plan.run_dir))


def hand_counts(network: torch.nn.Module, inputs: torch.Tensor, labels: torch.Tensor, task: int,
                head_sizes: tuple[int, ...], seen: int) -> dict[str, tuple[int, float]]:
    """(number right, mean cross-entropy) of task `task`'s own head, and of the argmax over the heads of tasks
    0..seen-1 concatenated (task-agnostic: labels shifted by the task's class offset)."""
    network.eval()
    with torch.no_grad():
        heads = [network(inputs, head) for head in range(seen)]  # each (N, classes of that task)
    own = heads[task]
    every = torch.cat(heads, dim=1)  # (N, classes of tasks 0..seen-1)
    shifted = labels + sum(head_sizes[:task])
    return {"task-aware": (int((own.argmax(1) == labels).sum()), float(functional.cross_entropy(own, labels))),
            "task-agnostic": (int((every.argmax(1) == shifted).sum()), float(functional.cross_entropy(every, shifted)))}


def test_validation_rows_are_the_accuracy_of_a_hand_loop_over_the_validation_split(tmp_path: Path) -> None:
    frame = trained(tmp_path)
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)  # at initialisation, as the engine builds it (stage 0)
    run_dir = Path(frame["run_dir"].iloc[0])
    checked = 0
    for stage in range(len(tasks) + 1):
        if stage >= 1:
            approach.network.load_state_dict(load_checkpoint(run_dir, stage - 1)["approach"]["network"])
        for task in range(len(tasks)):
            valid = tasks[task].valid
            assert len(valid) != len(tasks[task].test)  # the test set would give other counts
            batch = valid.batch(slice(0, len(valid)))
            expected = hand_counts(approach.network, batch.inputs, valid.labels, task, tasks.head_sizes,
                                   max(stage, task + 1))
            for evaluation, (right, loss) in expected.items():
                [row] = frame[(frame["split"] == "validation") & (frame["evaluation"] == evaluation)
                              & (frame["stage"] == stage) & (frame["task"] == task + 1)].to_dict("records")
                assert row["n_test"] == len(valid)
                assert row["accuracy"] == right / len(valid), (stage, task, evaluation)
                assert row["loss"] == pytest.approx(loss, rel=1e-5)
                checked += 1
    assert checked == 4 * 3 * 2
    test_rows = frame[frame["split"] == "test"]
    assert len(test_rows) == checked and set(test_rows["n_test"]) == {len(tasks[u].test) for u in range(3)}


def test_metrics_and_loaders_never_mix_the_splits(tmp_path: Path) -> None:
    frame = trained(tmp_path)
    with pytest.raises(ValueError, match="both splits"):
        accuracy_matrices(frame[frame["evaluation"] == "task-aware"])
    assert set(select_split(frame)["split"]) == {"test"}
    assert set(select_split(frame, "validation")["split"]) == {"validation"}
    assert select_split(frame.drop(columns="split")).equals(frame.drop(columns="split"))  # schema 1 and 2: test
    assert select_split(frame.drop(columns="split"), "validation").empty
    with pytest.raises(ResultsError, match="--split"):
        load_results(tmp_path, "tiny", split="valid")
    loaded = load_results(tmp_path, "tiny")
    assert set(loaded.rows["split"]) == {"test"} and len(loaded.rows) == len(frame) // 2


def final_accuracies(frame: pd.DataFrame, split: str) -> list[float]:
    """A^{<=t} (percent) of the one run in `frame`, by hand: the mean over tasks u <= t of the task-aware rows."""
    rows = frame[(frame["split"] == split) & (frame["evaluation"] == "task-aware") & (frame["stage"] >= 1)
                 & (frame["task"] <= frame["stage"])]
    return [100 * rows.loc[rows["stage"] == stage, "accuracy"].mean() for stage in (1, 2, 3)]


def table_numbers(output: str) -> list[float]:
    """The per-stage means (percent) of the sgd row of a `report --metric accuracy --format csv` table."""
    rows = [row for row in csv.DictReader(io.StringIO(output)) if row["approach"] == "sgd"]
    return [100 * float(row["mean"]) for row in sorted(rows, key=lambda row: int(row["stage"]))]


def test_report_split_validation_shows_the_validation_numbers(tmp_path: Path) -> None:
    frame = trained(tmp_path, BARELY_TRAINED)
    runner = CliRunner()
    arguments = ["report", "tiny", "--results", str(tmp_path), "--metric", "accuracy", "--format", "csv"]
    default = runner.invoke(app, arguments)
    validation = runner.invoke(app, [*arguments, "--split", "validation"])
    explicit_test = runner.invoke(app, [*arguments, "--split", "test"])
    assert default.exit_code == validation.exit_code == explicit_test.exit_code == 0, validation.output
    expected_validation, expected_test = final_accuracies(frame, "validation"), final_accuracies(frame, "test")
    assert all(abs(mine - other) > 0.1 for mine, other in zip(expected_validation, expected_test))
    assert table_numbers(validation.output) == pytest.approx(expected_validation, rel=1e-12)
    assert table_numbers(default.output) == pytest.approx(expected_test, rel=1e-12)
    assert explicit_test.output == default.output
    report = build_report(tmp_path, "tiny", "accuracy", results=load_results(tmp_path, "tiny", split="validation"))
    [(label, cells)] = report.rows
    assert label == "sgd" and [100 * cell.mean for cell in cells] == pytest.approx(expected_validation, rel=1e-12)
    assert report.notes[0].startswith("split: validation")
    refused = runner.invoke(app, [*arguments, "--split", "valid"])
    flat = " ".join(refused.output.replace("│", " ").split())
    assert refused.exit_code == 2 and "'valid' is not one of 'test', 'validation'" in flat, refused.output


def test_old_results_have_no_validation_numbers_and_report_test_rows_as_before() -> None:
    runner = CliRunner()
    arguments = ["report", "legacy-tiny", "--results", str(OLD_RESULTS)]
    default, explicit = runner.invoke(app, arguments), runner.invoke(app, [*arguments, "--split", "test"])
    assert default.exit_code == explicit.exit_code == 0 and explicit.output == default.output
    loaded = load_results(OLD_RESULTS, "legacy-tiny", split="validation")
    assert loaded.rows.empty and loaded.frame.empty and not loaded.runs.empty
    report = build_report(OLD_RESULTS, "legacy-tiny", "accuracy", results=loaded)
    assert report.rows == [] and any("has validation rows" in note for note in report.notes)


def test_a_protocol_that_holds_out_no_validation_split_says_so_rather_than_to_re_run(tmp_path: Path) -> None:
    online = tiny_spec("mlp", training=replace(TINY_TRAINING, early_stopping=False, max_epochs=1))
    online = replace(online, data=replace(online.data, validation_fraction=0.0))
    for spec in (online, tiny_spec("mlp", training=BARELY_TRAINED)):
        [plan] = plan_runs(spec, ["sgd"], [0], tmp_path / spec.data.validation_fraction.hex())
        assert execute(plan, device=CPU, loader=synthetic_loader()).status == "done"
    only_online = tmp_path / (0.0).hex()
    report = build_report(only_online, "tiny", "accuracy", results=load_results(only_online, "tiny",
                                                                                split="validation"))
    [note] = [note for note in report.notes if "has validation rows" in note]
    assert report.rows == [] and "holds out no validation split" in note and "--force" not in note
    old = build_report(OLD_RESULTS, "legacy-tiny", "accuracy", results=load_results(OLD_RESULTS, "legacy-tiny",
                                                                                    split="validation"))
    assert any("re-run them with --force" in note for note in old.notes)  # stored before validation rows
    # through the CLI it is nothing to report: exit 2 with that one line, as for an unknown benchmark or seed
    cli = CliRunner().invoke(app, ["report", "tiny", "--results", str(only_online), "--split", "validation"])
    assert cli.exit_code == 2 and "holds out no validation split" in cli.output and "Traceback" not in cli.output

    both = tmp_path / "both"  # a run that holds one out beside it: its row, and why the other has no number
    for source in tmp_path.iterdir():
        if source != both:
            shutil.copytree(source, both, dirs_exist_ok=True)
    report = build_report(both, "tiny", "accuracy", results=load_results(both, "tiny", split="validation"))
    assert len(report.rows) == 1
    assert list(report.unmeasured.values()) == ["not measured (its protocol holds out no validation split: "
                                                "data.validation_fraction 0)"]


class AccuracyRecorder(SilentObserver):
    """Keeps the accuracies `task_finished` receives (what the progress display shows after each task)."""

    def __init__(self) -> None:
        self.accuracies: list[list[float]] = []

    def task_finished(self, plan, stage, accuracies) -> None:  # type: ignore[no-untyped-def]
        self.accuracies.append(list(accuracies))


@pytest.mark.parametrize(("scenario", "method", "evaluation"), [
    ("class", "sgd", "task-agnostic"), ("class", "hat", "task-aware"), ("domain", "sgd", "task-aware")])
def test_progress_shows_the_scenario_s_evaluation(tmp_path: Path, scenario: str, method: str,
                                                   evaluation: str) -> None:
    """After each task, the line shows the learned tasks' test accuracies in the evaluation the scenario reports
    (`report`'s and `evaluate`'s default); an approach that needs the task id shows its task-aware ones."""
    kind = "permuted" if scenario == "domain" else "split"  # a domain sequence has tasks of equal size
    spec = tiny_spec("mlp", kind, training=BARELY_TRAINED, scenario=scenario)
    [plan] = plan_runs(spec, [method], [0], tmp_path)
    recorder = AccuracyRecorder()
    rows = pd.DataFrame(execute(plan, device=CPU, loader=synthetic_loader(), observer=recorder).rows)
    learned = rows[(rows["evaluation"] == evaluation) & (rows["task"] <= rows["stage"]) & (rows["split"] == "test")]
    assert recorder.accuracies == [learned.loc[learned["stage"] == stage, "accuracy"].tolist() for stage in (1, 2, 3)]
    assert stage_line(plan, recorder.accuracies[0]).endswith(
        f"% {evaluation} [{100 * recorder.accuracies[0][0]:.1f}]")


def test_progress_shows_test_accuracies(tmp_path: Path) -> None:
    """The accuracies after each task and the means of a finished run (the CLI's progress lines) are test rows."""
    [plan] = plan_runs(tiny_spec("mlp", training=BARELY_TRAINED), ["sgd"], [0], tmp_path)
    recorder = AccuracyRecorder()
    outcome = execute(plan, device=CPU, loader=synthetic_loader(), observer=recorder)
    rows = pd.DataFrame(outcome.rows)
    aware = rows[(rows["evaluation"] == "task-aware") & (rows["task"] <= rows["stage"])]
    by_split = {split: [aware.loc[(aware["split"] == split) & (aware["stage"] == stage), "accuracy"].tolist()
                        for stage in (1, 2, 3)] for split in ("test", "validation")}
    assert by_split["test"] != by_split["validation"]
    assert recorder.accuracies == by_split["test"]
    last = rows[(rows["stage"] == 3) & (rows["split"] == "test")]
    expected = {evaluation: last.loc[last["evaluation"] == evaluation, "accuracy"].mean()
                for evaluation in ("task-aware", "task-agnostic")}
    assert final_means(outcome.rows) == pytest.approx(expected, rel=1e-12)
