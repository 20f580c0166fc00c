"""The sequential protocol: for each task t, train (early stopping), evaluate every task (on its test set and on
its validation split), checkpoint.

`plan_runs` resolves what a command asks for into `RunPlan`s (one per benchmark x method x seed), each with
its resolved config, config hash and results folder; `execute` runs one plan. Progress goes to an observer
(the CLI draws it with rich); the library itself prints nothing.

Nothing is lost: the checkpoint after every task holds the approach state, every random stream (torch's
global generator, CUDA's, the batch order and the approach's own generators in `extra_state`) and the rows so
far, so `execute` on an unfinished run continues after its last finished task and gives the same numbers as
an uninterrupted run. A run holds `<run_dir>/.lock` while it executes; a run locked by another process is
left alone (status `locked`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import pickle
import shlex
import time
import traceback
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from clbench.approaches import Approach, ApproachContext, ResolvedApproach, check_default_grids, resolve
from clbench.approaches.datatypes import TASK_AWARE, EpochLog, Evaluation, TaskLog
from clbench.approaches.plugins import code_text
from clbench.approaches.refusals import scenario_refusal
from clbench.approaches.registry import code_identity, method_argument, origin_of
from clbench.data.custom import CustomDataset
from clbench.data.tasks import DatasetLoader, TaskSequence, build_tasks
from clbench.errors import ClbenchError, DataNotFoundError, SpecError
from clbench.nets import parameter_count
from clbench.results import (
    ACCURACY_FILE,
    EVALUATION_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    SPLITS,
    TEST,
    VALIDATION,
    DamagedFileError,
    accuracy_frame,
    atomic_write_bytes,
    damaged_run_files,
    inside,
    is_complete,
    machine_provenance,
    parquet_bytes,
    read_run_file,
    row_split,
    run_directory,
    utc_now,
    write_json,
    write_parquet,
)
from clbench.run.interrupts import interrupts_held
from clbench.run.locking import held_lock, lock_holder
from clbench.seeding import seed_global_torch
from clbench.spec import BenchmarkSpec, benchmarks_dir, command_argument
from clbench.spec.fields import flatten, identity_dict, stable_hash
from clbench.spec.fields import origin_of as origin_of_key  # `origin_of` here is the plugins' (an approach's origin)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunPlan:
    """One run: a benchmark spec, an approach with its resolved hyper-parameters, and a seed."""

    spec: BenchmarkSpec
    approach: ResolvedApproach
    seed: int
    overrides: tuple[str, ...]
    config: dict[str, Any]
    config_hash: str
    data_hash: str
    run_dir: Path
    reference_hash: str = ""
    # `clbench train --tuned FILE`: the tuned file's sha256 and tuning seed, recorded in every row and in run.json;
    # not part of the config (a tuned run and the same values given by hand are one run).
    tuned_sha256: str | None = None
    tuned_seed: int | None = None

    @property
    def method(self) -> str:
        return self.approach.name

    @property
    def run_id(self) -> str:
        return f"{self.spec.name}/{self.method}/{self.config_hash}/seed-{self.seed}"


@dataclass
class RunOutcome:
    """What happened to one plan: `done`, `skipped` (already finished), `locked` (running elsewhere),
    `failed` or `interrupted`, with its rows (done) or the error (failed, locked: who holds the lock)."""

    plan: RunPlan
    status: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    resumed_after_stage: int | None = None  # 1-based stage of the checkpoint a resumed run continued from
    damaged: tuple[str, ...] = ()  # damaged files of the run found and left behind (named; the run re-ran them)

    @property
    def succeeded(self) -> bool:
        """Done, already finished, or left to the process that is running it."""
        return self.status in ("done", "skipped", "locked")


class RunObserver(Protocol):
    """Receives progress events (the CLI shows them; tests may record them)."""

    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None: ...
    def run_resumed(self, plan: RunPlan, stage: int) -> None: ...
    def task_started(self, plan: RunPlan, stage: int) -> None: ...
    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None: ...
    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None: ...


class SilentObserver:
    """An observer that ignores every event."""

    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None:
        pass

    def run_resumed(self, plan: RunPlan, stage: int) -> None:
        pass

    def task_started(self, plan: RunPlan, stage: int) -> None:
        pass

    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None:
        pass

    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None:
        pass


def run_config(spec: BenchmarkSpec, approach: ResolvedApproach) -> dict[str, Any]:
    """The resolved config that identifies a run (everything but the seed and the device).

    A plugin's config includes `code` (`clbench.approaches.plugins.code_identity`): an edited plugin makes new runs,
    never mixed with the old ones. Built-ins have no `code` key, so their config hashes are unchanged.
    """
    code = code_identity(approach.name)
    return {"benchmark": spec.name, "variant": spec.variant, "data": identity_dict(spec.data),
            "network": identity_dict(spec.network), "method": approach.name, **approach.config(),
            **own_datasets_identity(spec), **({"code": code} if code is not None else {})}


def data_identity(spec: BenchmarkSpec) -> str:
    """Hash of what the references must share with a run: the benchmark and its data (tasks, splits)."""
    return stable_hash({"benchmark": spec.name, "data": identity_dict(spec.data), **own_datasets_identity(spec)})


def reference_identity(spec: BenchmarkSpec) -> str:
    """Hash of what a run's `joint` reference must share with it: the benchmark's data, network and protocol.

    The protocol is the spec's `training` after `--set` (the benchmark's), not an approach's own `training:`
    section: HAT's 50 epochs on mnist2 compare against the joint of the benchmark's protocol. Two runs with the
    same reference hash and seed are measured against the same A_J. (The `random` reference trains nothing and is
    matched on the data hash and the seed alone.)
    """
    return stable_hash({"benchmark": spec.name, "data": identity_dict(spec.data),
                        "network": identity_dict(spec.network), "training": identity_dict(spec.training),
                        **own_datasets_identity(spec)})


def own_datasets_identity(spec: BenchmarkSpec) -> dict[str, Any]:
    """`{"datasets": {name: {format, content_hash}}}` of the spec's own data sets in use; {} if none (so the
    hashes of built-in benchmarks stay as they were). Changed content changes the run's identity."""
    from clbench.data.custom import content_hash, custom_datasets

    own = custom_datasets(spec)
    if not own:
        return {}
    return {"datasets": {name: {"format": dataset.format, "content_hash": content_hash(dataset)}
                         for name, dataset in sorted(own.items())}}


