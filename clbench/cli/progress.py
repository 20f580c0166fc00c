"""The live overview of `clbench train`: all runs (done, running, failed, ETA) and a line per running run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:
    from clbench.approaches.datatypes import EpochLog
    from clbench.run.engine import RunOutcome
    from clbench.run.plan import RunPlan

LEVELS = {"locked": "WARNING", "failed": "ERROR", "interrupted": "ERROR"}  # an ended run's log level (else INFO)
STATUS_STYLE = {"done": "green", "skipped": "yellow", "locked": "yellow", "failed": "red", "interrupted": "red"}


def run_label(plan: RunPlan) -> str:
    return f"{plan.spec.name} {plan.method} seed {plan.seed}"


class RunsOverview:
    """A `ScheduleListener` drawn with rich: one bar over the runs to execute, one per running run.

    The top bar counts finished runs (ETA from their pace); runs that were already finished or are running
    in another process do not count towards it. Every ended run gets one log line.
    """

    def __init__(self, console: Console, n_runs: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
            console=console, transient=False,
        )
        self.counts = {status: 0 for status in STATUS_STYLE}
        self.overall = self.progress.add_task("runs", total=n_runs, status="")
        self.lines: dict[str, TaskID] = {}
        self.task_names: dict[str, Sequence[str]] = {}

    def __enter__(self) -> RunsOverview:
        self.progress.__enter__()
        self._update_counts()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ schedule events
    def run_launched(self, plan: RunPlan, device: str) -> None:
        self.lines[plan.run_id] = self.progress.add_task(f"  {plan.method} s{plan.seed} [{device}]", total=None,
                                                         status="starting")
        self._update_counts()

    def run_ended(self, outcome: RunOutcome) -> None:
        line = self.lines.pop(outcome.plan.run_id, None)
        if line is not None:
            self.progress.remove_task(line)
        self.counts[outcome.status] = self.counts.get(outcome.status, 0) + 1
        if outcome.status in ("skipped", "locked"):
            total = self.progress.tasks[self.overall].total or 1
            self.progress.update(self.overall, total=max(0, total - 1))
        else:
            self.progress.advance(self.overall)
        self._update_counts()
        self.log(self._ended_message(outcome), LEVELS.get(outcome.status, "INFO"))

    # ------------------------------------------------------------------ engine events of one run
    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None:
        self.task_names[plan.run_id] = task_names
        self._update_line(plan, total=len(task_names), status="task 1")

    def run_resumed(self, plan: RunPlan, stage: int) -> None:
        self._update_line(plan, completed=stage + 1, status=f"resumed after task {stage + 1}")

    def task_started(self, plan: RunPlan, stage: int) -> None:
        self._update_line(plan, status=f"task {stage + 1} {self._task_name(plan, stage)}")

    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None:
        mark = "*" if epoch.improved else " "
        self._update_line(plan, status=(
            f"task {epoch.stage + 1} {self._task_name(plan, epoch.stage)} | epoch {epoch.epoch:3d} lr {epoch.lr:.2g} "
            f"loss {epoch.train_loss:.3f} valid {epoch.valid_loss:.3f}{mark} acc {100 * epoch.valid_accuracy:.1f}%"))

    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None:
        line = self.lines.get(plan.run_id)
        if line is not None:
            self.progress.advance(line)
        self.log(f"{escape(run_label(plan))}: after task {stage + 1} "
                 f"({escape(self._task_name(plan, stage))}) {stage_line(plan, accuracies)}")

    # ------------------------------------------------------------------ helpers
    def log(self, message: str, level: str = "INFO") -> None:
        """One log line (rich markup): on a terminal, rich's (time column, no source path); elsewhere (a pipe, a
        file, a cluster's log) a plain `LEVEL message` line, never wrapped, so that each event is one line."""
        console = self.progress.console
        if console.is_terminal:
            console.log(message)
        else:
            console.print(f"{level} {message}", soft_wrap=True, highlight=False)

    def _task_name(self, plan: RunPlan, stage: int) -> str:
        names = self.task_names.get(plan.run_id, ())
        return names[stage] if stage < len(names) else ""

    def _update_line(self, plan: RunPlan, **fields: object) -> None:
        line = self.lines.get(plan.run_id)
        if line is not None:
            self.progress.update(line, **fields)  # type: ignore[arg-type]

    def _update_counts(self) -> None:
        running = len(self.lines)
        parts = [f"done {self.counts['done']}", f"running {running}", f"failed {self.counts['failed']}"]
        parts += [f"{status} {self.counts[status]}" for status in ("skipped", "locked", "interrupted")
                  if self.counts[status]]
        self.progress.update(self.overall, status=" | ".join(parts))

    @staticmethod
    def _ended_message(outcome: RunOutcome) -> str:
        plan, style = outcome.plan, STATUS_STYLE.get(outcome.status, "white")
        label = escape(run_label(plan))
        if outcome.status == "done":
            means = final_means(outcome.rows)
            resumed = f", resumed after task {outcome.resumed_after_stage}" if outcome.resumed_after_stage else ""
            damaged = f"; damaged, so re-made: {escape('; '.join(outcome.damaged))}" if outcome.damaged else ""
            shown = ", ".join(f"{100 * mean:.1f}% {evaluation}" for evaluation, mean in means.items())
            return (f"[{style}]done[/] {label}: mean accuracy {shown} "
                    f"({outcome.seconds:.0f} s{resumed}{damaged})")
        if outcome.status == "skipped":
            damaged = (f"; {escape('; '.join(outcome.damaged))}: `clbench evaluate` (with the same options) remakes "
                       f"it") if outcome.damaged else ""
            return (f"[{style}]skipped[/] {label}: already finished ({escape(str(plan.run_dir))}); --force re-runs "
                    f"it{damaged}")
        if outcome.status == "locked":
            return f"[{style}]running elsewhere[/] {label}: {escape(outcome.error or '')}; skipped here"
        return (f"[{style}]{outcome.status}[/] {label}: {escape(outcome.error or '')} "
                f"(details in {escape(str(plan.run_dir / 'run.json'))})")


