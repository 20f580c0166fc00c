"""What every command's output must satisfy, whatever the command: no traceback, a refusal in one line, the
numbers `evaluate` prints as they are stored, and the `clbench ...` commands it prints accepted when pasted.

Shared by the feature-matrix tests (tests/cli/test_feature_matrix.py); the console must be wide (`COLUMNS`) for
rich not to wrap a line or a table cell."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

# The commands whose printed form acts on a results folder: pasted, they must name the folder of the output.
RESULTS_COMMANDS = ("train", "tune", "evaluate", "report")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b|\.\.\.")  # `-m METHOD`, `--grid KEY=V1,V2,...`


def assert_no_traceback(result) -> None:  # type: ignore[no-untyped-def]
    """No Python exception escaped the command (a SystemExit is how a command exits) and none was printed."""
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not escaped, f"{type(result.exception).__name__}: {result.exception}\n{result.output}"
    assert "Traceback" not in result.output, result.output


def assert_exit(result, expected: int) -> None:  # type: ignore[no-untyped-def]
    """The exit code `expected`, no traceback, and for a refusal (2) its reason in one line."""
    assert_no_traceback(result)
    assert result.exit_code == expected, f"exit {result.exit_code}, expected {expected}:\n{result.output}"
    if expected == 2:
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1, f"a refusal in {len(lines)} lines:\n{result.output}"


def pasteable(output: str) -> list[list[str]]:
    """The `clbench ...` commands in backticks in `output` that a user would paste as they are: those naming a
    benchmark (an argument right after the command) and holding no placeholder (`METHOD`, `KEY=...`); a mention
    such as `clbench tune` or `clbench report --monitoring` is a name, not a command. Arguments without `clbench`."""
    from clihelpers import pasted_commands

    return [arguments for arguments in pasted_commands(output)
            if len(arguments) >= 2 and not arguments[1].startswith("-")
            and not any(PLACEHOLDER.search(argument) for argument in arguments)]


def option_value(arguments: list[str], name: str) -> str | None:
    """The value of option `name` (`--results X` or `--results=X`) in a command's arguments, else None."""
    for index, argument in enumerate(arguments):
        if argument == name and index + 1 < len(arguments):
            return arguments[index + 1]
        if argument.startswith(f"{name}="):
            return argument.split("=", 1)[1]
    return None


def assert_pasted_commands_work(output: str, results: Path | None,
                                invoke: Callable[[list[str]], object]) -> list[list[str]]:
    """Every pasteable command of `output` that acts on results names `results`, the folder of the command that
    printed it (pasted, it must not write into ./results; None: that command has no results folder), and `invoke`
    (which runs it through the CLI) exits 0 without a traceback. The commands checked."""
    commands = pasteable(output)
    for arguments in commands:
        if results is not None and arguments[0] in RESULTS_COMMANDS:
            named = option_value(arguments, "--results")
            assert named is not None and Path(named).resolve() == results.resolve(), \
                f"`clbench {' '.join(arguments)}` does not name --results {results}"
        result = invoke(arguments)
        assert_no_traceback(result)
        assert result.exit_code == 0, f"`clbench {' '.join(arguments)}` exits {result.exit_code}:\n{result.output}"
    return commands


def evaluate_table(output: str) -> list[tuple[str, int, float]]:
    """(run id, stage, mean accuracy as a fraction) of every row of `evaluate`'s printed table that has a stage
    (a run's later rows may leave the run column empty: the run above)."""
    rows: list[tuple[str, int, float]] = []
    run_id = ""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) < 3 or not cells[1].isdigit() or not cells[2].endswith("%"):
            continue
        run_id = cells[0] or run_id
        rows.append((run_id, int(cells[1]), float(cells[2].rstrip("%")) / 100))
    return rows


def stored_stage_means(path: Path, evaluation: str) -> dict[int, float]:
    """Stage t -> the mean test accuracy over the tasks learned so far (1 <= u <= t) of one stored file's rows in
    `evaluation`, by hand from the rows (a domain-scenario run stores its one evaluation as task-aware)."""
    frame = pd.read_parquet(path)
    frame = frame[frame["split"].fillna("test") == "test"]
    stored = "task-aware" if (frame["scenario"] == "domain").all() else evaluation
    learned = frame[(frame["evaluation"] == stored) & (frame["task"] >= 1) & (frame["task"] <= frame["stage"])]
    return {int(stage): float(group["accuracy"].mean()) for stage, group in learned.groupby("stage")}