def check_shipped_name(spec: BenchmarkSpec, methods: Sequence[str]) -> None:
    """SpecError if a spec file takes a shipped benchmark's name but its runs of `methods` would differ from the
    shipped benchmark's (with the same `--set` options): they would be stored, reported and compared with the
    paper as that benchmark. A spec file that resolves to the shipped definition (`clbench spec mnist2 > my.yaml`)
    is accepted: its runs are the shipped benchmark's runs."""
    shipped_file = benchmarks_dir() / f"{spec.name}.yaml"
    if not shipped_file.is_file() or Path(spec.source).resolve() == shipped_file.resolve():
        return
    shipped = _shipped_counterpart(spec)
    for method in dict.fromkeys(methods):
        ours = flatten(run_config(spec, resolve(spec, method, check_grids=False)))  # grids: checked by plan_runs
        theirs = flatten(run_config(shipped, resolve(shipped, method, check_grids=False)))
        differing = [key for key in sorted(set(ours) | set(theirs)) if ours.get(key) != theirs.get(key)]
        if differing:
            shown = "; ".join(f"{key}={json.dumps(ours.get(key))} (shipped: {json.dumps(theirs.get(key))})"
                              for key in differing[:6]) + ("; ..." if len(differing) > 6 else "")
            raise SpecError(f"{spec.source}: `name: {spec.name}` is a shipped benchmark's name, but this spec's "
                            f"{method} runs differ from {spec.name}'s: {shown}; they would be stored and reported "
                            f"as {spec.name}'s: rename the benchmark (e.g. `name: my-{spec.name}`)")


def _shipped_counterpart(spec: BenchmarkSpec) -> BenchmarkSpec:
    """The shipped spec of `spec.name` with the same `--set` options (and variant), or as shipped if they do not
    apply to it."""
    from clbench.spec import load_benchmark

    options = [*spec.overrides, *([f"variant={spec.variant}"] if spec.variant else [])]
    try:
        return load_benchmark(spec.name, options)
    except SpecError:
        return load_benchmark(spec.name)


