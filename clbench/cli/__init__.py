"""The `clbench` command line: thin Typer commands over the library. Importing this must not import torch."""

from __future__ import annotations

import typer

from clbench.cli.bench import bench
from clbench.cli.evaluate import evaluate
from clbench.cli.exiting import exit_now
from clbench.cli.fetch import fetch
from clbench.cli.listing import list_command
from clbench.cli.report import report
from clbench.cli.spec import spec
from clbench.cli.train import train
from clbench.cli.tune import tune

app = typer.Typer(
    name="clbench",
    help="Benchmark catastrophic forgetting: HAT (Serra et al., ICML 2018) and its baselines, reproducibly.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("fetch")(fetch)
app.command("train")(train)
app.command("tune")(tune)
app.command("evaluate")(evaluate)
app.command("report")(report)
app.command("list")(list_command)
app.command("bench")(bench)
app.command("spec")(spec)


def main() -> None:
    """Console-script entry point: the command, then a quick exit (`clbench.cli.exiting`)."""
    try:
        app()
    except SystemExit as stop:
        exit_now(stop.code)
    exit_now(0)
