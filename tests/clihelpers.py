"""What the CLI tests share: tiny training options, a spec over its own npz data set, rich's wrapped output as
one line, a registry that forgets the plugins a command loaded, and a command run as a new process would run it,
without data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TINY = ["--set", "training.max_epochs=1", "--set", "training.batch_size=4", "--device", "cpu"]
NPZ_SPEC = """\
name: mine
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}
network: {kind: mlp, hidden: [8]}
"""
NPZ_SPEC_IN_ORDER = NPZ_SPEC.replace("form: mnist28}", "form: mnist28, shuffle_tasks: false}")
"""`NPZ_SPEC` with its tasks in the file's order (the run-file tests compare remade files with the originals)."""


def flat(text: str) -> str:
    """Output as one line: rich wraps long lines."""
    return " ".join(text.split())


@contextmanager
def kept_registry() -> Iterator[None]:
    """The approach registry (and plugin origins) as before, after the block: as a new process would start."""
    from clbench.approaches.registry import ORIGINS, REGISTRY

    registry, origins = dict(REGISTRY), dict(ORIGINS)
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(registry)
        ORIGINS.clear()
        ORIGINS.update(origins)


def invoke_fresh(*arguments: str) -> tuple[int, str]:
    """A command in a fresh registry (as a new process would have), its exit code and one-line output."""
    from typer.testing import CliRunner

    from clbench.cli import app

    with kept_registry():
        result = CliRunner().invoke(app, list(arguments))
    return result.exit_code, flat(result.output)


def pasted_commands(output: str, start: str = "clbench ") -> list[list[str]]:
    """The commands in backticks in a command's output that begin with `start` (e.g. `clbench train`), each as the
    arguments a shell would give clbench when the user pastes it (split as a shell does, `clbench` left out)."""
    import re
    import shlex

    return [shlex.split(text)[1:] for text in re.findall(r"`(clbench [^`]*)`", flat(output)) if text.startswith(start)]


def offline(tmp_path: Path) -> list[str]:
    """No data and no mirror: a command that got past its checks fails fast on the missing data."""
    return ["--data-dir", str(tmp_path / "data"), "--mirror", str(tmp_path / "no-mirror")]


def paper_csv(results: Path, benchmark: str):  # type: ignore[no-untyped-def]
    """`clbench report <benchmark> --paper --format csv` on a results folder, as a DataFrame by approach (its first
    CSV block: the comparison with the paper's table; pmnist's table beyond the paper's follows a blank line)."""
    import io

    import pandas as pd
    from typer.testing import CliRunner

    from clbench.cli import app

    result = CliRunner().invoke(app, ["report", benchmark, "--results", str(results), "--paper", "--format", "csv"])
    assert result.exit_code == 0, result.output
    return pd.read_csv(io.StringIO(result.output.split("\n\n")[0])).set_index("approach")
