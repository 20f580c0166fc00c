"""`clbench spec`: print a benchmark's resolved spec as commented YAML, the start of a user's own benchmark."""

from __future__ import annotations

import shlex

import typer

from clbench.cli.common import handle_errors
from clbench.cli.options import Benchmark, SetOption


@handle_errors
def spec(
    benchmark: Benchmark,
    overrides: SetOption = [],  # noqa: B006 (Typer copies the default; the list is never mutated)
) -> None:
    """Print the resolved spec (variant and --set applied) as YAML with a comment per field.

    `clbench spec mnist2 > mine.yaml` starts your own benchmark: edit it, then `clbench train mine.yaml`.
    """
    from clbench.approaches.resolution import resolve
    from clbench.cli.listing import refusals
    from clbench.spec import command_argument, load_benchmark
    from clbench.spec.render import render_spec

    loaded = load_benchmark(benchmark, overrides)
    hyperparameters = {name: resolve(loaded, name, refuse=False).hyperparameters for name in loaded.approaches}
    command = " ".join(["clbench spec", command_argument(loaded), *(f"--set {shlex.quote(o)}" for o in overrides)])
    refused = refusals(loaded)
    example = next(name for name in ("hat", "sgd") if name not in refused)  # hat, unless the benchmark refuses it
    header = [f"{command}: the benchmark {loaded.name!r}, resolved, every value written out.",
              "Start your own benchmark from it: save it (`... > mine.yaml`), change `name:` (runs are stored under",
              f"it) and any value, then run `clbench train mine.yaml -m {example}`.", ""]
    if refused:
        header += ["Approaches this benchmark refuses (`clbench train` and `tune` refuse them with these words):",
                   *(f"- {reason}" for reason in refused.values()), ""]
    typer.echo(render_spec(loaded, hyperparameters, header), nl=False)
