"""`clbench report` output against golden files (tests/golden/), every table kind and format.

The fixture is hand-made: 3 tasks; joint and random references on seeds 0-2; sgd on seeds 0-1 with seed 2
failed (run.json only); hat on seeds 0-2 with monitoring tables and a parameter count; ewc with a partial
matrix on seed 2; bench timings in `_bench`. Regenerate after an intended change with
`CLBENCH_UPDATE_GOLDEN=1 python -m pytest tests/core/test_report_golden.py`, then read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_report import NAN, write_bench, write_hat_tables, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.cli.report import ReportRequest, run_report

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
HAT = {"c": 0.75, "smax": 400}
PARAMETERS = 1_917_610


def golden_results(root: Path) -> Path:
    """The fixture results folder (see the module docstring); the numbers are chosen to be checked by hand."""
    for seed in range(3):
        write_run_json(write_run(root, "joint", seed, [[0.9], [0.9, 0.9], [0.9, 0.9, 0.9]], timing=(30.0, 3, 30)))
        write_run_json(write_run(root, "random", seed, [[0.5], [0.5, 0.5], [0.5, 0.5, 0.5]], timing=(0.5, 1, 10)))
    write_run_json(write_run(root, "sgd", 0, [[0.9], [0.7, 0.9], [0.6, 0.7, 0.9]], timing=(10.0, 5, 50)))
    write_run_json(write_run(root, "sgd", 1, [[0.9], [0.5, 0.9], [0.5, 0.6, 0.9]], timing=(12.0, 5, 50)))
    failed = root / "b" / "sgd" / "c0" / "seed-2"
    write_run_json(failed, status="failed", error="RuntimeError: out of memory")
    hat_matrices = ([[0.9], [0.9, 0.8], [0.9, 0.8, 0.9]], [[0.9], [0.9, 0.9], [0.85, 0.9, 0.9]],
                    [[0.9], [0.88, 0.9], [0.88, 0.88, 0.86]])
    for seed, matrix in enumerate(hat_matrices):
        run_dir = write_run(root, "hat", seed, matrix, config_hash="h1", hyperparameters=HAT, timing=(20.0, 4, 40))
        write_run_json(run_dir, parameters=PARAMETERS)
        write_hat_tables(run_dir, hat_capacity(seed), {(1, 2): 0.5 + 0.1 * seed, (1, 3): 0.25, (2, 3): 0.75})
    ewc = {"lamb": 5000}
    for seed, matrix in enumerate(([[0.9], [0.8, 0.9], [0.7, 0.8, 0.9]], [[0.9], [0.8, 0.85], [0.8, 0.8, 0.9]],
                                   [[0.9], [NAN, 0.9], [0.8, 0.8, 0.9]])):
        write_run_json(write_run(root, "ewc", seed, matrix, config_hash="e1", hyperparameters=ewc,
                                 timing=(15.0, 5, 50)), parameters=PARAMETERS)
    write_bench(root, [{"method": "hat", "forward_ms": 4.0, "forward_backward_ms": 11.7},
                       {"method": "hat", "forward_ms": 9.9, "forward_backward_ms": 99.9,
                        "measured_utc": "2024-01-01T00:00:00+00:00"},  # older: not shown
                       {"method": "sgd", "forward_ms": 2.5, "forward_backward_ms": 6.6},
                       {"benchmark": "other", "method": "ewc", "forward_ms": 1.0, "forward_backward_ms": 2.0}])
    return root


def hat_capacity(seed: int) -> dict[tuple[str, int, str], float]:
    """Cumulative use grows by 0.1 per task in fc1 and 0.2 in fc2; each task alone uses 0.1 / 0.2 (+0.01 seed)."""
    capacity = {}
    for stage in (1, 2, 3):
        for layer, step in (("fc1", 0.1), ("fc2", 0.2)):
            capacity[("cumulative", stage, layer)] = step * stage + 0.01 * seed
            capacity[("task", stage, layer)] = step + 0.01 * seed
        capacity[("cumulative", stage, "total")] = 0.15 * stage + 0.01 * seed
        capacity[("task", stage, "total")] = 0.15 + 0.01 * seed
    return capacity


CASES = {
    "forgetting-ratio.md": {}, "forgetting-ratio.csv": {"fmt": "csv"}, "forgetting-ratio.tex": {"fmt": "latex"},
    "forgetting-ratio.html": {"fmt": "html"}, "forgetting-ratio-ci.md": {"ci": True},
    "forgetting-ratio-ci.csv": {"ci": True, "fmt": "csv"}, "accuracy.md": {"metric": "accuracy"},
    "summary.md": {"table": False, "summary": True}, "summary.csv": {"table": False, "summary": True, "fmt": "csv"},
    "summary.tex": {"table": False, "summary": True, "fmt": "latex"},
    "summary.html": {"table": False, "summary": True, "fmt": "html"},
    "time.md": {"table": False, "time": True}, "time.csv": {"table": False, "time": True, "fmt": "csv"},
    "hat.md": {"table": False, "hat": True}, "hat.csv": {"table": False, "hat": True, "fmt": "csv"},
    "all-seeds-0-1.md": {"summary": True, "time": True, "hat": True, "seeds": [0, 1]},
}


def request(**options: object) -> ReportRequest:
    defaults = {"table": True, "summary": False, "time": False, "hat": False, "fmt": "markdown",
                "metric": "forgetting-ratio", "ci": False, "references": False, "seeds": None, "plot": None}
    return ReportRequest(**(defaults | options))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return golden_results(tmp_path_factory.mktemp("golden-results"))


def portable(text: str, results: Path) -> str:
    return text.replace(str(results), "<results>")


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_matches_golden_file(results: Path, name: str) -> None:
    text, figures = run_report(results, "b", request(**CASES[name]))
    text = portable(text, results)
    path = GOLDEN / name
    if os.environ.get("CLBENCH_UPDATE_GOLDEN"):
        path.write_text(text)
    assert figures == []
    assert text == path.read_text(), f"{name} differs from {path} (CLBENCH_UPDATE_GOLDEN=1 rewrites it)"


def test_cli_prints_and_writes_the_golden_table(results: Path, tmp_path: Path) -> None:
    output = tmp_path / "table.tex"
    result = CliRunner().invoke(app, ["report", "b", "--results", str(results), "--format", "latex",
                                      "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert output.read_text() == (GOLDEN / "forgetting-ratio.tex").read_text()


def test_golden_numbers_are_the_hand_computed_ones() -> None:
    """The golden table's sgd row, by hand: A_J = 0.9, A_R = 0.5, so rho^{u<=t} = (A - 0.5) / 0.4 - 1.

    seed 0: rho<=2 = (-0.5 + 0) / 2 = -0.25, rho<=3 = (-0.75 - 0.5 + 0) / 3 = -0.41667;
    seed 1: rho<=2 = (-1 + 0) / 2 = -0.5, rho<=3 = (-1 - 0.75 + 0) / 3 = -0.58333;
    mean (std): -0.375 (0.17678), -0.5 (0.11785); 95% CI half-width with 2 seeds: 12.7062 * std / sqrt(2).
    """
    rows = {line.split("|")[1].strip(): line for line in (GOLDEN / "forgetting-ratio.md").read_text().splitlines()
            if line.startswith("| ")}
    assert rows["sgd"] == "| sgd      | 0.00 (0.00) | -0.38 (0.18) | -0.50 (0.12) | 2     |"
    ci_rows = [line for line in (GOLDEN / "forgetting-ratio-ci.md").read_text().splitlines() if "| sgd" in line]
    assert ci_rows == ["| sgd      | 0.00 ± 0.00 | -0.38 ± 1.59 | -0.50 ± 1.06 | 2     |"]
