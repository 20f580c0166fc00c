"""Results written by an older clbench still report, with the same text.

`tests/fixtures/old-results/` was written by clbench at commit e84c86b (an earlier package layout), with

    clbench fetch mnist --data-dir DATA --mirror MIRROR
    clbench train tests/fixtures/old-results.yaml -m hat,packnet,si --with-references --grid hat.c=0.75,2 \
        --seeds 0 --results tests/fixtures/old-results --data-dir DATA --device cpu

and its checkpoints and lock files deleted. Its run.json files name the reporter modules of that time
(`clbench.hat_report:HatReporter`, `clbench.packnet_report:PackNetReporter`, `clbench.penalty_report:
PenaltyReporter`) and its rows the approach modules of that time. `tests/golden/old-results/` holds what that
clbench printed for it. Both are records of the old code: never regenerate them with a newer clbench; a
difference here is a change of behaviour (or a stored name that no longer resolves).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clbench.cli import app

TESTS = Path(__file__).resolve().parents[1]
FIXTURE = TESTS / "fixtures" / "old-results"
GOLDEN = TESTS / "golden" / "old-results"
BENCHMARK = "legacy-tiny"

CASES = {
    "table.md": ["--table"],
    "monitoring.md": ["--monitoring"],
    "monitoring.csv": ["--monitoring", "--format", "csv"],
    "hat.md": ["--hat"],
    "hat.csv": ["--hat", "--format", "csv"],
}


def report(results: Path, *options: str) -> str:
    result = CliRunner().invoke(app, ["report", BENCHMARK, "--results", str(results), *options])
    assert result.exit_code == 0, result.output
    return result.output.replace(str(results), "<results>")


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_results_report_as_they_did(name: str) -> None:
    assert report(FIXTURE, *CASES[name]) == (GOLDEN / name).read_text(), name


def test_the_fixture_names_the_old_modules() -> None:
    """The fixture really is old: its run.json files name the reporter and approach modules of before the move."""
    texts = "".join(path.read_text() for path in sorted(FIXTURE.glob(f"{BENCHMARK}/*/*/seed-0/run.json")))
    for old in ("clbench.hat_report:HatReporter", "clbench.packnet_report:PackNetReporter",
                "clbench.penalty_report:PenaltyReporter", '"module": "clbench.approaches.hat"'):
        assert old in texts, old
    assert sum(path.stat().st_size for path in FIXTURE.rglob("*") if path.is_file()) < 1_000_000


def test_old_results_draw_the_same_figures(tmp_path: Path) -> None:
    """`--plot` draws the forgetting curves and HAT's figures of the old runs (file names only: pixels vary)."""
    result = CliRunner().invoke(app, ["report", BENCHMARK, "--results", str(FIXTURE), "--hat", "--table",
                                      "--plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    stems = sorted({path.stem for path in tmp_path.iterdir()})
    assert stems == [f"{BENCHMARK}-forgetting-ratio", f"{BENCHMARK}-hat-c=0.75-attention",
                     f"{BENCHMARK}-hat-c=0.75-capacity", f"{BENCHMARK}-hat-c=0.75-layers",
                     f"{BENCHMARK}-hat-c=0.75-reuse", f"{BENCHMARK}-hat-c=2.0-attention",
                     f"{BENCHMARK}-hat-c=2.0-capacity", f"{BENCHMARK}-hat-c=2.0-layers",
                     f"{BENCHMARK}-hat-c=2.0-reuse", f"{BENCHMARK}-hat-sensitivity"]
    assert {path.suffix for path in tmp_path.iterdir()} == {".png", ".pdf"}


def test_runs_that_name_no_reporter_get_the_builtin_ones(tmp_path: Path) -> None:
    """Runs stored before run.json named a reporter (the key absent or null) are still reported, through
    `LEGACY_REPORTERS`, with the same text."""
    import json
    import shutil

    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    for path in results.glob(f"{BENCHMARK}/*/*/seed-0/run.json"):
        run = json.loads(path.read_text())
        del run["monitoring_reporter"]
        path.write_text(json.dumps(run))
    assert report(results, "--monitoring") == (GOLDEN / "monitoring.md").read_text()
    assert report(results, "--table") == (GOLDEN / "table.md").read_text()
