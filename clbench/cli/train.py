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
from typing import TYPE_CHECKING, Annotated

import typer

from clbench.cli.common import console, default_data_dir, handle_errors, load_methods, parse_seeds
from clbench.cli.options import (
    Benchmark,
    DataDir,
    Device,
    ExecutorName,
    Jobs,
    Methods,
    Mirror,
    Results,
    Seeds,
    SetOption,
)
from clbench.errors import EXIT_FAILURE, EXIT_INTERRUPTED

if TYPE_CHECKING:
    from clbench.data.tasks import DatasetLoader
    from clbench.run.engine import RunOutcome
    from clbench.run.execution import Execution
    from clbench.run.plan import RunPlan
    from clbench.spec import BenchmarkSpec


def check_log(text: str) -> str:
    """`--log`: every comma-separated name a known logger (`clbench.run.loggers.LOGGERS`), else a usage error (exit 2)
    listing them; the text is passed on as given (`parse_loggers` reads it)."""
    from clbench.errors import ClbenchError
    from clbench.run.loggers.choice import parse_loggers

    try:
        parse_loggers(text)
    except ClbenchError as error:
        raise typer.BadParameter(str(error)) from None
    return text


@handle_errors
def train(
    benchmark: Benchmark = "mixture8",
    method: Methods = "hat",
    seeds: Seeds = "0",
    results: Results = Path("results"),
    overrides: SetOption = [],  # noqa: B006 (Typer copies the default; the list is never mutated)
    grid: Annotated[list[str], typer.Option(
        "--grid", help="KEY=V1,V2,...: runs for every combination of the values (repeatable), e.g. --grid "
                       "hat.smax=25,400 --grid hat.c=0.1,1.")] = [],  # noqa: B006
    with_references: Annotated[bool, typer.Option(
        "--with-references", help="Also run the references joint and random for these seeds.")] = False,
    device: Device = "auto",
    jobs: Jobs = 1,
    devices: Annotated[str | None, typer.Option(
        "--devices", help="Devices of the --jobs workers, round-robin: 0,1 (CUDA indices) or names (cpu, "
                          "cuda:1).")] = None,
    executor: Annotated[ExecutorName, typer.Option(
        "--executor", help="local (this machine) or ray (a Ray cluster).")] = "local",
    address: Annotated[str | None, typer.Option(
        "--address", help="Ray cluster address (default: RAY_ADDRESS, else a new local Ray).")] = None,
    gpus_per_run: Annotated[float, typer.Option(
        "--gpus-per-run", help="Ray on CUDA: GPUs per run (0.25: four runs share a GPU).")] = 1.0,
    data_dir: DataDir = None,
    mirror: Mirror = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Start runs over: re-run finished ones (overwriting them), do not resume stopped "
                        "ones.")] = False,
    log: Annotated[str, typer.Option(
        "--log", envvar="CLBENCH_LOG", show_envvar=True, metavar="[tensorboard,csv,wandb]", callback=check_log,
        help="Training logs in each run folder's logs/, comma-separated: tensorboard, csv, wandb (W&B offline "
             "unless WANDB_MODE is set). Default: none.")] = "",
    tuned: Annotated[list[Path], typer.Option(
        "--tuned", help="A tuned file of `clbench tune` per method of -m, in the same order (repeatable): its "
                        "chosen values are applied as --set options; every row records its identity (the sha256 "
                        "of its fields) and seed.")] = [],  # noqa: B006
) -> None:
    """Train approaches on a benchmark, task after task, for each seed; skip finished runs, resume stopped ones."""
    from clbench.results import check_results_folder
    from clbench.run.execution import Execution, check_execution, parse_devices
    from clbench.run.loggers import check_loggers, parse_loggers

    loggers = check_loggers(parse_loggers(log))
    seed_list = parse_seeds(seeds)
    check_results_folder(results)
    given = load_methods(method)
    references = reference_methods() if with_references else []
    if tuned:
        specs, plans = plan_tuned(benchmark, given, references, seed_list, results, overrides, grid, tuned)
    else:
        specs, plans = plan_grid(benchmark, given + references, seed_list, results, overrides, grid)
    execution = check_execution(Execution(executor, jobs, device, parse_devices(devices or ""), address,
                                          gpus_per_run, force, loggers))
    outcomes = execute_plans(specs, plans, execution, data_dir, mirror)
    _note_untuned_rows(outcomes)
    _summarise(outcomes, results, benchmark)


def plan_grid(benchmark: str, methods: list[str], seeds: list[int], results: Path, overrides: list[str],
              grid: list[str]) -> tuple[list[BenchmarkSpec], list[RunPlan]]:
    """The specs and run plans of `clbench train BENCHMARK -m METHODS --seeds ... --set ... --grid ...`: one spec
    per grid point, every (method, seed) of each, each run folder once. Bad options fail here, before any work."""
    from clbench.data.custom import check_own_tasks
    from clbench.run.plan import check_shipped_name, plan_runs, unique_plans
    from clbench.spec import load_benchmark

    override_sets = grid_override_sets(overrides, grid)
    origins = [*(f"--set {text}" for text in overrides), *(f"--grid {text}" for text in grid)]
    specs = [load_benchmark(benchmark, override_set, origins) for override_set in override_sets]
    for spec in specs:
        check_shipped_name(spec, methods)
        check_own_tasks(spec)
    plans = unique_plans(plan for spec, override_set in zip(specs, override_sets)
                         for plan in plan_runs(spec, methods, seeds, results.absolute(), override_set))
    return specs, plans


