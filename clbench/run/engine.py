"""The sequential protocol: for each task t, train (early stopping), evaluate every task (on its test set and on
its validation split), checkpoint.

`execute` runs one `RunPlan` (made by `clbench.run.plan.plan_runs`). Progress goes to an observer (the CLI draws
it with rich); the library itself prints nothing. Training logs (`clbench train --log`: TensorBoard, CSV, W&B) are
written beside the run by `clbench.run.loggers`, in the process that runs it.

Nothing is lost: the checkpoint after every task (`clbench.run.checkpoints`) holds the approach state, every
random stream (torch's global generator, CUDA's, the batch order and the approach's own generators in
`extra_state`) and the rows so far, so `execute` on an unfinished run continues after its last finished task and
gives the same numbers as an uninterrupted run. A run holds `<run_dir>/.lock` while it executes; a run locked by
another process is left alone (status `locked`).
"""

from __future__ import annotations

import logging
import math
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, EpochLog
from clbench.approaches.flops import stage_columns
from clbench.approaches.plugins import code_text
from clbench.approaches.registry import code_identity, origin_of
from clbench.data.batches import TaskSequence
from clbench.data.tasks import DatasetLoader
from clbench.errors import ClbenchError
from clbench.nets import parameter_count
from clbench.results import (
    ACCURACY_FILE,
    CURVE_FILE,
    EVALUATION_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    RunStatus,
    machine_provenance,
    utc_now,
)
from clbench.run.checkpoints import remake_monitoring, resume_from_checkpoint, save_checkpoint, upgraded_rows
from clbench.run.curve import CurveRecorder, curve_recorder, write_curve
from clbench.run.interrupts import interrupts_held
from clbench.run.locking import held_lock, lock_holder
from clbench.run.loggers.run_loggers import RunLoggers, open_run_loggers
from clbench.run.plan import RunPlan
from clbench.run.rows import (
    encoded_rows,
    evaluate_stage_rows,
    learned_accuracies,
    shown_evaluation,
    store_monitoring,
)
from clbench.run.shared_tasks import SharedTasks
from clbench.run_files import (
    CHECKPOINT_FOLDER,
    TRAIN_KINDS,
    damaged_files,
    forget_run_file,
    is_complete,
    previous_run_json,
    record_again,
    write_run_file,
    write_run_json,
)
from clbench.seeding import seed_global_torch

log = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    """What happened to one plan: `done`, `skipped` (already finished), `locked` (running elsewhere),
    `failed` or `interrupted`, with its rows (done) or the error (failed, locked: who holds the lock)."""

    plan: RunPlan
    status: RunStatus
    rows: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    resumed_after_stage: int | None = None  # 1-based stage of the checkpoint a resumed run continued from
    damaged: tuple[str, ...] = ()  # damaged files of the run found and left behind (named; the run re-ran them)

    @property
    def succeeded(self) -> bool:
        """Done, already finished, or left to the process that is running it."""
        return self.status in (RunStatus.DONE, RunStatus.SKIPPED, RunStatus.LOCKED)


class RunObserver(Protocol):
    """Receives a run's progress events (the CLI shows them; tests may record them; a worker forwards them,
    `clbench.run.scheduler.ForwardingObserver`). Each event's arguments after `plan` are what a worker sends
    back. A class that derives from this one ignores the events it does not override."""

    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None:
        """The run's tasks are ready and its first stage is about to train."""
        return None

    def run_resumed(self, plan: RunPlan, stage: int) -> None:
        """The run continues after its checkpoint of task `stage` (0-based)."""
        return None

    def task_started(self, plan: RunPlan, stage: int) -> None:
        """Task `stage` (0-based) starts training."""
        return None

    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None:
        """One training epoch ended (`EpochLog`: losses, accuracy, learning rate, time)."""
        return None

    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None:
        """Task `stage` is trained and evaluated: the test accuracies of the tasks learned so far."""
        return None


class SilentObserver(RunObserver):
    """An observer that ignores every event (what `execute` uses without one)."""


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


def build_approach(plan: RunPlan, tasks: TaskSequence, device: torch.device) -> Approach:
    """Seed the run (the one explicit global seeding) and build its approach and network."""
    seed_global_torch(plan.seed)
    context = ApproachContext(plan.spec.network, plan.approach.training, tasks.input_shape, tasks.head_sizes,
                              device, plan.seed, plan.spec.data.scenario, plan.spec.data.augment)
    return plan.approach.cls(context, plan.approach.hyperparameters)


