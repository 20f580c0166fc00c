"""`clbench report` output against golden files (tests/golden/), every table kind and format.

The fixture is hand-made (`golden_results` in tests/resultbuilders.py): 3 tasks; joint and random references on
seeds 0-2; sgd on seeds 0-1 with seed 2 failed (run.json only); hat on seeds 0-2 with monitoring tables and a
parameter count; ewc with a partial matrix on seed 2; bench timings in `_bench`. Regenerate after an intended
change with `CLBENCH_UPDATE_GOLDEN=1 python -m pytest tests/report/test_report_golden.py`, then read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from resultbuilders import GOLDEN, golden_results, portable
from typer.testing import CliRunner

from clbench.cli import app
from clbench.cli.report import ReportRequest, run_report

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
    assert portable(output.read_text(), results) == (GOLDEN / "forgetting-ratio.tex").read_text()


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
