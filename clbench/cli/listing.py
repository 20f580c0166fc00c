"""`clbench list`: benchmarks, approaches and their parameter counts."""

from __future__ import annotations

import typer

from clbench.cli.common import console, handle_errors, load_methods


@handle_errors
def list_command(
    benchmark: list[str] = typer.Option([], "--benchmark", "-b", help="Only these benchmarks (repeatable)."),
    parameters: bool = typer.Option(True, "--parameters/--no-parameters", help="Count parameters per approach."),
    method: str | None = typer.Option(None, "--method", "-m", help="Also load these plugins (path/to/file.py:Class "
                                                                   "or package.module:Class, comma-separated)."),
) -> None:
    """List benchmarks and approaches, with each approach's parameter count per benchmark."""
    from rich.table import Table

    from clbench.approaches import REGISTRY, approach_names
    from clbench.approaches.registry import origin_label
    from clbench.spec import benchmark_names, load_benchmark

    if method:
        load_methods(method)
    out = console()
    names = benchmark or benchmark_names()
    specs = [load_benchmark(name) for name in names]
    table = Table("benchmark", "tasks", "network", "description", title="Benchmarks")
    for spec in specs:
        table.add_row(spec.name, str(len(_head_sizes(spec))), spec.network.kind, spec.description)
    out.print(table)
    approaches = Table("approach", "summary", title="Approaches")
    approaches.add_column("origin", overflow="fold")
    for name in approach_names():
        approaches.add_row(name, REGISTRY[name].summary, origin_label(name))
    out.print(approaches)
    if parameters:
        out.print(_parameter_table(specs))


def _head_sizes(spec: object) -> tuple[int, ...]:
    from clbench.data.custom import n_classes_lookup
    from clbench.data.tasks import head_sizes_for

    return head_sizes_for(spec.data, n_classes_lookup(spec))  # type: ignore[arg-type, attr-defined]


def parameter_counts(spec: object) -> dict[str, int]:
    """Parameters of each registered approach's network on a benchmark (all heads/columns included); an approach
    that cannot run on the benchmark's body (hat on resnet18) is left out."""
    import torch

    from clbench.approaches import REGISTRY, ApproachContext, approach_names, resolve
    from clbench.data.tasks import input_shape_for
    from clbench.nets import parameter_count

    counts = {}
    for name in approach_names():
        if REGISTRY[name].network_problem(spec.network) is not None:  # type: ignore[attr-defined]
            continue
        resolved = resolve(spec, name)  # type: ignore[arg-type]
        context = ApproachContext(spec.network, resolved.training, input_shape_for(spec.data),  # type: ignore[attr-defined]
                                  _head_sizes(spec), torch.device("cpu"), 0)
        counts[name] = parameter_count(resolved.cls(context, resolved.hyperparameters).network)
    return counts


def _parameter_table(specs: list) -> object:
    from rich.table import Table

    table = Table("approach", *[spec.name for spec in specs], title="Parameters")
    counts = {spec.name: parameter_counts(spec) for spec in specs}
    names = dict.fromkeys(name for per_spec in counts.values() for name in per_spec)
    for name in sorted(names):
        table.add_row(name, *[f"{counts[spec.name][name]:,}" if name in counts[spec.name] else "-"
                              for spec in specs])
    return table
