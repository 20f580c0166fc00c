"""`clbench train`'s log lines: one plain `LEVEL message` line each when the output is not a terminal (a pipe, a
file, a cluster's log), rich's lines without a source path column on a terminal."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from clbench.cli.common import console
from clbench.cli.progress import RunsOverview

LONG = "done mnist5 ewc seed 0: mean accuracy 94.0% task-aware, 40.8% task-agnostic (34 s)"  # wider than 40 columns


def lines_of(text: str) -> list[str]:
    """The text without terminal escape codes, one entry per line (carriage returns too)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n").splitlines()


def failed_outcome() -> SimpleNamespace:
    plan = SimpleNamespace(spec=SimpleNamespace(name="b"), method="sgd", seed=0, run_id="b/sgd/c0/seed-0",
                           run_dir=Path("/results/b/sgd/c0/seed-0"))
    return SimpleNamespace(plan=plan, status="failed", error="RuntimeError: boom")


def test_log_lines_off_a_terminal_are_plain_level_lines_never_wrapped() -> None:
    piped = Console(file=io.StringIO(), width=40)  # not a terminal
    with RunsOverview(piped, 1) as overview:
        overview.log(f"[green]{LONG}[/]")
        overview.run_ended(failed_outcome())  # type: ignore[arg-type]
    lines = lines_of(piped.file.getvalue())  # type: ignore[attr-defined]
    assert f"INFO {LONG}" in lines
    assert "ERROR failed b sgd seed 0: RuntimeError: boom (details in /results/b/sgd/c0/seed-0/run.json)" in lines
    assert not any("progress.py" in line for line in lines)


def test_log_lines_on_a_terminal_name_no_source_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # the CLI's console, as on a terminal
    monkeypatch.setenv("COLUMNS", "200")
    terminal = console()
    terminal.file = io.StringIO()
    assert terminal.is_terminal
    with RunsOverview(terminal, 1) as overview:
        overview.log(LONG)
    [line] = [line.rstrip() for line in lines_of(terminal.file.getvalue()) if "mnist5" in line]
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] " + re.escape(LONG), line), line