def plan_runs(spec: BenchmarkSpec, methods: Sequence[str], seeds: Sequence[int], results_dir: Path,
              overrides: Sequence[str] = ()) -> list[RunPlan]:
    """Resolve every (method, seed) of a command; unknown methods and bad sections fail before any work."""
    plans = []
    check_default_grids(spec)  # once for the spec, not once per method
    for method in dict.fromkeys(methods):
        approach = resolve(spec, method, check_grids=False)
        refusal = scenario_refusal(approach.cls, spec.data.scenario)
        if refusal is not None:  # before any run starts (the approach's constructor says it too)
            raise SpecError(f"{origin_of_key('data.scenario', spec.source, spec.origins)}: {refusal}")
        config = run_config(spec, approach)
        config_hash = stable_hash(config)
        for seed in seeds:
            run_dir = run_directory(results_dir, spec.name, method, config_hash, seed)
            plans.append(RunPlan(spec, approach, seed, tuple(overrides), config, config_hash,
                                 data_identity(spec), run_dir, reference_identity(spec)))
    return plans


def resolve_device(name: str) -> torch.device:
    """`auto` -> CUDA when present, else CPU; `cpu`, `cuda`, `cuda:N` as given (checked)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ClbenchError(f"--device {name!r} is not a device: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ClbenchError(f"--device {name}: CUDA is not available on this machine; use --device cpu or auto")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ClbenchError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                           f"numbered from 0")
    return device


def unique_plans(plans: Iterable[RunPlan]) -> list[RunPlan]:
    """The plans in order, each run folder once (a grid or `--with-references` may name a run twice)."""
    unique: dict[Path, RunPlan] = {}
    for plan in plans:
        unique.setdefault(plan.run_dir, plan)
    return list(unique.values())


@dataclass(frozen=True)
class FetchingLoader:
    """Loads prepared data sets, fetching (with the same mirror setting) those that are missing.

    A picklable `DatasetLoader`, so that worker processes and Ray tasks can receive it.
    """

    data_dir: Path
    mirror: str | None = None
    own_datasets: tuple[CustomDataset, ...] = ()  # a spec's own data sets (see `for_spec`)

    def for_spec(self, spec: BenchmarkSpec) -> FetchingLoader:
        """This loader, also knowing the spec's own data sets (`datasets:`)."""
        from clbench.data.custom import custom_datasets

        return dataclasses.replace(self, own_datasets=tuple(custom_datasets(spec).values()))

    def __call__(self, name: str, form: str):  # type: ignore[no-untyped-def]
        from clbench.data.custom import load_custom
        from clbench.data.sources import fetch_dataset, load_dataset

        for dataset in self.own_datasets:
            if dataset.name == name:
                return load_custom(dataset, self.data_dir, form)
        try:
            return load_dataset(name, self.data_dir, form)
        except DataNotFoundError:
            fetch_dataset(name, self.data_dir, self.mirror)
            return load_dataset(name, self.data_dir, form)


def fetching_loader(data_dir: Path, mirror: str | None) -> FetchingLoader:
    """Load prepared data sets, fetching (with the same mirror setting) those that are missing."""
    return FetchingLoader(Path(data_dir), mirror)


def prepare_data(specs: Iterable[BenchmarkSpec], data_dir: Path, mirror: str | None) -> None:
    """Fetch every data set the specs need once, before runs start (missing data: DataNotFoundError)."""
    from clbench.data.custom import custom_datasets, prepare_custom
    from clbench.data.sources import fetch_dataset

    specs = list(specs)
    for spec in specs:
        for dataset in custom_datasets(spec).values():
            prepare_custom(dataset, Path(data_dir))
    builtin = (name for spec in specs for name in spec.data.datasets if name not in spec.datasets)
    for name in dict.fromkeys(builtin):
        fetch_dataset(name, Path(data_dir), mirror)


def loader_for(loader: DatasetLoader, spec: BenchmarkSpec) -> DatasetLoader:
    """`loader`, told about the spec's own data sets when it can load them (a `FetchingLoader`)."""
    return loader.for_spec(spec) if spec.datasets and isinstance(loader, FetchingLoader) else loader


