"""Strict specs through the CLI: a misspelled approach in --set/--grid is bad input (exit 2) on every command."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from clbench.approaches.registry import approach_names
from clbench.cli import app

runner = CliRunner()


def _assert_names_haat(output: str) -> None:
    flat = " ".join(output.split())  # rich wraps long lines
    assert "unknown approach 'haat'" in flat and ", ".join(approach_names()) in flat, output


@pytest.mark.parametrize("arguments", [
    ["train", "mnist2", "-m", "sgd", "--set", "haat.smax=3"],
    ["train", "mnist2", "-m", "hat", "--grid", "haat.smax=1,2"],
    ["train", "mnist2", "-m", "hat", "--set", "approaches.haat.smax=3"],
    ["evaluate", "mnist2", "-m", "hat", "--set", "haat.smax=3"],
    ["bench", "mnist2", "-m", "hat", "--device", "cpu", "--set", "haat.smax=3"],
])
def test_misspelled_approach_exits_2_before_any_work(arguments: list[str], tmp_path: Path) -> None:
    results = tmp_path / "r"
    result = runner.invoke(app, [*arguments, "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    _assert_names_haat(result.output)
    assert not results.exists()


def test_split_remainder_exits_2_naming_the_data_set(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd", "--set", "data.classes_per_task=[3]",
                                 "--results", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert "is 3 for mnist, which has 10 classes" in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()
