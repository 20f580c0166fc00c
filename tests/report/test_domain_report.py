"""How `clbench report` shows a domain-scenario run: its one evaluation, its own domain references, a note.

Expected values by hand from rho^{<=t} = 1/t sum_{u<=t} [(A^{u<=t} - R_u) / (J^{u<=t} - R_u) - 1], R_u the mean of
the random run's column u.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelpers import flat
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.loading import load_results
from clbench.report.statistics import run_values
from clbench.report.tables import build_report

DOMAIN = {"scenario": "domain", "data_hash": "dd", "reference_hash": "rd", "overrides": ["data.scenario=domain"]}
TASK = {"scenario": "task", "data_hash": "dt", "reference_hash": "rt", "overrides": []}


def domain_and_task_runs(results: Path) -> None:
    """Benchmark `b` in both scenarios: domain runs store task-aware rows only, task runs both evaluations."""
    write_run(results, "sgd", 0, [[0.8], [0.6, 0.9]], config_hash="sd", **DOMAIN)
    write_run(results, "joint", 0, [[0.9], [0.9, 0.9]], config_hash="jd", **DOMAIN)
    write_run(results, "random", 0, [[0.1], [0.1, 0.1]], config_hash="rd", **DOMAIN)
    write_run(results, "sgd", 0, [[1.0], [0.7, 1.0]], config_hash="st", agnostic=[[0.5], [0.25, 0.5]], **TASK)
    write_run(results, "joint", 0, [[1.0], [1.0, 1.0]], config_hash="jt", agnostic=[[0.5], [0.5, 0.5]], **TASK)
    write_run(results, "random", 0, [[0.5], [0.5, 0.5]], config_hash="rt", agnostic=[[0.25], [0.25, 0.25]], **TASK)


def curves(results: Path, evaluation: str) -> tuple[dict[str, list[float]], list[str]]:
    notes: list[str] = []
    values = run_values(load_results(results, "b", evaluation=evaluation), "forgetting-ratio", notes)
    return {run_id: [round(float(v), 6) for v in curve] for run_id, curve in values.items()}, notes


@pytest.mark.parametrize("evaluation", ["task-aware", "task-agnostic"])
def test_a_domain_run_is_measured_against_the_domain_references_under_either_evaluation(
        evaluation: str, tmp_path: Path) -> None:
    domain_and_task_runs(tmp_path)
    values, notes = curves(tmp_path, evaluation)
    assert notes == []
    # domain: R = (0.1, 0.1), J = 0.9: t=1 (0.8-0.1)/0.8-1 = -0.125; t=2 1/2[(0.6-0.1)/0.8-1 + (0.9-0.1)/0.8-1]
    # = -0.1875 (against the task scenario's references, t=1 would be (0.8-0.5)/(1.0-0.5)-1 = -0.4)
    assert values["b/sgd/sd/seed-0"] == [-0.125, -0.1875]
    # task, task-aware: R = 0.5: t=2 1/2[(0.7-0.5)/0.5-1 + 0] = -0.3; task-agnostic: R = 0.25, J = 0.5:
    # t=2 1/2[(0.25-0.25)/0.25-1 + 0] = -0.5
    assert values["b/sgd/st/seed-0"] == ([0.0, -0.3] if evaluation == "task-aware" else [0.0, -0.5])


def test_a_domain_run_has_one_row_per_cell_and_the_report_says_why(tmp_path: Path) -> None:
    domain_and_task_runs(tmp_path)
    results = load_results(tmp_path, "b", evaluation="task-agnostic")
    assert results.rows is not None
    domain = results.rows[results.rows["run_id"] == "b/sgd/sd/seed-0"]
    assert len(domain) == 3 and not domain.duplicated(["stage", "task"]).any()  # stored once, no task-agnostic copy
    report = build_report(tmp_path, "b", results=results)
    labels = {label: [round(cell.mean, 6) for cell in cells] for label, cells in report.rows}
    assert labels == {"sgd (scenario=domain)": [-0.125, -0.1875], "sgd (scenario=task)": [0.0, -0.5]}
    [note] = [note for note in report.notes if note.startswith("scenario domain")]
    assert "3 of 6 runs" in note and "one number, stored once" in note
    assert report.unmeasured == {}  # never "needs the task id" for a domain run


def test_a_domain_run_without_domain_references_names_the_command_that_makes_them(tmp_path: Path) -> None:
    domain_and_task_runs(tmp_path)
    write_run(tmp_path, "sgd", 1, [[0.8], [0.6, 0.9]], config_hash="sd", **DOMAIN)
    write_run(tmp_path, "joint", 1, [[1.0], [1.0, 1.0]], config_hash="jt", **TASK)  # a task-scenario joint only
    values, notes = curves(tmp_path, "task-aware")
    assert "b/sgd/sd/seed-1" not in values
    [note] = notes
    assert "left out b/sgd/sd/seed-1: no joint and no random reference for seed 1" in note
    assert f"clbench train b -m joint,random --seeds 1 --set data.scenario=domain --results {tmp_path}" in note


def test_report_table_of_domain_runs_through_the_cli(tmp_path: Path) -> None:
    for method, matrix in (("sgd", [[0.8], [0.6, 0.9]]), ("joint", [[0.9], [0.9, 0.9]]),
                           ("random", [[0.1], [0.1, 0.1]])):
        write_run(tmp_path, method, 0, matrix, config_hash=f"{method[0]}d", **DOMAIN)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--table", "--evaluation",
                                      "task-agnostic"])
    output = flat(result.output)
    assert result.exit_code == 0, output
    assert "| sgd | -0.12 (–) | -0.19 (–) |" in output
    assert "scenario domain (every run): one head shared by every task and no task id" in output
    assert "needs the task id" not in output