def plan_tuned(benchmark: str, methods: list[str], references: list[str], seeds: list[int], results: Path,
               overrides: list[str], grid: list[str], files: list[Path]) -> tuple[list[BenchmarkSpec], list[RunPlan]]:
    """`plan_grid` with each method's tuned file applied: the file is read for the config of `clbench train
    BENCHMARK -m METHOD --set ...` (refused, naming the difference, if made for another benchmark, config or method,
    or edited), its chosen values appended to the `--set` options, and its sha256 and tuning seed put in the plans
    (not in the config hash: the same values given by hand make the same run)."""
    import dataclasses

    from clbench.errors import ClbenchError
    from clbench.run.plan import unique_plans
    from clbench.tuning.tuned_file import read_tuned, tuned_sha256

    if grid:
        raise ClbenchError("--tuned applies the values a tuned file chose: give no --grid with it (`clbench tune` "
                           "searches a grid)")
    if len(files) != len(methods):
        raise ClbenchError(f"--tuned: give one tuned file per method of -m ({', '.join(methods)}), in the same "
                           f"order; {len(files)} given")
    specs: list[BenchmarkSpec] = []
    plans: list[RunPlan] = []
    for name, path in zip(methods, files):
        base = plan_grid(benchmark, [name], seeds[:1], results, overrides, [])[1][0]
        choice = read_tuned(path, base.spec.name, base.tuning_hash, name, overrides, argument=benchmark,
                            results=results)
        sha256 = tuned_sha256(path)
        chosen = [*overrides, *choice.chosen_overrides]
        method_specs, method_plans = plan_grid(benchmark, [name], seeds, results, chosen, [])
        specs += method_specs
        plans += [dataclasses.replace(plan, tuned_sha256=sha256, tuned_seed=choice.tuning_seed)
                  for plan in method_plans]
        if references:
            reference_specs, reference_plans = plan_grid(benchmark, references, seeds, results, chosen, [])
            specs += reference_specs
            plans += reference_plans
    return specs, unique_plans(plans)


def _note_untuned_rows(outcomes: list[RunOutcome]) -> None:
    """Say which tuned runs were reused as they were, their rows not recording the tuned file (a finished run of the
    same config: the tuning grid's point at its seed, or the values given by hand); nothing is rewritten."""
    from clbench.results import ACCURACY_FILE
    from clbench.run_files import read_run_parquet

    for outcome in outcomes:
        plan = outcome.plan
        if outcome.status != "skipped" or plan.tuned_sha256 is None:
            continue
        stored = read_run_parquet(plan.run_dir / ACCURACY_FILE)
        if "tuned_sha256" in stored and set(stored["tuned_sha256"].astype(object)) == {plan.tuned_sha256}:
            continue
        why = " (at the tuning seed: the grid point `clbench tune` trained)" if plan.seed == plan.tuned_seed else ""
        console().print(f"{plan.run_id}: finished before with the same config{why}; reused as it is: its rows do not "
                        f"record this tuned file (--force trains it again so that they do)", soft_wrap=True)


def execute_plans(specs: list[BenchmarkSpec], plans: list[RunPlan], execution: Execution, data_dir: Path | None,
                  mirror: str | None) -> list[RunOutcome]:
    """Run the plans (`train` and `tune`): finished runs are skipped, stopped ones resumed; the data is prepared
    first (local executor); Ctrl-C or SIGTERM exits 130 with the unfinished runs marked `interrupted`."""
    from clbench.run.engine import check_code
    from clbench.run.loaders import fetching_loader, prepare_data
    from clbench.run_files import is_complete

    for plan in plans:
        if not is_complete(plan.run_dir):
            check_code(plan, execution.force)
    data_dir = data_dir or default_data_dir()
    with _exit_130_on_interrupt():
        if execution.executor == "local":
            prepare_data(specs, data_dir, mirror)
        return _run(plans, execution, fetching_loader(data_dir, mirror))


def reference_methods() -> list[str]:
    """The approaches that are references of the forgetting ratio (joint, random)."""
    from clbench.approaches.registry import REGISTRY

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
    out = console()
    out.print(status_counts(outcomes))
    out.print(f"results in {results}; make the table with `clbench report {shlex.quote(benchmark)} --results "
              f"{shlex.quote(str(results))}`", soft_wrap=True)
    exit_if_unfinished(outcomes)


def status_counts(outcomes: list[RunOutcome]) -> str:
    """How many runs ended in each status, in order of first appearance: `3 done, 1 skipped` (or `no runs`)."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in counts.items()) or "no runs"


def exit_if_unfinished(outcomes: list[RunOutcome]) -> None:
    """Exit code 130 if a run was interrupted, 1 if one failed; return if every run succeeded."""
    if any(outcome.status == "interrupted" for outcome in outcomes):
        raise typer.Exit(EXIT_INTERRUPTED)
    if any(not outcome.succeeded for outcome in outcomes):
        raise typer.Exit(EXIT_FAILURE)
