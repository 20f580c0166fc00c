"""The metric registry (`clbench.metric_registry`; its table in the docs is generated from it): every entry resolves,
`report` computes each metric from the inputs it declares, a metric added with one function and one entry is a
`--metric` choice, and `clbench report --help` reads it without numpy or pandas."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from importchecks import assert_imports_no_torch, cli_code, loaded_modules
from resultbuilders import hand_curve, write_curve_file, write_run

from clbench import curve_metrics, metrics
from clbench.metric_registry import INPUTS, METRICS, PERCENT, UNITS, Metric, register, resolve
from clbench.report.cells import format_cell
from clbench.report.loading import load_results
from clbench.report.statistics import Cell, run_values
from clbench.report.tables import build_report, report_table

JOINT = [[0.95], [0.90, 0.90], [0.90, 0.85, 1.00]]
RANDOM = [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]]
# Rows go on above the diagonal: 0.85, task 2 just before it is learned, is Mammoth's max for it at stage 3.
SGD = [[0.90, 0.85, 0.20], [0.70, 0.80, 0.50], [0.60, 0.50, 0.95]]
INITIAL = [0.10, 0.20, 0.30]
SGD_FLOPS = [100.0, 250.0, 400.0]  # the sgd run's training FLOPs of stages 1, 2, 3


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_resolves_and_declares_what_it_shows(name: str) -> None:
    metric = METRICS[name]
    assert metric.name == name and metric.symbol and metric.title and metric.source and metric.definition
    assert metric.unit in UNITS and set(metric.inputs) <= set(INPUTS)
    assert callable(resolve(metric.function))
    assert metric.explain is None or callable(resolve(metric.explain))


@pytest.mark.parametrize("name", list(METRICS))
def test_every_built_in_metric_says_how_the_peers_compute_it(name: str) -> None:
    # each peer named is cited by a file in backquotes and the commit it was read at (7 hex digits)
    peers = METRICS[name].peers
    assert re.search(r"`[\w/.-]+\.py`", peers) and re.search(r"\b[0-9a-f]{7}\b", peers), peers


def test_a_metric_named_twice_or_with_an_unknown_input_is_refused() -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(METRICS["accuracy"])
    with pytest.raises(ValueError, match="inputs must be among"):
        Metric("toy", "T", PERCENT, "toy", ("learned", "stage-0"), "clbench.metrics:average_accuracy", "-", "-")


def test_references_follow_the_inputs() -> None:
    assert METRICS["forgetting-ratio"].references == ("joint", "random")
    assert METRICS["intransigence"].references == ("joint",)
    assert METRICS["fwt"].references == METRICS["accuracy"].references == ()


def make_results(folder: Path) -> Path:
    write_run(folder, "joint", 0, JOINT)
    write_run(folder, "random", 0, RANDOM)
    write_curve_file(write_run(folder, "sgd", 0, SGD, initial=INITIAL, flops=SGD_FLOPS), hand_curve())
    return folder


def expected_values() -> dict[str, np.ndarray]:
    """Each metric of the sgd run of `make_results`, from `clbench.metrics` called with inputs written out here."""
    learned = np.tril(np.array(SGD)) + np.triu(np.full((3, 3), np.nan), 1)
    joint = np.array([row + [np.nan] * (3 - len(row)) for row in JOINT])
    return {
        "forgetting-ratio": metrics.forgetting_ratio(learned, joint, np.full(3, 0.5)),
        "accuracy": metrics.average_accuracy(learned),
        "bwt": metrics.backward_transfer_by_stage(learned),
        "forgetting": metrics.forgetting_by_stage(learned),
        "forgetting-mammoth": metrics.mammoth_forgetting_by_stage(np.array(SGD)),
        "intransigence": metrics.intransigence(learned, joint),
        "learning-accuracy": metrics.learning_accuracy(learned),
        "fwt": metrics.forward_transfer_by_stage(np.array(SGD), np.array(INITIAL)),
        "train-flops": np.array([100.0, 100.0 + 250.0, 100.0 + 250.0 + 400.0]),  # up to each stage, by hand
        "min-accuracy": curve_metrics.min_accuracy(hand_curve()),
        "worst-case-accuracy": curve_metrics.worst_case_accuracy(hand_curve()),
        "windowed-forgetting": curve_metrics.windowed_forgetting(hand_curve()),
        "stability-gap": curve_metrics.stability_gap(hand_curve()),
        "gap-recovery": curve_metrics.gap_recovery_steps(hand_curve()),
    }


@pytest.mark.parametrize("name", list(METRICS))
def test_report_computes_each_metric_from_the_inputs_it_declares(tmp_path: Path, name: str) -> None:
    expected = expected_values()
    assert set(expected) == set(METRICS)  # a new metric adds its expectation here
    notes: list[str] = []
    values = run_values(load_results(make_results(tmp_path), "b"), name, notes)
    assert values["b/sgd/c0/seed-0"] == pytest.approx(expected[name], nan_ok=True), notes
    assert np.isfinite(values["b/sgd/c0/seed-0"][-1])  # every input was there: a number at the last stage


@pytest.mark.parametrize("name", list(METRICS))
def test_a_task_agnostic_table_says_what_a_r_is_where_the_metric_takes_it(tmp_path: Path, name: str) -> None:
    for method, matrix in (("joint", JOINT), ("random", RANDOM), ("sgd", SGD)):
        write_run(tmp_path, method, 0, matrix, agnostic=matrix, initial=INITIAL if method == "sgd" else None)
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    [evaluation] = [note for note in report_table(build_report(tmp_path, "b", name, results=results)).notes
                    if note.startswith("evaluation: task-agnostic")]
    assert ("A_R^{u<=t} is the random run's accuracy on task u at stage t" in evaluation) == (
        "random" in METRICS[name].inputs)


def test_cells_are_written_in_their_metrics_unit() -> None:
    cell = Cell(0.5, 0.25, 2)
    assert format_cell(cell, "percent") == "50.0 (25.0)" and format_cell(cell, "ratio") == "0.50 (0.25)"
    assert format_cell(Cell(120.4, 15.2, 2), "steps") == "120 (15)"
    with pytest.raises(ValueError, match="unit 'accuracy'"):
        format_cell(cell, "accuracy")


def first_task_accuracy(accuracy: np.ndarray) -> np.ndarray:
    """A^{1<=t}: the accuracy on the first task after each stage (the README's "Adding a metric" example)."""
    return accuracy[:, 0]


FIRST_TASK = Metric("first-task", "A1", PERCENT, "first task's accuracy", ("learned",),
                    "test_metric_registry:first_task_accuracy", "A^{1<=t}", "the README's example")


def test_a_metric_is_one_function_and_one_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(METRICS, "first-task", FIRST_TASK)
    report = build_report(make_results(tmp_path), "b", "first-task")
    assert dict(report.rows)["sgd"][-1].mean == pytest.approx(0.60)


def test_a_registered_metric_is_a_choice_of_report_metric(tmp_path: Path) -> None:
    """Registered before the CLI is imported, a new metric is in `--metric`'s choices and help, and computed."""
    code = ("from clbench.metric_registry import register\n"
            "from test_metric_registry import FIRST_TASK\n"
            "register(FIRST_TASK)\n"
            "from typer.testing import CliRunner\nfrom clbench.cli import app\n"
            "print(CliRunner().invoke(app, ['report', '--help'], env={'COLUMNS': '200'}).output)\n"
            f"print(CliRunner().invoke(app, ['report', 'b', '--results', {str(make_results(tmp_path))!r}, "
            "'--metric', 'first-task', '--format', 'csv']).output)\n")
    environment = {"PYTHONPATH": f"{Path(__file__).parent}:{':'.join(sys.path)}"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    help_text, csv = result.stdout.split("benchmark,approach,metric", 1)
    words = " ".join(re.sub(r"[│╭╮╰╯─]", " ", help_text).split())
    assert "first-task: first task's accuracy A1, the README's example." in words
    table = pd.read_csv(io.StringIO("benchmark,approach,metric" + csv))
    assert table[table["approach"] == "sgd"]["mean"].tolist() == pytest.approx([0.90, 0.70, 0.60])


def test_an_unknown_metric_is_refused_by_its_choices(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from clbench.cli import app

    result = CliRunner().invoke(app, ["report", "b", "--results", str(make_results(tmp_path)), "--metric", "rho"])
    words = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert result.exit_code == 2 and "'rho' is not one of 'forgetting-ratio', 'accuracy'," in words


def test_report_help_imports_neither_numpy_nor_pandas() -> None:
    """`--metric`'s choices and help come from the registry, which imports nothing heavy, nor `clbench.report`."""
    assert_imports_no_torch(cli_code(["report", "--help"]), also=("numpy", "pandas"))
    assert loaded_modules("import clbench.metric_registry", ["clbench.report", "numpy", "pandas"]) == []
