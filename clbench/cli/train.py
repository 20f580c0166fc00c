"""`clbench train`: sequential training per approach and seed, results as Parquet."""

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
    parse_methods,
    parse_seeds,
)

SetOption = typer.Option(
    [], "--set", help="Override a spec value, e.g. --set training.max_epochs=3, --set hat.smax=200 (repeatable)."
)


@handle_errors
def train(
    benchmark: str = typer.Argument("mixture8", help="Benchmark name from benchmarks/ or a path to a YAML spec."),
    method: str = typer.Option("hat", "--method", "-m", help="Approach(es), comma-separated, e.g. hat,sgd,joint."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds: 0-9, 0,3,7 or 4."),
    results: Path = ResultsOption,
    overrides: list[str] = SetOption,
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    data_dir: Path | None = DataDirOption,
    mirror: str | None = MirrorOption,
    force: bool = typer.Option(False, "--force", help="Re-run (and overwrite) runs that already finished."),
) -> None:
    """Train approaches on a benchmark, task after task, for each seed; skip runs that already finished."""
    from clbench.engine import fetching_loader, plan_runs, resolve_device
    from clbench.spec import load_benchmark

    seed_list = parse_seeds(seeds)
    methods = parse_methods(method)
    spec = load_benchmark(benchmark, overrides)
    plans = plan_runs(spec, methods, seed_list, results, overrides)
    torch_device = resolve_device(device)
    loader = fetching_loader(data_dir or default_data_dir(), mirror)
    failed = _run_all(plans, torch_device, loader, force)
    console().print(f"results in {results}; make the table with `clbench report {spec.name} --results {results}`")
    if failed:
        raise typer.Exit(1)


def _run_all(plans: list, device: object, loader: object, force: bool) -> int:
    """Run each plan, report skips and failures, keep going after a failed run; returns the number failed."""
    from clbench.cli.progress import RichObserver
    from clbench.engine import execute
    from clbench.errors import ClbenchError

    out = console()
    failed = 0
    with RichObserver(out, len(plans)) as observer:
        for plan in plans:
            try:
                outcome = execute(plan, device=device, loader=loader, force=force, observer=observer)
            except ClbenchError:
                raise
            except Exception as error:  # a failed run is reported and does not stop the others
                failed += 1
                out.print(f"[red]failed[/] {plan.run_id}: {type(error).__name__}: {error} "
                          f"(details in {plan.run_dir / 'run.json'})")
            else:
                if outcome.status == "skipped":
                    out.print(f"[yellow]skipped[/] {plan.run_id}: already finished ({plan.run_dir}); "
                              f"use --force to re-run")
            observer.run_done()
    return failed