def build_approach(plan: RunPlan, tasks: TaskSequence, device: torch.device) -> Approach:
    """Seed the run (the one explicit global seeding) and build its approach and network."""
    seed_global_torch(plan.seed)
    context = ApproachContext(plan.spec.network, plan.approach.training, tasks.input_shape, tasks.head_sizes,
                              device, plan.seed, plan.spec.data.scenario, plan.spec.data.augment)
    return plan.approach.cls(context, plan.approach.hyperparameters)


def execute(plan: RunPlan, *, device: torch.device, loader: DatasetLoader, force: bool = False,
            observer: RunObserver | None = None) -> RunOutcome:
    """Run one plan end to end: skip it if it finished (unless `force`), leave it if another process holds its
    lock, resume it after its last checkpoint if an earlier attempt stopped. Errors propagate (after run.json
    records them as `failed` or, for KeyboardInterrupt, `interrupted`)."""
    observer = observer or SilentObserver()
    with held_lock(plan.run_dir) as locked:
        if not locked:
            return RunOutcome(plan, "locked", error=f"running elsewhere ({lock_holder(plan.run_dir)})")
        if is_complete(plan.run_dir) and not force:
            return RunOutcome(plan, "skipped")
        check_code(plan, force)
        if force:
            discard_progress(plan.run_dir)
        return _execute_locked(plan, device, loader, observer)


def check_code(plan: RunPlan, force: bool = False) -> None:
    """ClbenchError if the approach's code is not the code this plan was made with, or (unless `force`) the run
    folder holds an unfinished run started by other code: resuming would mix two codes in one run."""
    loaded = code_identity(plan.method)
    planned = plan.config.get("code")
    if loaded != planned:
        raise ClbenchError(f"the code of approach {plan.method} changed since this command started "
                           f"({code_text(planned)}, now {code_text(loaded)}): run the command again")
    if force:
        return
    stored = _previous_run_file(plan.run_dir)
    config = stored.get("config")
    started = config.get("code") if isinstance(config, dict) else None
    if config is not None and started != planned:
        raise ClbenchError(f"{plan.run_dir} holds an unfinished run of {plan.method} started by other code "
                           f"({code_text(started)}) than now ({code_text(planned)}); resuming it would mix two codes "
                           f"in one run: restore that code to resume it, or start it over with --force")


def discard_progress(run_dir: Path) -> None:
    """Forget a run's accuracies, evaluations and checkpoints (`--force`), so no stale stage is resumed."""
    for name in (ACCURACY_FILE, EVALUATION_FILE):
        (run_dir / name).unlink(missing_ok=True)
    for path in (run_dir / "checkpoints").glob("stage-*.pt"):
        path.unlink()


def remove_stale_temporaries(run_dir: Path) -> None:
    """Delete temporary files a killed writer left behind (only called while holding the run's lock)."""
    for folder in (run_dir, run_dir / "checkpoints"):
        for path in folder.glob(".*.tmp"):
            path.unlink(missing_ok=True)


def _execute_locked(plan: RunPlan, device: torch.device, loader: DatasetLoader,
                    observer: RunObserver) -> RunOutcome:
    start = time.perf_counter()
    remove_stale_temporaries(plan.run_dir)
    damaged = damaged_run_files(plan.run_dir)
    for problem in damaged:
        log.warning("%s; the run is treated as unfinished", problem)
    header = _run_header(plan, machine_provenance(str(device), str(torch.__version__), torch.version.cuda))
    header["damaged_files"] = damaged
    try:
        write_json(plan.run_dir / RUN_FILE, {**header, "status": "running"})
        rows = _run_sequence(plan, device, loader, observer, header)
        finished, encoded = _encoded_rows(plan, rows)
    except BaseException as error:
        status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
        write_json(plan.run_dir / RUN_FILE, {**header, "status": status, "finished_utc": utc_now(),
                                             "error": f"{type(error).__name__}: {error}",
                                             "traceback": traceback.format_exc()})
        raise
    seconds = time.perf_counter() - start
    with interrupts_held():  # the rows and `complete` land together; a Ctrl-C meanwhile takes effect after both
        atomic_write_bytes(plan.run_dir / ACCURACY_FILE, encoded)
        write_json(plan.run_dir / RUN_FILE, {**header, "status": "complete", "finished_utc": finished,
                                             "seconds": seconds})
    return RunOutcome(plan, "done", rows, seconds=seconds, resumed_after_stage=header["resumed_after_stage"],
                      damaged=tuple(header["damaged_files"]))


