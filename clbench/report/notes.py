"""The notes under every table: what the numbers are measured on (scenario, split, training loss), which runs
were left out and why (incomplete, damaged, missing seeds), with the command that fixes each."""

from __future__ import annotations

import shlex

import numpy as np

from clbench import metrics
from clbench.report.commands import stored_overrides, train_command
from clbench.report.formatting import format_seeds
from clbench.report.loading import DOMAIN, REFERENCES, Results
from clbench.report.reading import FileDamage
from clbench.results import EVALUATIONS, TEST, scenario_evaluation


def scenario_notes(results: Results) -> list[str]:
    """A note saying that the domain scenario's runs have one evaluation, when the benchmark has any (`DOMAIN`)."""
    domain = [run for run in results.info.values() if run.get("scenario") == DOMAIN]
    if not domain:
        return []
    which = "every run" if len(domain) == len(results.info) else f"{len(domain)} of {len(results.info)} runs"
    return [f"scenario domain ({which}): one head shared by every task and no task id, so task-aware and "
            f"task-agnostic accuracy are one number, stored once and shown under either --evaluation"]


def evaluation_notes(results: Results, named: bool = False) -> list[str]:
    """A note when the evaluation shown is not the one some runs' scenario reports (`--evaluation` chose it: class-
    scenario runs under task-aware, task-scenario runs under task-agnostic), naming those runs' own; with `named`,
    also one naming a task-agnostic evaluation (for tables that do not name it otherwise)."""
    shown = results.evaluation
    notes = [f"evaluation: {shown} (argmax over every class seen so far, no task id)"] if named and \
        shown != EVALUATIONS[0] else []
    scenarios = [run.get("scenario") or "task" for run in results.info.values()]
    for scenario in sorted(set(scenarios) - {DOMAIN}):
        own = scenario_evaluation(scenario)
        if own != shown:
            count = scenarios.count(scenario)
            which = "every run" if count == len(scenarios) else f"{count} of {len(scenarios)} runs"
            notes.append(f"evaluation {shown} (--evaluation) for {scenario}-scenario runs ({which}), whose comparison "
                         f"reports {own}: leave out --evaluation for their own")
    return notes


def class_loss_notes(results: Results) -> list[str]:
    """A note when class-scenario runs of both `training.class_loss` values are shown together (their numbers
    come from two protocols: the cross-entropy over the classes seen so far, or over every output), naming which
    approach's runs used which."""
    runs = results.runs
    if runs.empty or "class_loss" not in runs:
        return []
    chosen = runs[runs["scenario"] == "class"]
    losses = {loss: sorted(set(group["label"])) for loss, group in chosen.groupby("class_loss")}
    if len(losses) < 2:
        return []
    named = "; ".join(f"{loss} ({CLASS_LOSS_WORDS.get(str(loss), loss)}): {', '.join(labels)}"
                      for loss, labels in sorted(losses.items()))
    return [f"class-scenario runs of two training losses are shown together (training.class_loss): {named}; "
            f"compare runs of one loss, e.g. re-run the others with --set training.class_loss=..."]


CLASS_LOSS_WORDS = {"seen": "cross-entropy over the classes seen so far",
                    "all": "cross-entropy over every output"}


def split_notes(results: Results) -> list[str]:
    """A note saying which data the numbers are measured on, when it is not the test sets (`--split`)."""
    if results.split == TEST:
        return []
    return [f"split: {results.split} (each task's validation split, held out of its training data by the protocol; "
            f"not the test set)"]


def no_split_rows_note(results: Results) -> str:
    """Why no finished run has rows of the chosen split (`--split validation`): their protocol holds out no
    validation split (nothing a re-run changes), or they were stored before validation rows (re-run with --force)."""
    run_ids = list(results.info)
    none_held = [run_id for run_id in run_ids if results.holds_out_no_validation(run_id)]
    start = f"no finished run of {results.benchmark} has {results.split} rows"
    if len(none_held) == len(run_ids):
        return (f"{start}: its protocol holds out no validation split (data.validation_fraction is 0: every training "
                f"sample is trained on), so a re-run has none either; report the test split (leave out --split "
                f"validation), or train with --set data.validation_fraction=0.1 for validation numbers")
    old = "stored before results schema 3 (test rows only): re-run them with --force"
    if none_held:
        return (f"{start}: {len(none_held)} of {len(run_ids)} runs hold out no validation split "
                f"(data.validation_fraction is 0), the others were {old}")
    return f"{start}: they were {old}"


