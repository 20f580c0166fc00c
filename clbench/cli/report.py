"""`clbench report`: the paper's tables from stored results (torch-free)."""

from __future__ import annotations

from pathlib import Path

import typer

from clbench.cli.common import ResultsOption, console, handle_errors
from clbench.errors import ClbenchError

FORMATS = ("markdown", "csv", "latex")
METRICS = ("forgetting-ratio", "accuracy")


@handle_errors
def report(
    benchmark: str | None = typer.Argument(None, help="Benchmark name (default: every benchmark in the results)."),
    results: Path = ResultsOption,
    table: bool = typer.Option(True, "--table/--no-table", help="Print the table."),
    fmt: str = typer.Option("markdown", "--format", help="markdown, csv or latex."),
    metric: str = typer.Option("forgetting-ratio", "--metric", help="forgetting-ratio or accuracy."),
    references: bool = typer.Option(False, "--references", help="Also list joint and random as rows."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the table to this file too."),
) -> None:
    """Forgetting-ratio (or accuracy) table: mean (std) over seeds per approach and stage."""
    from clbench.report import build_report, render

    if fmt not in FORMATS:
        raise ClbenchError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    if metric not in METRICS:
        raise ClbenchError(f"--metric {metric!r}: use one of {', '.join(METRICS)}")
    names = [benchmark] if benchmark else _benchmarks_in(results)
    texts = []
    for name in names:
        text = render(build_report(results, name, metric, references), fmt)
        texts.append(text if fmt == "csv" or len(names) == 1 else f"## {name}\n\n{text}")
    combined = "\n".join(texts)
    if output is not None:
        output.write_text(combined)
    if table:
        console().print(combined, markup=False, highlight=False, soft_wrap=True, end="")


def _benchmarks_in(results: Path) -> list[str]:
    if not results.is_dir():
        raise ClbenchError(f"results folder {results} does not exist; run `clbench train ... --results {results}`")
    names = sorted(path.name for path in results.iterdir() if path.is_dir() and not path.name.startswith("."))
    if not names:
        raise ClbenchError(f"no results in {results}; run `clbench train BENCHMARK -m METHOD --results {results}`")
    return names