def _previous_run_file(run_dir: Path) -> dict[str, Any]:
    """The run.json an earlier attempt left ({} if none, or if it is damaged: `damaged_run_files` names it)."""
    try:
        return read_run_file(run_dir) or {}
    except DamagedFileError:
        return {}


def _run_header(plan: RunPlan, provenance: dict[str, Any]) -> dict[str, Any]:
    previous = _previous_run_file(plan.run_dir)
    return {"schema_version": SCHEMA_VERSION, "run_id": plan.run_id, "benchmark": plan.spec.name,
            "variant": plan.spec.variant, "method": plan.method, "seed": plan.seed,
            "config_hash": plan.config_hash, "data_hash": plan.data_hash,
            "reference_hash": plan.reference_hash, "config": plan.config,
            "overrides": list(plan.overrides), "tuned_sha256": plan.tuned_sha256, "tuned_seed": plan.tuned_seed,
            "spec_file": plan.spec.source, "started_utc": utc_now(),
            "monitoring_reporter": plan.approach.cls.monitoring_reporter,
            "previous_status": previous.get("status"), "parameters": None, "resumed_after_stage": None,
            "torch_threads": torch.get_num_threads(), "approach_origin": origin_of(plan.method), **provenance}


def _run_sequence(plan: RunPlan, device: torch.device, loader: DatasetLoader, observer: RunObserver,
                  header: dict[str, Any]) -> list[dict[str, Any]]:
    """Train and evaluate the stages after the last checkpoint (all of them for a new run, after the stage-0
    evaluation of the network at initialisation)."""
    tasks = build_tasks(plan.spec.data, plan.seed, loader_for(loader, plan.spec), device)
    approach = build_approach(plan, tasks, device)
    header.update(parameters=parameter_count(approach.network), task_agnostic=approach.predicts_without_task_id())
    first_stage, rows = resume_from_checkpoint(plan.run_dir, approach, len(tasks), header["damaged_files"],
                                               upgrade=lambda stage, old: upgraded_rows(plan, approach, tasks, stage,
                                                                                        old, header))
    if first_stage == 0:
        rows = _evaluate_stage(plan, approach, tasks, -1, None, header)
    header.update(resumed_after_stage=first_stage or None)
    write_json(plan.run_dir / RUN_FILE, {**header, "status": "running"})
    observer.run_started(plan, tasks.names)
    if first_stage:
        observer.run_resumed(plan, first_stage - 1)
    for stage in range(first_stage, len(tasks)):
        observer.task_started(plan, stage)
        task_log = approach.learn_task(stage, tasks, lambda epoch: observer.epoch_finished(plan, epoch))
        stage_rows = _evaluate_stage(plan, approach, tasks, stage, task_log, header)
        rows.extend(stage_rows)
        _store_monitoring(plan, approach, tasks, stage, header)
        save_checkpoint(plan.run_dir, stage, approach, rows)
        observer.task_finished(plan, stage, learned_accuracies(stage_rows))
    return rows


def learned_accuracies(stage_rows: Sequence[dict[str, Any]]) -> list[float]:
    """The task-aware test accuracies of the tasks learned so far (u <= t), in task order, from one stage's rows."""
    return [row["accuracy"] for row in stage_rows
            if row["evaluation"] == TASK_AWARE and row_split(row) == TEST and row["task"] <= row["stage"]]


def evaluated_tasks(approach: Approach, n_tasks: int, stage: int) -> range:
    """The tasks evaluated after task `stage` (0-based; -1: at initialisation): every task, or only the learned
    ones for an approach that cannot predict an unlearned task (PathNet)."""
    return range(n_tasks) if approach.predicts_unlearned_tasks else range(stage + 1)


