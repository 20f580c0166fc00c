"""`clbench evaluate`: recompute per-task test (and validation) accuracies from the checkpoints `train` saved."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clbench.cli.common import console, default_data_dir, handle_errors, load_methods, parse_seeds
from clbench.cli.options import Benchmark, DataDir, Device, Evaluation, Methods, Mirror, Results, Seeds, SetOption
from clbench.errors import ClbenchError

if TYPE_CHECKING:
    from rich.table import Table


@handle_errors
def evaluate(
    benchmark: Benchmark = "mixture8",
    method: Methods = "hat",
    seeds: Seeds = "0",
    results: Results = Path("results"),
    overrides: SetOption = [],  # noqa: B006 (Typer copies the default; the list is never mutated)
    device: Device = "auto",
    data_dir: DataDir = None,
    mirror: Mirror = None,
    evaluation: Evaluation = None,
) -> None:
    """Re-evaluate trained runs from their per-task checkpoints; writes evaluation.parquet (test and validation
    rows) in each run folder and shows, per stage, the mean test accuracy over the tasks learned so far."""
    from clbench.cli.progress import EvaluationProgress
    from clbench.results import TEST, DamagedFileError, check_results_folder, row_split, scenario_evaluation
    from clbench.run.engine import resolve_device
    from clbench.run.evaluate import reevaluate
    from clbench.run.loaders import fetching_loader
    from clbench.run.plan import check_shipped_name, plan_runs
    from clbench.run.shared_tasks import SharedTasks, data_key, grouped_by_data
    from clbench.spec import load_benchmark

    check_results_folder(results)
    methods = load_methods(method)
    spec = load_benchmark(benchmark, overrides)
    shown = evaluation or scenario_evaluation(spec.data.scenario)
    _check_plugins_named(methods, results, spec.name)
    check_shipped_name(spec, methods)
    plans = plan_runs(spec, methods, parse_seeds(seeds), results, overrides)
    torch_device = resolve_device(device)
    loader = fetching_loader(data_dir or default_data_dir(), mirror)
    shared = SharedTasks()  # the runs on the same data one after another, on one task sequence
    test_rows = {}
    left_out: list[DamagedFileError] = []  # a run with a damaged file: named, the others evaluated
    with EvaluationProgress(console(stderr=True), len(plans)) as progress:
        for plan in grouped_by_data(plans, lambda plan: data_key(plan, loader, torch_device)):
            try:
                rows = reevaluate(plan, device=torch_device, loader=loader, shared=shared)
            except DamagedFileError as error:
                left_out.append(error)
                continue
            test_rows[plan.run_dir] = [row for row in rows if row_split(row) == TEST]
            progress.run_evaluated(plan)
    if left_out and not test_rows:
        raise left_out[0]
    for error in left_out:
        console(stderr=True).print(f"left out: {error}", markup=False, highlight=False, soft_wrap=True)
    console().print(evaluation_table(shown, [row for plan in plans if plan.run_dir in test_rows for row in table_rows(
        plan.run_id, test_rows[plan.run_dir], shown, plan.spec.data.scenario)]))


def evaluation_table(shown: str, rows: Sequence[Sequence[str]]) -> Table:
    """The table `evaluate` prints: a run id is never cut (two seeds' rows would read the same); the per-task
    accuracies wrap instead."""
    from rich.table import Table

    table = Table(title=f"test accuracy A<=t, {shown}: mean over the tasks learned so far")
    table.add_column("run", no_wrap=True, overflow="fold")  # whole on one line; folded only on a narrower console
    table.add_column("stage", no_wrap=True)
    table.add_column("mean accuracy", no_wrap=True)
    table.add_column("per task", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def stage_means(rows: Sequence[dict[str, Any]], evaluation: str,
                scenario: str | None = None) -> list[tuple[int, float, list[float]]]:
    """(stage t, A^{<=t}, the accuracies A^{u<=t} of the tasks learned so far u <= t) for every stage t >= 1 of
    one run's test rows in `evaluation`: the numbers of `train`'s line after each task and of `report --metric
    accuracy`. A domain-scenario run's one evaluation is stored as task-aware and read under either name."""
    from clbench.results import EVALUATIONS

    stored = EVALUATIONS[0] if scenario == "domain" else evaluation
    learned: dict[int, list[tuple[int, float]]] = {}
    for row in rows:
        if row["evaluation"] == stored and 1 <= row["task"] <= row["stage"]:
            learned.setdefault(int(row["stage"]), []).append((int(row["task"]), float(row["accuracy"])))
    means = []
    for stage, cells in sorted(learned.items()):
        accuracies = [accuracy for _, accuracy in sorted(cells)]
        means.append((stage, sum(accuracies) / len(accuracies), accuracies))
    return means


def table_rows(run_id: str, rows: Sequence[dict[str, Any]], evaluation: str,
               scenario: str | None = None) -> list[list[str]]:
    """The printed rows of one run (`stage_means`, in %), or one row saying it has no rows in `evaluation` (an
    approach that needs the task id stores task-aware rows only)."""
    means = stage_means(rows, evaluation, scenario)
    if not means:
        return [[run_id, "–", "needs the task id", f"no {evaluation} rows: pass --evaluation task-aware"]]
    return [[run_id, str(stage), f"{100 * mean:.2f}%", " ".join(f"{100 * a:.1f}" for a in accuracies)]
            for stage, mean, accuracies in means]


def _check_plugins_named(methods: list[str], results: Path, benchmark: str) -> None:
    """ClbenchError when a method is not registered but its runs were made by a plugin: name the `-m` to pass."""
    from clbench.approaches.registry import approach_names

    known = set(approach_names())
    for name in methods:
        hint = None if name in known else plugin_hint(results, benchmark, name)
        if hint is not None:
            raise ClbenchError(f"unknown method {name!r}: its runs in {results} were made by {hint}")


def plugin_hint(results: Path, benchmark: str, method: str) -> str | None:
    """How to name the plugin that made `method`'s runs (from their run.json's `approach_origin`), or None."""
    from clbench.results import DamagedFileError, parse_run_file

    for run_file in sorted(Path(results, benchmark, method).glob("*/seed-*/run.json")):
        try:
            origin = parse_run_file(run_file).get("approach_origin") or {}
        except DamagedFileError:
            continue
        if origin.get("kind") == "file" and origin.get("path") and origin.get("cls"):
            argument = f"{origin['path']}:{str(origin['cls']).rsplit('.', 1)[-1]}"
            return f"the plugin file {origin['path']}; pass the file: -m {shlex.quote(argument)}"
        if origin.get("kind") == "module" and origin.get("spec"):
            return f"the plugin module {origin['module']}; pass it: -m {origin['spec']}"
        if origin.get("kind") == "entry-point":
            return (f"the installed package {origin.get('distribution')} {origin.get('version')}; install it "
                    f"again (its entry point {origin.get('entry_point')!r} registers {method})")
    return None
