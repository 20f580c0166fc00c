"""`clbench list`: benchmarks, approaches and their parameter counts (or why a benchmark refuses an approach)."""

from __future__ import annotations

from typing import Annotated

import typer

from clbench.cli import completion
from clbench.cli.common import console, handle_errors, load_methods


@handle_errors
def list_command(
    benchmark: Annotated[list[str], typer.Option(
        "--benchmark", "-b", help="Only these benchmarks (repeatable).",
        autocompletion=completion.benchmark_names)] = [],  # noqa: B006 (Typer copies the default)
    parameters: Annotated[bool, typer.Option(
        "--parameters/--no-parameters", help="Count parameters per approach.")] = True,
    method: Annotated[str | None, typer.Option(
        "--method", "-m", help="Also load these plugins (path/to/file.py:Class or package.module:Class, "
                               "comma-separated).")] = None,
) -> None:
    """List benchmarks and approaches, with each approach's parameter count per benchmark (or why it is refused)."""
    from rich.table import Table

    from clbench.approaches.registry import approach_names, lookup, origin_label
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
        approaches.add_row(name, lookup(name).summary, origin_label(name))
    out.print(approaches)
    if parameters:
        tables, notes = _parameter_table(specs, out.width)
        for table in tables:
            out.print(table)
        for note in notes:
            out.print(note, soft_wrap=True, markup=False, highlight=False)


def _head_sizes(spec: object) -> tuple[int, ...]:
    from clbench.data.custom import n_classes_lookup
    from clbench.data.tasks import head_sizes_for

    return head_sizes_for(spec.data, n_classes_lookup(spec))  # type: ignore[arg-type, attr-defined]


def refusals(spec: object) -> dict[str, str]:
    """Each registered approach that the benchmark refuses (its body, scenario or protocol), with the reason in one
    line: `clbench.approaches.resolution.refusal`, the rule `train` and `tune` refuse with."""
    from clbench.approaches.registry import approach_names
    from clbench.approaches.resolution import refusal

    found = {name: refusal(spec, name) for name in approach_names()}  # type: ignore[arg-type]
    return {name: refused.reason for name, refused in found.items() if refused is not None}


def parameter_counts(spec: object) -> dict[str, int]:
    """Parameters of each registered approach's network on a benchmark (all heads/columns included); an approach
    the benchmark refuses (`refusals`: hat on resnet18, pathnet without a validation split) is left out."""
    return {name: count for name, count in _counts(spec).items() if isinstance(count, int)}


def _counts(spec: object) -> dict[str, int | str]:
    """Each registered approach's parameter count on a benchmark, or the reason it is refused there (the rule's, or
    the one its constructor gives with the network built, e.g. a plugin's network in the domain scenario)."""
    import torch

    from clbench.approaches.datatypes import ApproachContext
    from clbench.approaches.registry import approach_names
    from clbench.approaches.resolution import resolve
    from clbench.data.tasks import input_shape_for
    from clbench.errors import SpecError
    from clbench.nets import parameter_count

    counts: dict[str, int | str] = dict(refusals(spec))
    for name in approach_names():
        if name in counts:
            continue
        resolved = resolve(spec, name, check_grids=False)  # type: ignore[arg-type]
        context = ApproachContext(spec.network, resolved.training, input_shape_for(spec.data),  # type: ignore[attr-defined]
                                  _head_sizes(spec), torch.device("cpu"), 0)
        try:
            counts[name] = parameter_count(resolved.cls(context, resolved.hyperparameters).network)
        except SpecError as error:
            counts[name] = str(error)
    return counts


def _parameter_table(specs: list, width: int) -> tuple[list[object], list[str]]:
    """The tables of parameter counts (approach x benchmark), a refused pair marked `refused (n)`, and the notes
    under them: `(n) reason`, one per distinct reason. As many tables as it takes for every count and name to be
    shown whole within `width` columns (`parameter_tables`)."""
    counts = {spec.name: _counts(spec) for spec in specs}
    reasons = list(dict.fromkeys(cell for per_spec in counts.values() for cell in per_spec.values()
                                 if isinstance(cell, str)))
    names = sorted(dict.fromkeys(name for per_spec in counts.values() for name in per_spec))
    columns = {spec.name: [_cell(counts[spec.name].get(name), reasons) for name in names] for spec in specs}
    return parameter_tables(names, columns, width), [f"({number}) refused: {reason}"
                                                     for number, reason in enumerate(reasons, 1)]


CELL_FRAME = 3
"""Columns a rich table adds to each of its columns (a border and one space of padding each side)."""


def parameter_tables(approaches: list[str], columns: dict[str, list[str]], width: int) -> list[object]:
    """The approach column beside as many benchmark columns as fit in `width`, then the next ones in another table
    (its approach column repeated): no count or name is cut. A column wider than the console alone is not split."""
    from rich.table import Table

    def needed(header: str, cells: list[str]) -> int:
        return max(len(header), *(len(cell) for cell in cells)) + CELL_FRAME

    first = needed("approach", approaches) + 1  # the closing border
    groups: list[list[str]] = [[]]
    for name, cells in columns.items():
        if groups[-1] and first + sum(needed(other, columns[other]) for other in groups[-1]) \
                + needed(name, cells) > width:
            groups.append([])
        groups[-1].append(name)
    tables = []
    for index, group in enumerate(groups):
        title = "Parameters" + (f" ({index + 1} of {len(groups)})" if len(groups) > 1 else "")
        table = Table(title=title)
        for header in ["approach", *group]:
            table.add_column(header, no_wrap=True)
        for row, approach in enumerate(approaches):
            table.add_row(approach, *[columns[name][row] for name in group])
        tables.append(table)
    return tables


def _cell(count: int | str | None, reasons: list[str]) -> str:
    """A count (`108,800`), `refused (n)` for the n-th reason under the table, or `-` (not registered)."""
    if count is None:
        return "-"
    return f"refused ({reasons.index(count) + 1})" if isinstance(count, str) else f"{count:,}"