def incomplete_notes(results: Results) -> list[str]:
    """A note naming the seeds `--seeds` asked for that no run has, one per run that started but has no
    accuracy file, with the command that re-runs it, and one per run whose network diverged (`diverged_notes`)."""
    notes = seed_filter_notes(results)
    for run in results.incomplete:
        reason = f" ({run['error']})" if run.get("error") else ""
        notes.append(f"left out {run['run_id']}: {run['status']}{reason}; re-run "
                     f"{rerun_command(results, run['method'], run['seed'], run.get('overrides'))}")
    return notes + damaged_notes(results) + diverged_notes(results)


def diverged_notes(results: Results) -> list[str]:
    """One note per run whose network diverged (`metrics.diverged_stage` on its rows' losses): from which task on,
    that its accuracies from there are a broken network's yet stay in the means, and what to do."""
    rows = results.rows
    if rows is None or rows.empty or "loss" not in rows:
        return []
    notes = []
    suspects = rows["run_id"][~np.isfinite(rows["loss"].to_numpy(dtype=float))].unique()  # usually the random runs
    for run_id, group in rows[rows["run_id"].isin(suspects)].groupby("run_id", sort=True):
        stage = metrics.diverged_stage(group["stage"].to_numpy(), group["loss"].to_numpy())
        if stage is None or run_id not in results.info:
            continue
        run = results.info[run_id]
        notes.append(f"{run['label']} seed {run['seed']} ({run_id}) diverged while learning task {stage}: its "
                     f"{results.split} loss is not finite from stage {stage} on (NaN or infinite weights), so its "
                     f"accuracies from there are a broken network's, and they are in the means; lower its lr "
                     f"(--set training.lr=...) or leave the seed out (--seeds)")
    return notes


def rerun_command(results: Results, method: str, seed: object, overrides: object) -> str:
    """`clbench train` for one run (`train_command`), into the same results folder, in backticks: with the run's
    `--set` options (`overrides`, from its run.json), or followed by a reminder to add them when they are unknown."""
    listed = stored_overrides(overrides)
    command = train_command(results, [method], str(seed), listed or [])
    return f"`{command}`" if listed is not None else f"`{command}` (with the same --set options)"


def damaged_notes(results: Results, method: str | None = None, kinds: tuple[str, ...] | None = None) -> list[str]:
    """One note per run left out because its accuracy file or run.json is damaged, and one per damaged file of a
    run kept (`Results.damaged_files`: what depends on it is left out), each naming the file and the command that
    remakes it (`clbench.run_files`); only `method`'s runs, and of the files kept only those of `kinds`, if given."""
    notes = []
    for folder, problem in results.damaged:
        owner, seed = folder.parent.parent.name, folder.name.removeprefix("seed-")
        if method is not None and owner != method:
            continue
        overrides = results.run_files.get(str(folder), {}).get("overrides")
        notes.append(f"left out {results.benchmark}/{owner}/{folder.parent.name}/{folder.name}: {problem}; "
                     f"{rerun_command(results, owner, seed, overrides)} re-runs it from its last readable "
                     f"checkpoint")
    return notes + [damaged_file_note(results, damage) for damage in results.damaged_files
                    if (method is None or damage.folder.parent.parent.name == method)
                    and (kinds is None or (damage.kind is not None and damage.kind.name in kinds))]


def damaged_file_note(results: Results, damage: FileDamage) -> str:
    """`<file> is damaged: <why>; left out: <what depends on it>; <command> remakes it` for a damaged file of a run
    the report keeps: `clbench train` (from the run's last good checkpoint) or `clbench evaluate`."""
    folder = damage.folder
    method, seed = folder.parent.parent.name, folder.name.removeprefix("seed-")
    command = rerun_command(results, method, seed, results.run_files.get(str(folder), {}).get("overrides"))
    if damage.remade_by == "evaluate":
        command = command.replace("`clbench train ", "`clbench evaluate ", 1)
    how = " from the run's last good checkpoint" if damage.remade_by == "train" else ""
    return f"{damage.problem}; left out: {damage.leaves_out}; {command} remakes it{how}"


