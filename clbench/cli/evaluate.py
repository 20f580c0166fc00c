"""`clbench evaluate`: recompute per-task test accuracies from the checkpoints `train` saved."""

from __future__ import annotations

from pathlib import Path

import typer

from clbench.cli.common import (
    DataDirOption,
    MirrorOption,
    ResultsOption,
    console,
    default_data_dir,
    handle_errors,
    load_methods,
    parse_seeds,
)
from clbench.cli.train import SetOption


@handle_errors
def evaluate(
    benchmark: str = typer.Argument("mixture8", help="Benchmark name from benchmarks/ or a path to a YAML spec."),
    method: str = typer.Option("hat", "--method", "-m", help="Approach(es), comma-separated (plugins: file.py:Class)."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds: 0-9, 0,3,7 or 4."),
    results: Path = ResultsOption,
    overrides: list[str] = SetOption,
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    data_dir: Path | None = DataDirOption,
    mirror: str | None = MirrorOption,
) -> None:
    """Re-evaluate trained runs from their per-task checkpoints; writes evaluation.parquet in each run folder."""
    from rich.table import Table

    from clbench.run.engine import fetching_loader, plan_runs, reevaluate, resolve_device
    from clbench.spec import load_benchmark

    methods = load_methods(method)
    spec = load_benchmark(benchmark, overrides)
    plans = plan_runs(spec, methods, parse_seeds(seeds), results, overrides)
    torch_device = resolve_device(device)
    loader = fetching_loader(data_dir or default_data_dir(), mirror)
    table = Table("run", "stage", "mean accuracy", "per task")
    for plan in plans:
        rows = reevaluate(plan, device=torch_device, loader=loader)
        for stage in sorted({row["stage"] for row in rows}):
            accuracies = [row["accuracy"] for row in rows if row["stage"] == stage]
            table.add_row(plan.run_id, str(stage), f"{100 * sum(accuracies) / len(accuracies):.2f}%",
                          " ".join(f"{100 * a:.1f}" for a in accuracies))
    console().print(table)