def evaluate_stage(approach: Approach, tasks: TaskSequence, stage: int,
                   split: str = TEST) -> list[tuple[int, str, Evaluation, float]]:
    """(task, evaluation, result, seconds) of every task evaluated after task `stage` (0-based; -1: at
    initialisation) on `split` (each task's test set, or its validation split), in task order, each task's
    evaluations from one pass (`Approach.evaluate_task`: inference mode, on the approach's device), whose
    seconds each of them carries.

    Task-agnostic candidates: the classes of tasks 0..max(stage, u) (every class seen so far, and the task's own
    classes when it is not learned yet, so that its accuracy is not 0 by construction).
    """
    results = []
    for task in evaluated_tasks(approach, len(tasks), stage):
        start = time.perf_counter()
        data = tasks[task].test if split == TEST else tasks[task].valid
        if split != TEST and len(data) == 0:
            continue  # no validation split (`data.validation_fraction: 0`): no validation rows
        evaluations = approach.evaluate_task(data, task, max(stage, task) + 1)
        seconds = time.perf_counter() - start
        results.extend((task, name, evaluation, seconds) for name, evaluation in evaluations.items())
    return results


def _evaluate_stage(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int, task_log: TaskLog | None,
                    header: dict[str, Any], splits: Sequence[str] = SPLITS) -> list[dict[str, Any]]:
    """The rows of one stage: every evaluated task on each of `splits` (test rows first, in task order, then the
    validation rows). `stage_eval_seconds` is the time of all of the stage's evaluations."""
    evaluations = [(split, evaluation) for split in splits for evaluation in evaluate_stage(approach, tasks, stage,
                                                                                            split)]
    # a task's evaluations come from one pass and carry its time each: counted once per task and split
    eval_seconds = sum({(split, task): seconds for split, (task, *_, seconds) in evaluations}.values())
    memory = approach.memory_usage() if stage >= 0 else (0, 0)
    return [accuracy_row(plan, header, stage, task, tasks[task].name, name, result, task_log, eval_seconds, memory,
                         split)
            for split, (task, name, result, _) in evaluations]


def _encoded_rows(plan: RunPlan, rows: list[dict[str, Any]]) -> tuple[str, bytes]:
    """Stamp the rows with the finishing time and encode them as a results Parquet file: (the time, its bytes)."""
    finished = utc_now()
    for row in rows:
        row.update(finished_utc=finished, tuned_sha256=plan.tuned_sha256, tuned_seed=plan.tuned_seed)
    return finished, parquet_bytes(accuracy_frame(rows), {"run_id": plan.run_id})


def _write_rows(plan: RunPlan, file_name: str, rows: list[dict[str, Any]]) -> str:
    """Stamp the rows with the finishing time and write them atomically to the run folder; returns the time."""
    finished, encoded = _encoded_rows(plan, rows)
    atomic_write_bytes(plan.run_dir / file_name, encoded)
    return finished


def accuracy_row(plan: RunPlan, header: dict[str, Any], stage: int, task: int, task_name: str, evaluation: str,
                 result: Evaluation, task_log: TaskLog | None, eval_seconds: float,
                 memory: tuple[int, int] = (0, 0), split: str = TEST) -> dict[str, Any]:
    """One long-format result row (`stage` 0-based here, -1 at initialisation; stored 1-based, 0 at
    initialisation; `task` 0-based here, stored 1-based; `n_test`: the samples of `split` evaluated)."""

    return {
        "schema_version": SCHEMA_VERSION, "run_id": plan.run_id, "benchmark": plan.spec.name,
        "variant": plan.spec.variant, "method": plan.method, "seed": plan.seed, "config_hash": plan.config_hash,
        "data_hash": plan.data_hash, "reference_hash": plan.reference_hash,
        "hyperparameters": json.dumps(plan.config["hyperparameters"], sort_keys=True),
        "overrides": json.dumps(list(plan.overrides)),
        "approach_origin": json.dumps(header.get("approach_origin") or origin_of(plan.method), sort_keys=True),
        "scenario": plan.spec.data.scenario, "class_loss": plan.approach.training.class_loss,
        "evaluation": evaluation, "split": split, "stage": stage + 1,
        "task": task + 1,
        "task_name": task_name, "accuracy": float(result.accuracy), "loss": float(result.loss),
        "n_test": int(result.n),
        "stage_epochs": task_log.epochs if task_log else None,
        "stage_best_epoch": task_log.best_epoch if task_log else None,
        "stage_batches": task_log.batches if task_log else None,
        "stage_train_seconds": task_log.seconds if task_log else None, "stage_eval_seconds": eval_seconds,
        "memory_samples": int(memory[0]), "memory_bytes": int(memory[1]),
        **{key: header[key] for key in ("clbench_version", "git_commit", "torch_version", "cuda_version",
                                         "device", "hostname", "started_utc")},
        "finished_utc": None,
    }


