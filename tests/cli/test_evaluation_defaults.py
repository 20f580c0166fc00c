"""Which evaluation `train`'s lines, `evaluate`, `report` and `tune` show by default (the one the runs' scenario
reports), and that `evaluate`'s printed means are `report`'s: a tiny two-task npz benchmark trained through Typer's
runner, and results written by hand."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from clihelpers import TINY, flat
from filebuilders import write_block_arrays
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.cli.evaluate import stage_means, table_rows
from clbench.errors import ResultsError
from clbench.report.loading import load_results
from clbench.report.summary import build_summary
from clbench.report.tables import build_report
from clbench.results import EVALUATION_FILE, runs_evaluation, scenario_evaluation

runner = CliRunner()
SPEC = """\
name: two-tasks
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28, validation_fraction: 0.25}
network: {kind: mlp, hidden: [8]}
"""


def write_spec(folder: Path) -> Path:
    """Four classes, each a bright band of its own rows plus noise (24 training and 8 test images a class), as two
    tasks of two classes."""
    write_block_arrays(folder / "arrays.npz")
    (folder / "two.yaml").write_text(SPEC)
    return folder / "two.yaml"


def invoke(*arguments: str) -> tuple[int, str]:
    result = runner.invoke(app, list(arguments))
    return result.exit_code, flat(result.output)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, tuple[int, str]]]:
    """sgd and hat trained and re-evaluated in the task scenario (the spec file, its results, evaluate's output);
    evaluate's exit code and output, by evaluation asked (None: the default)."""
    folder = tmp_path_factory.mktemp("two-tasks")
    spec, results = write_spec(folder), folder / "results"
    common = ["--results", str(results), "--data-dir", str(folder / "data"), *TINY]
    code, output = invoke("train", str(spec), "-m", "sgd,hat", *common)
    assert code == 0, output
    outputs = {name: invoke("evaluate", str(spec), "-m", "sgd,hat", *common, *extra)
               for name, extra in (("default", []), ("task-agnostic", ["--evaluation", "task-agnostic"]))}
    return spec, results, outputs


def printed_rows(output: str) -> list[list[str]]:
    """The (stage, mean accuracy, per task) cells of each row of the rich table `evaluate` printed."""
    cells = [cell.strip() for cell in output.split("│")]
    return [cells[index + 1:index + 4] for index, cell in enumerate(cells) if cell.startswith("two-tasks/")]


def evaluated_rows(results: Path, method: str) -> list[dict]:
    [path] = results.glob(f"two-tasks/{method}/*/seed-0/{EVALUATION_FILE}")
    rows = pd.read_parquet(path)
    return rows[rows["split"] == "test"].to_dict("records")


def by_hand(rows: list[dict], evaluation: str) -> dict[int, float]:
    """Stage -> mean test accuracy over the tasks learned so far (u <= t), in `evaluation`, from the stored rows."""
    frame = pd.DataFrame(rows)
    learned = frame[(frame["evaluation"] == evaluation) & (frame["task"] <= frame["stage"]) & (frame["stage"] >= 1)]
    return learned.groupby("stage")["accuracy"].mean().to_dict()


def test_evaluate_prints_the_mean_of_the_learned_tasks_in_one_evaluation(trained) -> None:  # type: ignore[no-untyped-def]
    spec, results, outputs = trained
    code, output = outputs["default"]
    assert code == 0, output
    for method in ("sgd", "hat"):
        rows = evaluated_rows(results, method)
        expected = by_hand(rows, "task-aware")
        assert [stage for stage, _, _ in stage_means(rows, "task-aware")] == [1, 2]
        assert {stage: mean for stage, mean, _ in stage_means(rows, "task-aware")} == pytest.approx(expected)
        printed = table_rows(f"two-tasks/{method}", rows, "task-aware")
        assert [row[2] for row in printed] == [f"{100 * expected[stage]:.2f}%" for stage in (1, 2)]
        assert [len(row[3].split()) for row in printed] == [1, 2]  # one number per learned task
        for row in printed:
            assert row[1:] in printed_rows(output)  # the printed table shows these rows
    table = pd.read_csv(io.StringIO(runner.invoke(app, ["report", str(spec), "--results", str(results), "--metric",
                                                         "accuracy", "--format", "csv"]).output))
    for method in ("sgd", "hat"):
        reported = table[table["approach"] == method].set_index("stage")["mean"].to_dict()
        assert reported == pytest.approx(by_hand(evaluated_rows(results, method), "task-aware"))


def test_evaluate_in_the_evaluation_asked_says_which_runs_have_none(trained) -> None:  # type: ignore[no-untyped-def]
    _, results, outputs = trained
    code, output = outputs["task-agnostic"]
    assert code == 0, output
    rows = evaluated_rows(results, "sgd")
    expected = by_hand(rows, "task-agnostic")
    assert [row[2] for row in table_rows("r", rows, "task-agnostic")] == [f"{100 * expected[s]:.2f}%" for s in (1, 2)]
    assert table_rows("r", evaluated_rows(results, "hat"), "task-agnostic")[0][2] == "needs the task id"
    assert "needs the task id" in output and "task-agnostic" in output


@pytest.mark.parametrize(("scenario", "evaluation"), [("class", "task-agnostic"), ("domain", "task-aware")])
def test_evaluate_defaults_to_the_scenario_s_evaluation(tmp_path: Path, scenario: str, evaluation: str) -> None:
    spec = write_spec(tmp_path)
    common = ["--results", str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), *TINY, "--set",
              f"data.scenario={scenario}"]
    assert invoke("train", str(spec), "-m", "sgd", *common)[0] == 0
    code, output = invoke("evaluate", str(spec), "-m", "sgd", *common)
    assert code == 0, output
    rows = evaluated_rows(tmp_path / "results", "sgd")
    expected = by_hand(rows, evaluation)
    assert [row[1] for row in printed_rows(output)] == [f"{100 * expected[stage]:.2f}%" for stage in (1, 2)]
    assert f"test accuracy A<=t, {evaluation}" in output