def seed_filter_notes(results: Results) -> list[str]:
    """`--seeds 1,9: no run of mnist2 has seed 9 ...` when the filter names seeds that no run has."""
    missing = results.missing_seeds
    if not missing or results.seed_filter is None:
        return []
    there = format_seeds(results.seeds_present) if results.seeds_present else "none"
    return [f"--seeds {format_seeds(results.seed_filter)}: no run of {results.benchmark} has "
            f"{_plural(len(missing), 'seed')} {format_seeds(missing)} in {results.results_dir} (seeds there: {there})"]


def complete_runs(results: Results, notes: list[str]) -> list[str]:
    """The run ids whose accuracy matrix is complete; a note for each of the others."""
    complete = []
    for run_id, matrix in results.matrices.items():
        if metrics.is_complete_matrix(matrix):
            complete.append(run_id)
        else:
            notes.append(f"left out {run_id}: its accuracy matrix is incomplete (a stage or task is missing)")
    return complete


def seed_coverage_notes(seeds: dict[str, list[int]]) -> list[str]:
    """A note naming the rows that lack seeds other rows have (their means are over different task orders)."""
    every = sorted({seed for values in seeds.values() for seed in values})
    lacking = {label: sorted(set(every) - set(values)) for label, values in seeds.items()}
    lacking = {label: missing for label, missing in lacking.items() if missing}
    if not lacking:
        return []
    if len(lacking) > 10:
        return [f"{len(lacking)} rows lack seeds that other rows have (see the seeds column)"]
    parts = "; ".join(f"{label} lacks {_plural(len(m), 'seed')} {format_seeds(m)}"
                      for label, m in sorted(lacking.items()))
    return [f"not every row has the same seeds: {parts}"]


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def unmeasured_labels(results: Results, include_references: bool, shown: set[str]) -> dict[str, str]:
    """Label -> why its runs have no number in the chosen evaluation ("needs the task id", or stored before
    task-agnostic evaluation), for the labels with no row in the table: shown as text, never as a number."""
    found: dict[str, str] = {}
    for run_id, run in results.info.items():
        reason = results.unmeasured(run_id)
        if reason and run["label"] not in shown and (include_references or run["method"] not in REFERENCES):
            found.setdefault(run["label"], reason)
    return dict(sorted(found.items()))


def one_note_per_cause(results: Results, notes: list[str]) -> list[str]:
    """`notes` with the `left out RUN: why` notes of the same cause merged into one that names the runs by label and
    seeds (`left out sgd seeds 0-2, ewc seed 1: why`), in the order each cause is first seen; other notes once."""
    merged: dict[str, dict[str, list[int]]] = {}  # cause -> label -> seeds
    order: dict[tuple[bool, str], None] = {}  # (a merged cause?, its text), in order
    for note in notes:
        run_id, _, why = note.removeprefix("left out ").partition(": ")
        if not note.startswith("left out ") or run_id not in results.info:
            order[(False, note)] = None
            continue
        order[(True, why)] = None
        run = results.info[run_id]
        merged.setdefault(why, {}).setdefault(str(run["label"]), []).append(int(run["seed"]))
    return [_merged_note(merged[text], text) if cause else text for cause, text in order]


def _merged_note(runs: dict[str, list[int]], why: str) -> str:
    named = ", ".join(f"{label} {_plural(len(set(seeds)), 'seed')} {format_seeds(seeds)}"
                      for label, seeds in runs.items())
    return f"left out {named}: {why}"


def run_notes(results: Results, named: bool = False) -> list[str]:
    """The notes every table of the accuracy rows starts with: the evaluation (`named`: also a task-agnostic one the
    table does not name otherwise), the scenario, the split, the runs left out (interrupted, failed, damaged,
    diverged, seeds asked for that no run has) and the training loss."""
    return (evaluation_notes(results, named) + scenario_notes(results) + split_notes(results)
            + incomplete_notes(results) + class_loss_notes(results))


def references_only_note(results: Results, include_references: bool, shown: set[str]) -> list[str]:
    """Why a table that lists no reference runs (no `--references`) has no row: every finished run of the benchmark
    is a joint or random reference; [] when it has rows or no such run."""
    if shown or include_references:
        return []
    methods = sorted({str(run["method"]) for run in results.info.values() if run["method"] in REFERENCES})
    if not methods or len(methods) < len({str(run["method"]) for run in results.info.values()}):
        return []
    return [f"nothing to show for {results.benchmark}: its finished runs are {' and '.join(methods)} only, the "
            f"references, which a table lists as rows with --references; train an approach with `clbench train "
            f"{results.command_name} -m METHOD --results {shlex.quote(str(results.results_dir))}`"]
