"""`RunLoggers`: what the engine calls while a run trains (`clbench.run.engine`), writing to every chosen logger.

It counts the global step (`clbench.run.loggers.scalars`), asks the approach for its scalars only when something
is logged, and guards each writer: a writer that fails to open or to write is reported once (a warning) and
dropped, and the run goes on. It only reads what it is given, so no stored number depends on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clbench.approaches.datatypes import EpochLog
from clbench.run.loggers.scalars import (
    Record,
    ScalarWriter,
    epoch_scalars,
    stage_end_step,
    stage_scalars,
    stage_steps,
)
from clbench.run.plan import RunPlan

log = logging.getLogger(__name__)

LOG_FOLDER = "logs"  # <run_dir>/logs: the event files, scalars.csv, wandb/
CSV_FILE = "scalars.csv"

ApproachScalars = Callable[[int], Mapping[str, float]]


def open_writer(name: str, plan: RunPlan, first_step: int) -> ScalarWriter:
    """The writer of logger `name` for `plan`'s run folder (its package imported here, not before)."""
    folder = plan.run_dir / LOG_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    if name == "tensorboard":
        from clbench.run.loggers.tensorboard_writer import TensorBoardWriter

        return TensorBoardWriter(folder, first_step)
    if name == "csv":
        from clbench.run.loggers.csv_writer import CsvWriter

        return CsvWriter(folder / CSV_FILE, first_step)
    if name == "wandb":
        from clbench.run.loggers.wandb_writer import WandbWriter

        return WandbWriter(folder, plan.run_id, plan.config)
    raise ValueError(f"unknown logger {name!r}")


def report_failure(name: str, action: str, error: BaseException) -> None:
    """The one warning of a logger that failed."""
    log.warning("--log %s: %s failed (%s: %s); the run goes on without this logger", name, action,
                type(error).__name__, error)


class GuardedWriter:
    """A writer that, once it raises, is reported and closed, and ignores every later call."""

    def __init__(self, name: str, writer: ScalarWriter) -> None:
        self.name = name
        self.writer: ScalarWriter | None = writer

    def write(self, record: Record) -> None:
        if self.writer is None:
            return
        try:
            self.writer.write(record)
        except Exception as error:  # a logger never stops a run
            report_failure(self.name, "writing", error)
            self.close(quietly=True)

    def close(self, quietly: bool = False) -> None:
        writer, self.writer = self.writer, None
        if writer is None:
            return
        try:
            writer.close()
        except Exception as error:
            if not quietly:
                report_failure(self.name, "closing", error)


class RunLoggers:
    """The loggers of one run attempt: epochs and stages in, records at increasing steps out.

    `last_step` is the step of the last stage evaluated (the stored checkpoint's, for a resumed run); the n-th
    epoch of the next stage is at `last_step + n` and its evaluation at `last_step + max(1, epochs)`.
    """

    def __init__(self, writers: Sequence[GuardedWriter], last_step: int,
                 approach_scalars: ApproachScalars | None = None) -> None:
        self.writers = list(writers)
        self.last_step = last_step
        self.epochs = 0  # epochs of the current stage so far
        self.approach_scalars = approach_scalars

    @property
    def active(self) -> bool:
        return any(writer.writer is not None for writer in self.writers)

    def epoch_finished(self, epoch: EpochLog) -> None:
        if not self.active:
            return
        self.epochs += 1
        extra = self._approach_scalars(epoch.stage)
        self._write(Record(self.last_step + self.epochs, epoch.stage + 1, epoch.epoch, epoch_scalars(epoch, extra)))

    def stage_evaluated(self, stage: int, stage_rows: Sequence[Mapping[str, Any]]) -> None:
        """Stage `stage`'s stored rows (1-based; 0: initialisation, at step 0; PathNet evaluates no task there)."""
        if not self.writers:
            return
        epochs = stage_rows[0].get("stage_epochs") if stage_rows else None
        step = 0 if stage == 0 else self.last_step + max(stage_steps(epochs), self.epochs)
        self.last_step, self.epochs = step, 0
        if self.active:
            self._write(Record(step, stage, None, stage_scalars(stage_rows)))

    def close(self) -> None:
        for writer in self.writers:
            writer.close()

    def _approach_scalars(self, stage: int) -> Mapping[str, float]:
        if self.approach_scalars is None:
            return {}
        try:
            return self.approach_scalars(stage)
        except Exception as error:  # the approach's hook failing is reported like a logger failing, once
            report_failure("approach scalars", "Approach.log_scalars", error)
            self.approach_scalars = None
            return {}

    def _write(self, record: Record) -> None:
        for writer in self.writers:
            writer.write(record)


def open_run_loggers(plan: RunPlan, names: Sequence[str], first_stage: int, rows: Sequence[Mapping[str, Any]],
                     approach_scalars: ApproachScalars | None = None) -> RunLoggers:
    """The loggers `names` of a run that trains from stage `first_stage` (0-based; 0: a new run, which logs its
    initialisation at step 0), after the stored `rows` of the stages before; a logger that cannot be opened is
    reported once and left out."""
    last_step = stage_end_step(rows, first_stage) if first_stage else 0
    first_step = last_step + 1 if first_stage else 0
    writers = []
    for name in names:
        try:
            writers.append(GuardedWriter(name, open_writer(name, plan, first_step)))
        except Exception as error:  # e.g. W&B's init timing out: the run goes on without it
            report_failure(name, "opening", error)
    return RunLoggers(writers, last_step, approach_scalars)