def execute(plan: RunPlan, *, device: torch.device, loader: DatasetLoader, force: bool = False,
            observer: RunObserver | None = None, loggers: Sequence[str] = (),
            shared: SharedTasks | None = None) -> RunOutcome:
    """Run one plan end to end: skip it if it finished (unless `force`), leave it if another process holds its
    lock, resume it after its last checkpoint if an earlier attempt stopped. Errors propagate (after run.json
    records them as `failed` or, for KeyboardInterrupt, `interrupted`). `loggers`: the training logs to write
    (`clbench.run.loggers`: tensorboard, csv, wandb). `shared`: the task sequence kept from the last run in this
    process (`SharedTasks`), used when this run's data is the same, else replaced by this run's."""
    observer = observer or SilentObserver()
    with held_lock(plan.run_dir) as locked:
        if not locked:
            return RunOutcome(plan, RunStatus.LOCKED, error=f"running elsewhere ({lock_holder(plan.run_dir)})")
        if is_complete(plan.run_dir) and not force:
            return RunOutcome(plan, RunStatus.SKIPPED)
        check_code(plan, force)
        if force:
            discard_progress(plan.run_dir)
        return _execute_locked(plan, device, loader, observer, loggers, shared)


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
    stored = previous_run_json(plan.run_dir)
    config = stored.get("config")
    started = config.get("code") if isinstance(config, dict) else None
    if config is not None and started != planned:
        raise ClbenchError(f"{plan.run_dir} holds an unfinished run of {plan.method} started by other code "
                           f"({code_text(started)}) than now ({code_text(planned)}); resuming it would mix two codes "
                           f"in one run: restore that code to resume it, or start it over with --force")


def discard_progress(run_dir: Path) -> None:
    """Forget a run's accuracies, evaluations, curve and checkpoints (`--force`), so no stale stage is resumed."""
    for name in (ACCURACY_FILE, EVALUATION_FILE, CURVE_FILE):
        forget_run_file(run_dir / name)
    for path in (run_dir / CHECKPOINT_FOLDER).glob("stage-*.pt"):
        forget_run_file(path)


def remove_stale_temporaries(run_dir: Path) -> None:
    """Delete temporary files a killed writer left behind (only called while holding the run's lock)."""
    for folder in (run_dir, run_dir / "checkpoints"):
        for path in folder.glob(".*.tmp"):
            path.unlink(missing_ok=True)


def _execute_locked(plan: RunPlan, device: torch.device, loader: DatasetLoader, observer: RunObserver,
                    loggers: Sequence[str] = (), shared: SharedTasks | None = None) -> RunOutcome:
    start = time.perf_counter()
    remove_stale_temporaries(plan.run_dir)
    damaged = damaged_files(plan.run_dir, TRAIN_KINDS, thorough=False)
    for problem in damaged:
        log.warning("%s; the run is treated as unfinished", problem)
    record_again(plan.run_dir)  # a damaged manifest: made again from the files that pass their form's check
    header = _run_header(plan, machine_provenance(str(device), str(torch.__version__), torch.version.cuda))
    header["damaged_files"] = damaged
    try:
        write_run_json(plan.run_dir / RUN_FILE, {**header, "status": RunStatus.RUNNING})
        rows = _run_sequence(plan, device, loader, observer, header, loggers, shared)
        finished, encoded = encoded_rows(plan, rows)
    except BaseException as error:
        if shared is not None:  # its caches may be half filled: the next run builds its own
            shared.forget()
        status = RunStatus.INTERRUPTED if isinstance(error, KeyboardInterrupt) else RunStatus.FAILED
        write_run_json(plan.run_dir / RUN_FILE, {**header, "status": status, "finished_utc": utc_now(),
                                                 "error": f"{type(error).__name__}: {error}",
                                                 "traceback": traceback.format_exc()})
        raise
    seconds = time.perf_counter() - start
    with interrupts_held():  # the rows and `complete` land together; a Ctrl-C meanwhile takes effect after both
        write_run_file(plan.run_dir / ACCURACY_FILE, encoded)
        write_run_json(plan.run_dir / RUN_FILE, {**header, "status": RunStatus.COMPLETE,
                                                 "finished_utc": finished, "seconds": seconds})
    return RunOutcome(plan, RunStatus.DONE, rows, seconds=seconds, resumed_after_stage=header["resumed_after_stage"],
                      damaged=tuple(header["damaged_files"]))


