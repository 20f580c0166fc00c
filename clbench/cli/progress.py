"""Rich progress display for training: run, task, epoch, loss, validation accuracy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from clbench.approaches.base import EpochLog
    from clbench.engine import RunPlan


class RichObserver:
    """Shows one bar over all runs and one over the tasks of the current run, with the last epoch's numbers."""

    def __init__(self, console: Console, n_runs: int) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console, transient=False,
        )
        self.runs = self.progress.add_task("runs", total=n_runs, status="")
        self.tasks = self.progress.add_task("tasks", total=1, status="", visible=False)
        self.task_names: Sequence[str] = ()

    def __enter__(self) -> RichObserver:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def run_done(self) -> None:
        self.progress.advance(self.runs)

    def run_started(self, plan: RunPlan, task_names: Sequence[str]) -> None:
        self.task_names = task_names
        self.progress.update(self.runs, status=f"{plan.spec.name} {plan.method} seed {plan.seed}")
        self.progress.reset(self.tasks, total=len(task_names), visible=True, status="",
                            description=f"  {plan.method} s{plan.seed} tasks")

    def task_started(self, plan: RunPlan, stage: int) -> None:
        self.progress.update(self.tasks, status=f"task {stage + 1} {self.task_names[stage]}")

    def epoch_finished(self, plan: RunPlan, epoch: EpochLog) -> None:
        mark = "*" if epoch.improved else " "
        self.progress.update(self.tasks, status=(
            f"task {epoch.stage + 1} {self.task_names[epoch.stage]} | epoch {epoch.epoch:3d} lr {epoch.lr:.2g} "
            f"loss {epoch.train_loss:.3f} valid {epoch.valid_loss:.3f}{mark} acc {100 * epoch.valid_accuracy:.1f}%"))

    def task_finished(self, plan: RunPlan, stage: int, accuracies: Sequence[float]) -> None:
        self.progress.advance(self.tasks)
        mean = 100 * sum(accuracies) / len(accuracies)
        self.progress.console.log(f"{plan.spec.name} {plan.method} seed {plan.seed}: after task {stage + 1} "
                                  f"({self.task_names[stage]}) mean test accuracy {mean:.1f}% "
                                  f"[{' '.join(f'{100 * a:.1f}' for a in accuracies)}]")