def stage_line(plan: RunPlan, accuracies: Sequence[float]) -> str:
    """`mean test accuracy 93.9% task-aware [98.1 89.7]`: A^{<=t} over the tasks learned so far in the evaluation
    the run's scenario reports (`shown_evaluation`), as `evaluate` and `report --metric accuracy` show it."""
    from clbench.run.rows import shown_evaluation

    evaluation = shown_evaluation(plan)
    if not accuracies:
        return f"no {evaluation} test accuracy (the approach stores none)"
    mean = 100 * sum(accuracies) / len(accuracies)
    return f"mean test accuracy {mean:.1f}% {evaluation} [{' '.join(f'{100 * a:.1f}' for a in accuracies)}]"


def final_means(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The mean test accuracy over every task after the last stage, per evaluation (task-aware first)."""
    from clbench.results import TEST, row_split

    last = max((row["stage"] for row in rows), default=0)
    by_evaluation: dict[str, list[float]] = {}
    for row in rows:
        if row["stage"] == last and row_split(row) == TEST:
            by_evaluation.setdefault(row.get("evaluation", "task-aware"), []).append(row["accuracy"])
    return {name: sum(values) / len(values) for name, values in sorted(by_evaluation.items(), reverse=True)}


class EvaluationProgress:
    """`clbench evaluate`'s progress over the runs it re-evaluates, drawn as `train`'s: on a terminal a rich bar
    (runs done of all, elapsed, ETA) that disappears once the table is printed; elsewhere (a pipe, a file, a
    cluster's log) one plain `INFO` line per run evaluated, as `RunsOverview.log` writes them.

    It writes to the console it is given (`evaluate` gives stderr, so that stdout holds the table alone).
    """

    def __init__(self, console: Console, n_runs: int) -> None:
        self.console = console
        self.n_runs = n_runs
        self.done = 0
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console,
                                 transient=True, disable=not console.is_terminal)
        self.overall = self.progress.add_task("evaluating", total=n_runs)

    def __enter__(self) -> EvaluationProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def run_evaluated(self, plan: RunPlan) -> None:
        """One run's checkpoints evaluated: advance the bar, or print its line."""
        self.done += 1
        if self.console.is_terminal:
            self.progress.advance(self.overall)
        else:
            self.console.print(f"INFO evaluated {run_label(plan)} ({self.done}/{self.n_runs})", soft_wrap=True,
                               highlight=False, markup=False)