def _run_header(plan: RunPlan, provenance: dict[str, Any]) -> dict[str, Any]:
    previous = previous_run_json(plan.run_dir)
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
                  header: dict[str, Any], loggers: Sequence[str] = (),
                  shared: SharedTasks | None = None) -> list[dict[str, Any]]:
    """Train and evaluate the stages after the last checkpoint (all of them for a new run, after the stage-0
    evaluation of the network at initialisation); the training logs go to `loggers` as they come."""
    tasks = (shared or SharedTasks()).tasks_for(plan, loader, device)
    approach = build_approach(plan, tasks, device)
    header.update(parameters=parameter_count(approach.network), task_agnostic=approach.predicts_without_task_id())
    recorder = curve_recorder(plan, approach, tasks)
    first_stage, rows = resume_from_checkpoint(plan.run_dir, approach, len(tasks), header["damaged_files"],
                                               upgrade=lambda stage, old: upgraded_rows(plan, approach, tasks, stage,
                                                                                        old, header),
                                               curve=None if recorder is None else recorder.load_state)
    if first_stage and damaged_files(plan.run_dir, ("monitoring",)):  # its rows of the stages kept: from checkpoints
        remake_monitoring(plan, approach, tasks, first_stage, header)
    run_log = open_run_loggers(plan, loggers, first_stage, rows, approach.log_scalars)
    try:
        if first_stage == 0:
            rows = evaluate_stage_rows(plan, approach, tasks, -1, None, header)
            run_log.stage_evaluated(0, rows)
        header.update(resumed_after_stage=first_stage or None)
        write_run_json(plan.run_dir / RUN_FILE, {**header, "status": RunStatus.RUNNING})
        observer.run_started(plan, tasks.names)
        if first_stage:
            observer.run_resumed(plan, first_stage - 1)
        for stage in range(first_stage, len(tasks)):
            stage_rows = _train_stage(plan, approach, tasks, stage, observer, run_log, header, recorder)
            rows.extend(stage_rows)
            save_checkpoint(plan.run_dir, stage, approach, rows, None if recorder is None else recorder.state())
            if recorder is not None:
                write_curve(plan.run_dir, plan.run_id, recorder.rows)
            observer.task_finished(plan, stage, learned_accuracies(stage_rows, shown_evaluation(plan)))
        if recorder is not None and first_stage == len(tasks):  # stopped after its last checkpoint: written again
            write_curve(plan.run_dir, plan.run_id, recorder.rows)
    finally:
        run_log.close()
    return rows


def _train_stage(plan: RunPlan, approach: Approach, tasks: TaskSequence, stage: int, observer: RunObserver,
                 run_log: RunLoggers, header: dict[str, Any],
                 recorder: CurveRecorder | None = None) -> list[dict[str, Any]]:
    """Train task `stage`, evaluate every task, store the monitoring tables: the stage's rows. Each epoch goes to
    the loggers, then to the observer; the stage's evaluation to the loggers before its checkpoint is written (a
    run stopped in between logs it again when it resumes, after the loggers dropped it)."""

    warned: list[int] = []  # the epoch of this task's first non-finite training loss, once warned of

    def epoch_finished(epoch: EpochLog) -> None:
        if not math.isfinite(epoch.train_loss) and not warned:
            warned.append(epoch.epoch)
            log.warning("%s: the training loss of task %d is %s after epoch %d: the network diverged; lower the "
                        "lr (--set training.lr=...). Early stopping ends the task on its best validation weights; "
                        "otherwise the run's accuracies from here on are a broken network's, and `clbench report` "
                        "names the run", plan.run_id, stage + 1, epoch.train_loss, epoch.epoch)
        run_log.epoch_finished(epoch)
        observer.epoch_finished(plan, epoch)

    observer.task_started(plan, stage)
    approach.flops.new_stage()
    with approach.flops.counted() as train:  # everything the stage's training does (`clbench.approaches.flops`)
        task_log = approach.learn_task(stage, tasks, epoch_finished)
    task_log = replace(task_log, compute=stage_columns(approach.flops, train, approach.training_protocol.realtime))
    if recorder is not None:
        recorder.end_task(stage, task_log.epochs)
    stage_rows = evaluate_stage_rows(plan, approach, tasks, stage, task_log, header)
    store_monitoring(plan, approach, tasks, stage, header)
    run_log.stage_evaluated(stage + 1, stage_rows)
    return stage_rows