def test_a_domain_run_reads_its_one_evaluation_under_either_name() -> None:
    rows = [{"stage": stage, "task": task, "evaluation": "task-aware", "accuracy": accuracy}
            for stage, task, accuracy in ((1, 1, 0.8), (1, 2, 0.1), (2, 1, 0.6), (2, 2, 0.9))]
    expected = [(1, 0.8, [0.8]), (2, 0.75, [0.6, 0.9])]
    for evaluation in ("task-agnostic", "task-aware"):
        means = stage_means(rows, evaluation, "domain")
        assert [(stage, round(mean, 12), accuracies) for stage, mean, accuracies in means] == expected
    assert stage_means(rows, "task-agnostic", "task") == []


def test_the_scenario_chooses_the_default_evaluation() -> None:
    assert [scenario_evaluation(name) for name in ("task", "class", "domain", None)] == \
        ["task-aware", "task-agnostic", "task-aware", "task-aware"]
    assert runs_evaluation(["class", "domain"], "here") == "task-agnostic"
    assert runs_evaluation(["task", "domain"], "here") == "task-aware"
    assert runs_evaluation([], "here") == "task-aware"
    with pytest.raises(ResultsError, match=r"here holds runs of the class and task scenarios.*pass --evaluation"):
        runs_evaluation(["task", "class"], "here")


AWARE = [[0.9], [0.8, 0.9]]
AGNOSTIC = [[0.9], [0.3, 0.7]]


def write_scenario(results: Path, scenario: str, methods: tuple[str, ...] = ("sgd",)) -> None:
    for method in methods:
        write_run(results, method, 0, AWARE, config_hash=f"{scenario[:2]}{method}", scenario=scenario,
                  agnostic=None if method == "hat" or scenario == "domain" else AGNOSTIC)  # as the engine stores


@pytest.mark.parametrize(("scenario", "evaluation", "final"), [
    ("task", "task-aware", (0.8 + 0.9) / 2), ("class", "task-agnostic", (0.3 + 0.7) / 2),
    ("domain", "task-aware", (0.8 + 0.9) / 2)])
def test_report_defaults_to_the_scenario_s_evaluation(tmp_path: Path, scenario: str, evaluation: str,
                                                      final: float) -> None:
    results = tmp_path / "results"
    write_scenario(results, scenario)
    loaded = load_results(results, "b", evaluation=None)
    assert loaded.evaluation == evaluation
    report = build_report(results, "b", "accuracy", results=loaded)
    assert report.rows[0][1][-1].mean == pytest.approx(final)
    csv = pd.read_csv(io.StringIO(runner.invoke(app, ["report", "b", "--results", str(results), "--metric",
                                                       "accuracy", "--format", "csv"]).output))
    assert csv.loc[csv["stage"] == 2, "mean"].tolist() == pytest.approx([final])


def test_class_runs_name_their_evaluation_and_an_asked_one_is_noted(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_scenario(results, "class", ("sgd", "hat"))
    summary = build_summary(load_results(results, "b", evaluation=None))
    assert summary.notes[0] == "evaluation: task-agnostic (argmax over every class seen so far, no task id)"
    report = build_report(results, "b", "accuracy", results=load_results(results, "b", evaluation=None))
    assert report.unmeasured == {"hat": "needs the task id"}
    asked = build_summary(load_results(results, "b", evaluation="task-aware"))
    assert asked.notes[0].startswith("evaluation task-aware (--evaluation) for class-scenario runs (every run), "
                                     "whose comparison reports task-agnostic")


def test_runs_of_two_scenarios_need_an_asked_evaluation(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_scenario(results, "task")
    write_scenario(results, "class")
    code, output = invoke("report", "b", "--results", str(results))
    assert code == 2, output
    assert "holds runs of the class and task scenarios" in output and "pass --evaluation" in output
    code, output = invoke("report", "b", "--results", str(results), "--evaluation", "task-aware", "--metric",
                          "accuracy")
    assert code == 0, output
    assert "evaluation task-aware (--evaluation) for class-scenario runs (1 of 2 runs)" in output


def test_old_results_without_a_scenario_report_task_aware_without_a_note(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_run(results, "sgd", 0, AWARE, schema_version=1)
    loaded = load_results(results, "b", evaluation=None)
    assert loaded.evaluation == "task-aware"
    assert build_report(results, "b", "accuracy", results=loaded).notes == []
