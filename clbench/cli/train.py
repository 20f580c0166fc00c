"""`clbench train`: sequential training per approach and seed, results as Parquet.

Runs are resumed after their last finished task, locked while they run, and executed one after another, over
`--jobs` worker processes, or on Ray (`--executor ray`); see `clbench.run.scheduler`.
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from clbench.data.tasks import DatasetLoader
    from clbench.run.engine import RunOutcome, RunPlan
    from clbench.run.execution import Execution

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

SetOption = typer.Option(
    [], "--set", help="Override a spec value, e.g. --set training.max_epochs=3, --set hat.smax=200 (repeatable)."
)


@handle_errors
def train(
    benchmark: str = typer.Argument("mixture8", help="Benchmark name from benchmarks/ or a path to a YAML spec."),
    method: str = typer.Option("hat", "--method", "-m",
                               help="Approach(es), comma-separated, e.g. hat,sgd,joint; a plugin as "
                                    "path/to/file.py:Class or package.module:Class."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds: 0-9, 0,3,7 or 4."),
    results: Path = ResultsOption,
    overrides: list[str] = SetOption,
    grid: list[str] = typer.Option([], "--grid", help="KEY=V1,V2,...: runs for every combination of the values "
                                                      "(repeatable), e.g. --grid hat.smax=25,400 --grid hat.c=0.1,1."),
    with_references: bool = typer.Option(False, "--with-references",
                                         help="Also run the references joint and random for these seeds."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Runs at once, over this many worker processes."),
    devices: str | None = typer.Option(None, "--devices", help="Devices of the --jobs workers, round-robin: "
                                                               "0,1 (CUDA indices) or names (cpu, cuda:1)."),
    executor: str = typer.Option("local", "--executor", help="local (this machine) or ray (a Ray cluster)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address (default: RAY_ADDRESS, "
                                                               "else a new local Ray)."),
    gpus_per_run: float = typer.Option(1.0, "--gpus-per-run", help="Ray on CUDA: GPUs per run (0.25: four runs "
                                                                   "share a GPU)."),
    data_dir: Path | None = DataDirOption,
    mirror: str | None = MirrorOption,
    force: bool = typer.Option(False, "--force", help="Start runs over: re-run finished ones (overwriting them), "
                                                         "do not resume stopped ones."),
) -> None:
    """Train approaches on a benchmark, task after task, for each seed; skip finished runs, resume stopped ones."""
    from clbench.data.custom import check_own_tasks
    from clbench.results import check_results_folder, is_complete
    from clbench.run.engine import (
        check_code,
        check_shipped_name,
        fetching_loader,
        plan_runs,
        prepare_data,
        unique_plans,
    )
    from clbench.run.execution import Execution, check_execution, parse_devices
    from clbench.spec import load_benchmark

    seed_list = parse_seeds(seeds)
    check_results_folder(results)
    methods = load_methods(method) + (reference_methods() if with_references else [])
    override_sets = grid_override_sets(overrides, grid)
    origins = [*(f"--set {text}" for text in overrides), *(f"--grid {text}" for text in grid)]
    specs = [load_benchmark(benchmark, override_set, origins) for override_set in override_sets]
    for spec in specs:
        check_shipped_name(spec, methods)
        check_own_tasks(spec)
    plans = unique_plans(plan for spec, override_set in zip(specs, override_sets)
                         for plan in plan_runs(spec, methods, seed_list, results.absolute(), override_set))
    execution = check_execution(Execution(executor, jobs, device, parse_devices(devices or ""), address,
                                          gpus_per_run, force))
    for plan in plans:
        if not is_complete(plan.run_dir):
            check_code(plan, force)
    data_dir = data_dir or default_data_dir()
    with _exit_130_on_interrupt():
        if executor == "local":
            prepare_data(specs, data_dir, mirror)
        outcomes = _run(plans, execution, fetching_loader(data_dir, mirror))
    _summarise(outcomes, results, benchmark)


def reference_methods() -> list[str]:
    """The approaches that are references of the forgetting ratio (joint, random)."""
    from clbench.approaches import REGISTRY

    return sorted(name for name, cls in REGISTRY.items() if cls.is_reference)


def grid_override_sets(overrides: list[str], grid: list[str]) -> list[list[str]]:
    """The `--set` overrides, extended by each combination of the `--grid` values (one set without a grid).

    Each set is the `--set` texts, then one `KEY=VALUE` per `--grid` option, in the options' order.
    """
    if not grid:
        return [list(overrides)]
    from clbench.spec.grid import expand_grid

    return [[*overrides, *combination] for combination in expand_grid(grid)]


def _run(plans: list[RunPlan], execution: Execution, loader: DatasetLoader) -> list[RunOutcome]:
    from clbench.cli.progress import RunsOverview
    from clbench.run.execution import run_plans

    with RunsOverview(console(), len(plans)) as overview:
        return run_plans(plans, execution, loader, overview)


@contextmanager
def _exit_130_on_interrupt() -> Iterator[None]:
    """Turn Ctrl-C (or SIGTERM, as a cluster pre-emption sends) into a message and exit code 130.

    Unfinished runs are marked `interrupted` and keep their checkpoints.
    """
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        console(stderr=True).print("[bold red]interrupted:[/] unfinished runs are marked `interrupted` and keep "
                                   "their checkpoints; the same command resumes them")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_keyboard_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _summarise(outcomes: list[RunOutcome], results: Path, benchmark: str) -> None:
    """One line of counts, the results folder; exit code 1 if a run failed, 130 if one was interrupted.

    `benchmark` is the argument as the user gave it (a name or a spec file), so the printed command works pasted.
    """
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    out = console()
    out.print(", ".join(f"{count} {status}" for status, count in counts.items()) or "no runs")
    out.print(f"results in {results}; make the table with `clbench report {shlex.quote(benchmark)} --results "
              f"{shlex.quote(str(results))}`", soft_wrap=True)
    if "interrupted" in counts:
        raise typer.Exit(EXIT_INTERRUPTED)
    if any(not outcome.succeeded for outcome in outcomes):
        raise typer.Exit(EXIT_FAILED)