def _store_monitoring(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int,
                      header: dict[str, Any]) -> None:
    """Append the approach's monitoring tables for this stage to `<table>.parquet` in the run folder."""
    import pandas as pd

    for name, table_rows in approach.monitoring(stage, tasks).items():
        frame = pd.DataFrame(table_rows)
        frame.insert(0, "stage", stage + 1)
        for column in ("seed", "method", "benchmark", "run_id"):
            frame.insert(0, column, header[column])
        path = monitoring_path(plan.run_dir, name)
        if path.is_file() and stage > 0:
            previous = pd.read_parquet(path)
            frame = pd.concat([previous[previous["stage"] < stage + 1], frame], ignore_index=True)
        write_parquet(path, frame, {"run_id": plan.run_id, "table": name})


def monitoring_path(run_dir: Path, table: str) -> Path:
    """`<run_dir>/<table>.parquet`; a table name that breaks the name rule (e.g. `../x`) is an error."""
    from clbench.spec import check_name

    check_name(table, "a monitoring table name (the keys `Approach.monitoring` returns)")
    return inside(run_dir, Path(run_dir) / f"{table}.parquet")


def checkpoint_path(run_dir: Path, stage: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"stage-{stage + 1:02d}.pt"


def save_checkpoint(run_dir: Path, stage: int, approach: Approach, rows: list[dict[str, Any]]) -> None:
    """The approach state, the global random streams and the rows so far after task `stage`, atomically."""
    payload = {"stage": stage, "approach": approach.state(), "rows": rows, "torch_rng": torch.get_rng_state()}
    if approach.device.type == "cuda":
        payload["cuda_rng"] = torch.cuda.get_rng_state(approach.device)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(checkpoint_path(run_dir, stage), buffer.getvalue())


def resume_from_checkpoint(run_dir: Path, approach: Approach, n_tasks: int, damaged: list[str] | None = None,
                           upgrade: RowUpgrade | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Restore the state after the last finished task; returns (first stage to train, rows so far).

    Restores the approach (network, extra state, batch generator) and torch's global (and CUDA) generator as
    they were when that task's checkpoint was written, so the next task starts exactly as it would have. A
    checkpoint that cannot be read (truncated) is named (logged, and appended to `damaged`) and the previous
    stage's is used instead; the stages after it are trained again. A checkpoint written before results schema 3
    (schema 1: task-aware rows of u <= t only; schema 2: test rows only) has its rows completed by
    `upgrade(stage, old rows)` (called before the approach's state is loaded: the approach is still at
    initialisation).
    """
    found = last_readable_checkpoint(run_dir, n_tasks, damaged if damaged is not None else [])
    if found is None:
        return 0, []
    stage, checkpoint = found
    rows = list(checkpoint["rows"])
    if checkpoint["stage"] != stage:
        raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} does not hold stages 1..{stage + 1}: "
                           f"re-run with --force")
    schema_1 = bool(rows) and "evaluation" not in rows[0]
    if rows and "split" not in rows[0]:
        if upgrade is None or (schema_1 and len(rows) != (stage + 1) * (stage + 2) // 2):
            raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} was written by an earlier clbench and "
                               f"cannot be completed: re-run with --force")
        rows = upgrade(stage, rows)
    if not set(range(1, stage + 2)) <= {row["stage"] for row in rows} <= set(range(stage + 2)):
        raise ClbenchError(f"checkpoint {checkpoint_path(run_dir, stage)} does not hold stages 0..{stage + 1}: "
                           f"re-run with --force")
    approach.load_state(checkpoint["approach"])
    torch.set_rng_state(checkpoint["torch_rng"])
    if "cuda_rng" in checkpoint and approach.device.type == "cuda":
        torch.cuda.set_rng_state(checkpoint["cuda_rng"], approach.device)
    return stage + 1, rows


RowUpgrade = Callable[[int, list[dict[str, Any]]], list[dict[str, Any]]]
STAGE_LOG_KEYS = ("stage_epochs", "stage_best_epoch", "stage_batches", "stage_train_seconds")


def upgraded_rows(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int,
                  old_rows: list[dict[str, Any]], header: dict[str, Any]) -> list[dict[str, Any]]:
    """Schema-3 rows of stages 0..stage+1 for a run whose checkpoints hold rows of an earlier schema (an unfinished
    run of an earlier clbench): stage 0 from `approach` at initialisation, each later stage re-evaluated from its
    checkpoint, with the training log (epochs, batches, seconds) of the old rows. Schema 1 (task-aware rows of
    u <= t): every row re-evaluated. Schema 2 (every test row): its test rows kept as stored (marked `split: test`),
    the validation rows added. Leaves `approach` at checkpoint `stage`."""
    schema_2 = "evaluation" in old_rows[0]
    splits = (VALIDATION,) if schema_2 else SPLITS

    def stage_rows(done: int) -> list[dict[str, Any]]:  # the old rows kept (schema 2), then the evaluated ones
        kept = [{**row, "schema_version": SCHEMA_VERSION, "split": TEST} for row in old_rows
                if schema_2 and row["stage"] == done + 1]
        log_fields = next(({key: row.get(key) for key in STAGE_LOG_KEYS} for row in old_rows
                           if row["stage"] == done + 1), {}) if done >= 0 else {}
        return kept + [{**row, **log_fields} for row in _evaluate_stage(plan, approach, tasks, done, None, header,
                                                                        splits)]

    rows = stage_rows(-1)
    for done in range(stage + 1):
        approach.load_state(load_checkpoint(plan.run_dir, done)["approach"])
        rows.extend(stage_rows(done))
    return rows


def last_readable_checkpoint(run_dir: Path, n_tasks: int,
                             damaged: list[str]) -> tuple[int, dict[str, Any]] | None:
    """(stage, checkpoint) of the last checkpoint that can be read, or None; damaged ones are appended to
    `damaged` (and logged) on the way down."""
    for stage in reversed(range(n_tasks)):
        if not checkpoint_path(run_dir, stage).is_file():
            continue
        try:
            return stage, load_checkpoint(run_dir, stage)
        except DamagedFileError as error:
            log.warning("%s; falling back to the previous stage's checkpoint", error)
            damaged.append(str(error))
    return None


def load_checkpoint(run_dir: Path, stage: int) -> dict[str, Any]:
    """The checkpoint after task `stage`; ClbenchError if there is none, DamagedFileError naming it if it cannot
    be read (truncated, not a checkpoint)."""
    path = checkpoint_path(run_dir, stage)
    if not path.is_file():
        raise ClbenchError(f"no checkpoint {path}: train the run first (`clbench train`)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError, zipfile.BadZipFile) as error:
        raise DamagedFileError(f"checkpoint {path} is damaged: {type(error).__name__}: "
                               f"{str(error).splitlines()[0] if str(error) else 'unreadable'}") from None


def reevaluate(plan: RunPlan, *, device: torch.device, loader: DatasetLoader) -> list[dict[str, Any]]:
    """Recompute the test and validation rows of every stage from the run's checkpoints (`clbench evaluate`)."""
    stored = read_run_file(plan.run_dir)
    if stored is None:
        results_dir = shlex.quote(str(plan.run_dir.parents[3]))
        raise ClbenchError(f"no run at {plan.run_dir}: train it first with `clbench train "
                           f"{command_argument(plan.spec)} -m {shlex.quote(method_argument(plan.method))} "
                           f"--seeds {plan.seed} --results "
                           f"{results_dir}` (with the same --set options)")
    tasks = build_tasks(plan.spec.data, plan.seed, loader_for(loader, plan.spec), device)
    approach = build_approach(plan, tasks, device)
    header = {**stored, **machine_provenance(str(device), str(torch.__version__), torch.version.cuda),
              "started_utc": utc_now()}
    if not checkpoint_path(plan.run_dir, 0).is_file():
        raise ClbenchError(f"no checkpoint in {plan.run_dir / 'checkpoints'}: train the run first")
    rows = _evaluate_stage(plan, approach, tasks, -1, None, header)  # at initialisation: the seeded network
    for stage in range(len(tasks)):
        if not checkpoint_path(plan.run_dir, stage).is_file():
            break
        approach.load_state(load_checkpoint(plan.run_dir, stage)["approach"])
        rows.extend(_evaluate_stage(plan, approach, tasks, stage, None, header))
    _write_rows(plan, EVALUATION_FILE, rows)
    return rows
