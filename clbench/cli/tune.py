"""`clbench tune`: train a grid on one seed, choose each method's point on validation data, write the tuned file.

The paper's protocol (Serra et al. 2018, Sec. 4): every grid point is trained on one seed's task sequence (0 by
default) and scored on the validation split only (`clbench.tuning`); a test number is never used to choose. The
runs are `clbench train`'s (`plan_grid`, `execute_plans`): `--jobs` in parallel, resumed after a kill, and a point
whose run already finished is reused, not trained again.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clbench.cli.common import console, handle_errors, load_methods
from clbench.cli.options import (
    Benchmark,
    DataDir,
    Device,
    Evaluation,
    Jobs,
    Methods,
    Mirror,
    Results,
    RuleName,
    SetOption,
)
from clbench.cli.train import (
    execute_plans,
    exit_if_unfinished,
    plan_grid,
    reference_methods,
    status_counts,
)

if TYPE_CHECKING:
    from clbench.run.plan import RunPlan
    from clbench.spec import BenchmarkSpec
    from clbench.tuning.tuned_file import TunedChoice


@handle_errors
def tune(
    benchmark: Benchmark,
    method: Methods,
    grid: Annotated[list[str], typer.Option(
        "--grid", help="KEY=V1,V2,...: the values to try (repeatable); a key of an approach's section (hat.smax) "
                       "applies to that approach, others (training.lr) to every one. Default: the spec's grids: "
                       "section.")] = [],  # noqa: B006 (Typer copies the default; the list is never mutated)
    overrides: SetOption = [],  # noqa: B006
    seed: Annotated[int, typer.Option("--seed", min=0, help="The one seed every grid point is trained with.")] = 0,
    rule: Annotated[RuleName, typer.Option(
        "--select", "--rule", help="How points are scored on validation: accuracy or forgetting-ratio (trains the "
                                   "references joint and random too).")] = "accuracy",
    evaluation: Evaluation = None,
    results: Results = Path("results"),
    device: Device = "auto",
    jobs: Jobs = 1,
    data_dir: DataDir = None,
    mirror: Mirror = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace a tuned file that holds another choice (the runs themselves are reused, never "
                        "trained again).")] = False,
) -> None:
    """Tune approaches on validation data: train a grid on one seed, choose per method, write a tuned file."""
    from clbench.results import check_output_path, check_results_folder
    from clbench.run.execution import Execution, check_execution
    from clbench.run.plan import unique_plans
    from clbench.tuning.scoring import tuning_rule
    from clbench.tuning.tuned_file import tuned_path

    chosen_rule = tuning_rule(rule)
    check_results_folder(results)
    methods = load_methods(method)
    grids = method_grids(benchmark, methods, overrides, grid)
    specs, plans, bases = [], [], {}
    for name, method_grid in grids.items():
        method_specs, method_plans = plan_grid(benchmark, [name], [seed], results, overrides, method_grid)
        _check_distinct_points(name, method_grid, method_specs, method_plans)
        bases[name] = plan_grid(benchmark, [name], [seed], results, overrides, [])[1][0]
        specs += method_specs
        plans += method_plans
        if chosen_rule.needs_references:
            specs_plans = _reference_plans(benchmark, chosen_rule.name, seed, results, overrides, method_grid)
            specs += specs_plans[0]
            plans += specs_plans[1]
    for base in bases.values():
        check_output_path(tuned_path(results, base.spec.name, base.method, base.tuning_hash), "tuned file")
    plans = unique_plans(plans)
    execution = check_execution(Execution("local", jobs, device, (), None, 1.0, False))
    outcomes = execute_plans(specs, plans, execution, data_dir, mirror)
    console().print(status_counts(outcomes))
    exit_if_unfinished(outcomes)
    rows = _rows(plans)
    for name, method_grid in grids.items():
        _choose_and_write(rows, benchmark, bases[name], method_grid, chosen_rule.name, evaluation, seed, overrides,
                          results, force)


def method_grids(benchmark: str, methods: list[str], overrides: list[str], grid: list[str]) -> dict[str, list[str]]:
    """Each method's grid: the `--grid` options of its own section (`ewc.lamb=...`) and those of no approach's
    section (`training.lr=...`), else the spec's default grid; TuningError naming a method that has none."""
    from clbench.approaches.registry import REGISTRY
    from clbench.spec import load_benchmark
    from clbench.spec.grid import default_grid_options, parse_grid_spec
    from clbench.tuning.scoring import TuningError

    spec = load_benchmark(benchmark, overrides)
    if spec.data.validation_fraction == 0:
        raise TuningError(f"{spec.source}: data.validation_fraction is 0: tuning chooses on each task's validation "
                          f"split and this protocol holds none out; tune with --set data.validation_fraction=0.1 "
                          f"and give the chosen values to the run on the full training set with --set (a tuned "
                          f"file applies to the protocol it was tuned with)")
    owners = {spec_text: parse_grid_spec(spec_text)[0].split(".", 1)[0] for spec_text in grid}
    foreign = [text for text, owner in owners.items() if owner in REGISTRY and owner not in methods]
    if foreign:
        raise TuningError(f"--grid {foreign[0]}: {owners[foreign[0]]} is not a method being tuned "
                          f"(-m {','.join(methods)}); tune it with -m {owners[foreign[0]]}")
    grids = {}
    for name in methods:
        own = [text for text, owner in owners.items() if owner == name or owner not in REGISTRY]
        grids[name] = own or default_grid_options(spec, name)
        if not grids[name]:
            raise TuningError(f"{name} has no grid to tune: the {spec.name} spec has no default grid for it (its "
                              f"grids: section); give one with --grid KEY=V1,V2,..., e.g. --grid "
                              f"{name}.KEY=V1,V2")
    return grids


