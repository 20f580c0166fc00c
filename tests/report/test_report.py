"""Report tables from hand-made results (`tests/resultbuilders.py`): exact text, missing references and failed
runs named."""

from __future__ import annotations

from pathlib import Path

import pytest
from resultbuilders import NAN, write_run

from clbench.report.render import render
from clbench.report.tables import build_report
from clbench.results import run_directory, write_json


def make_results(tmp_path: Path) -> Path:
    for seed in (0, 1):
        write_run(tmp_path, "joint", seed, [[0.9], [0.9, 0.9]])
        write_run(tmp_path, "random", seed, [[0.5], [0.5, 0.5]])
    write_run(tmp_path, "sgd", 0, [[0.9], [0.7, 0.9]])  # rho2 = (-0.5 + 0) / 2 = -0.25
    write_run(tmp_path, "sgd", 1, [[0.9], [0.5, 0.9]])  # rho2 = (-1 + 0) / 2 = -0.5
    write_run(tmp_path, "hat", 0, [[0.9], [0.9, 0.8]])  # rho2 = (0 - 0.25) / 2 = -0.125
    write_run(tmp_path, "hat", 1, [[0.9], [0.9, 0.9]])  # rho2 = 0
    return tmp_path


def test_forgetting_ratio_table_golden(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b")
    expected = (
        "| approach | rho<=1      | rho<=2       | seeds |\n"
        "|----------|-------------|--------------|-------|\n"
        "| sgd      | 0.00 (0.00) | -0.38 (0.18) | 2     |\n"
        "| hat      | 0.00 (0.00) | -0.06 (0.09) | 2     |\n"
    )
    assert render(report, "markdown") == expected


def test_accuracy_table_golden(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b", metric="accuracy")
    text = render(report, "markdown")
    assert text.splitlines()[2] == "| random   | 50.0 (0.0) | 50.0 (0.0) | 2     |"
    assert text.splitlines()[3] == "| sgd      | 90.0 (0.0) | 75.0 (7.1) | 2     |"
    assert [label for label, _ in report.rows] == ["random", "sgd", "hat", "joint"]


def test_latex_and_csv(tmp_path: Path) -> None:
    report = build_report(make_results(tmp_path), "b")
    latex = render(report, "latex")
    assert "\\begin{tabular}{lccc}" in latex and "$\\rho^{\\leq 2}$" in latex
    assert "hat & 0.00 (0.00) & -0.06 (0.09) & 2 \\\\" in latex
    csv_lines = render(report, "csv").splitlines()
    assert csv_lines[0] == "benchmark,approach,metric,stage,mean,std,seeds"
    assert csv_lines[2].startswith("b,sgd,forgetting-ratio,2,-0.375,0.17677")


def test_missing_reference_is_named_with_the_command(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "sgd", 2, [[0.9], [0.7, 0.9]])
    report = build_report(tmp_path, "b")
    [note] = report.notes
    assert "b/sgd/c0/seed-2" in note and "no joint and no random reference for seed 2" in note
    assert "clbench train b -m joint,random --seeds 2 --set data.max_train_samples=9" in note
    assert dict(report.rows)["sgd"][1].n == 2  # seed 2 not averaged


def test_failed_and_partial_runs_are_left_out_and_named(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "sgd", 3, [[0.9], [NAN, 0.9]])
    failed_dir = run_directory(tmp_path, "b", "sgd", "c0", 4)
    write_json(failed_dir / "run.json", {"run_id": "b/sgd/c0/seed-4", "status": "failed", "error": "OOM",
                                         "method": "sgd", "seed": 4})
    report = build_report(tmp_path, "b")
    assert any("b/sgd/c0/seed-4: failed (OOM)" in note for note in report.notes)
    assert any("b/sgd/c0/seed-3: its accuracy matrix is incomplete" in note for note in report.notes)
    assert dict(report.rows)["sgd"][1].n == 2


def test_configs_of_one_method_are_kept_apart(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "lwf", 0, [[0.9], [0.6, 0.8]], config_hash="c1", hyperparameters={"lamb": 1, "temperature": 1})
    write_run(tmp_path, "lwf", 0, [[0.9], [0.9, 0.8]], config_hash="c2", hyperparameters={"lamb": 2, "temperature": 1})
    rows = dict(build_report(tmp_path, "b").rows)
    assert rows["lwf (lamb=1)"][1].mean == pytest.approx(-0.5)  # (-0.75 - 0.25) / 2
    assert rows["lwf (lamb=2)"][1].mean == pytest.approx(-0.125)


def test_report_never_mixes_references_of_other_data(tmp_path: Path) -> None:
    make_results(tmp_path)
    write_run(tmp_path, "ewc", 0, [[0.9], [0.9, 0.9]], data_hash="other")
    report = build_report(tmp_path, "b")
    assert "ewc" not in dict(report.rows)
    assert any("ewc" in note and "data other" in note for note in report.notes)
