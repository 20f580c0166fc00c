"""Stopping a run the way a crash would, and comparing its numbers with an uninterrupted run's."""

from __future__ import annotations

import math

from clbench.run.engine import SilentObserver


class Stop(Exception):
    """Raised by `StopInTask2` to stop a run the way a crash would."""


class StopInTask2(SilentObserver):
    """Stops a run after its 2nd epoch of task 2 (or, for approaches without epochs, after task 2)."""

    def epoch_finished(self, plan, epoch) -> None:  # type: ignore[no-untyped-def]
        if epoch.stage == 1 and epoch.epoch == 2:
            raise Stop

    def task_finished(self, plan, stage, accuracies) -> None:  # type: ignore[no-untyped-def]
        if stage == 1:
            raise Stop


def same_numbers(first: list[dict], second: list[dict]) -> bool:
    """Every row's (stage, task, evaluation, split, accuracy, loss) equal, NaN losses (the random classifier)
    included."""
    def key(row: dict) -> tuple:
        loss = row["loss"]
        return (row["stage"], row["task"], row.get("evaluation"), row.get("split"), row["accuracy"],
                "nan" if math.isnan(loss) else loss)

    return len(first) == len(second) and [key(r) for r in first] == [key(r) for r in second]
