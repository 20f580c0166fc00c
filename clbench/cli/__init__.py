"""The `clbench` command line: thin Typer commands over the library. Importing this must not import torch.

`main()` runs the command and returns or raises `SystemExit` as any Click program does, so a notebook, a test or
another tool can call it; `console_main()`, the `clbench` console script, ends the process quickly afterwards
(`clbench.cli.exiting`).
"""

from __future__ import annotations

from typing import Annotated

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
from clbench.cli.version import show_version

app = typer.Typer(
    name="clbench",
    help="Benchmark catastrophic forgetting: HAT (Serra et al., ICML 2018) and its baselines, reproducibly.",
    no_args_is_help=True,
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


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=show_version,
        help="Show the versions of clbench, torch and Python, whether CUDA is available, and exit.")] = False,
) -> None:
    """The options before any command (`clbench --version`)."""


def main(args: list[str] | None = None) -> None:
    """Run `clbench ARGS` (default: the process's arguments); returns, or raises `SystemExit` with the exit code
    (`clbench.errors`), and never ends the interpreter itself."""
    app(args=args)


def console_main() -> None:
    """The `clbench` console script: `main()`, then a quick exit (`clbench.cli.exiting`)."""
    try:
        main()
    except SystemExit as stop:
        exit_now(stop.code)
    exit_now(0)