def _check_distinct_points(method: str, grid: list[str], specs: list[BenchmarkSpec], plans: list[RunPlan]) -> None:
    """TuningError (before any training) when two points of `method`'s grid are one run (one config hash): a grid
    key that its own section overrides or that it ignores (`protocol_notes` says which) tunes nothing."""
    if len(plans) == len(specs):
        return
    from clbench.approaches.resolution import protocol_notes
    from clbench.tuning.scoring import TuningError

    why = next((note for spec in specs for note in protocol_notes(spec, method) if "--grid" in note), "")
    raise TuningError(f"--grid {' '.join(grid)}: its {len(specs)} points make {len(plans)} distinct {method} "
                      f"run{'s' if len(plans) > 1 else ''}, so there is nothing to choose between"
                      f"{f' ({why})' if why else ''}; tune keys that change {method}'s runs")


def _reference_plans(benchmark: str, rule: str, seed: int, results: Path, overrides: list[str],
                     grid: list[str]) -> tuple[list[BenchmarkSpec], list[RunPlan]]:
    """The references the rule needs, at every grid point (a point may change what the joint must share)."""
    from clbench.errors import ClbenchError
    from clbench.tuning.scoring import TuningError

    references = reference_methods()
    try:
        return plan_grid(benchmark, references, [seed], results, overrides, grid)
    except ClbenchError as error:
        raise TuningError(f"--select {rule} needs the references {', '.join(references)}, which cannot be made "
                          f"for {benchmark}: {error}") from None


def _rows(plans: list[RunPlan]):  # type: ignore[no-untyped-def]
    """Every planned run's stored rows (each finished: `exit_if_unfinished` returned)."""
    import pandas as pd

    from clbench.results import ACCURACY_FILE
    from clbench.run_files import read_run_parquet

    return pd.concat([read_run_parquet(plan.run_dir / ACCURACY_FILE) for plan in plans], ignore_index=True)


def _choose_and_write(rows, benchmark: str, base: RunPlan, grid: list[str], rule: str,  # type: ignore[no-untyped-def]
                      evaluation: str | None, seed: int, overrides: list[str], results: Path, force: bool) -> None:
    """Choose `base.method`'s point in `evaluation` (None: the scenario's, `tuning_evaluation`), print its table and
    notes (the evaluation, a chosen value at an end of its grid), write (or keep) its tuned file."""
    from clbench.approaches.domains import special_values
    from clbench.tuning.scoring import tuning_evaluation
    from clbench.tuning.tuned_file import choose, grid_end_notes, tuned_path

    scored, notes = tuning_evaluation(rows, base.method, base.spec.data.scenario, evaluation)
    choice = choose(rows, base.spec.name, base.method, base.tuning_hash, grid, rule, scored, seed, overrides)
    _print_choice(choice)
    out = console()
    special = {key: special_values(base.approach.cls, key) for key, _ in choice.chosen}
    for note in notes + grid_end_notes(choice, special):
        out.print(f"note: {note}", soft_wrap=True, markup=False)
    path = tuned_path(results, base.spec.name, base.method, base.tuning_hash)
    written = _write(path, choice, force, benchmark, results)
    out.print(f"tuned file {'written' if written else 'unchanged (the same choice)'}: {path}", soft_wrap=True)
    sets = "".join(f" --set {shlex.quote(text)}" for text in overrides)
    out.print(f"apply it with `clbench train {shlex.quote(benchmark)} -m {shlex.quote(base.method)}{sets} --seeds "
              f"0-9 --tuned {shlex.quote(str(path))} --results {shlex.quote(str(results))}`", soft_wrap=True)


def _write(path: Path, choice: TunedChoice, force: bool, benchmark: str, results: Path) -> bool:
    """Write the tuned file; False (kept) if it already holds this choice; TuningError if it holds another one
    (or cannot be read) and `force` is not given. `benchmark` (as the user named it) and `results` go into the
    commands it prints."""
    import dataclasses

    from clbench.tuning.scoring import TuningError
    from clbench.tuning.tuned_file import read_tuned, write_tuned

    if path.exists():
        try:
            existing = read_tuned(path, choice.benchmark, choice.config_hash, choice.method, argument=benchmark,
                                  results=results)
        except TuningError as error:
            if not force:
                raise TuningError(f"{error}; or replace it with this choice with --force") from None
        else:
            if existing == dataclasses.replace(choice, clbench_version=existing.clbench_version):
                return False
            if not force:
                raise TuningError(f"{path} holds another choice (grid {' '.join(existing.grid)}, rule "
                                  f"{existing.rule}, seed {existing.tuning_seed}, {existing.evaluation}); replace it "
                                  f"with --force")
    write_tuned(path, choice, overwrite=force, benchmark=benchmark)
    return True


def _print_choice(choice: TunedChoice) -> None:
    from rich.table import Table

    keys = [key for key, _ in choice.points[0].values]
    table = Table(title=f"{choice.benchmark} {choice.method}: validation {choice.rule} ({choice.evaluation}, "
                        f"seed {choice.tuning_seed})")
    for key in keys:
        table.add_column(key)
    table.add_column(f"validation {choice.rule}", justify="right")
    table.add_column("chosen")
    for point in choice.points:
        table.add_row(*(value for _, value in point.values), f"{point.score:.4f}",
                      "<- chosen" if point.values == choice.chosen else "")
    console().print(table)
    console().print(f"chosen for {choice.method}: {', '.join(choice.chosen_overrides)}")
