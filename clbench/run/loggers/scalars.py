"""What the loggers write: the tags and values of an epoch and of a stage, at a global step.

Steps: 0 is the network at initialisation; each epoch is one step, counted across tasks; a stage's evaluation is
at the step of its last epoch. A stage takes max(1, its epochs) steps (a stage without epochs, as the random
classifier's, still gets a step of its own), so the step after a checkpoint follows from the stored rows alone
(`stage_end_step`) and a resumed run continues the count of the uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clbench.approaches.datatypes import EpochLog
from clbench.results import TEST, row_split


@dataclass(frozen=True)
class Record:
    """Scalars at one step: of an epoch (`epoch` 1-based within the stage) or of a stage's evaluation (`epoch`
    None); `stage` is the task trained, 1-based (0: at initialisation), as in the stored rows."""

    step: int
    stage: int
    epoch: int | None
    scalars: dict[str, float]


class ScalarWriter(Protocol):
    """One logger's output (TensorBoard, CSV, W&B): records in increasing steps, then `close`."""

    def write(self, record: Record) -> None: ...
    def close(self) -> None: ...


def epoch_scalars(epoch: EpochLog, approach_scalars: Mapping[str, float]) -> dict[str, float]:
    """The tags of one epoch (`stage` of the EpochLog 0-based; tags 1-based): the training loss and lr, the task
    trained, the validation loss and accuracy (also tagged with the task), then `approach/<name>` per scalar."""
    task = epoch.stage + 1
    scalars = {"train/loss": epoch.train_loss, "train/lr": epoch.lr, "train/task": float(task),
               "valid/loss": epoch.valid_loss, "valid/accuracy": epoch.valid_accuracy,
               f"valid/accuracy/task{task}": epoch.valid_accuracy}
    scalars.update({f"approach/{name}": float(value) for name, value in approach_scalars.items()})
    return scalars


def stage_scalars(stage_rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The tags of one stage's evaluation from its stored rows (test split): `accuracy/<evaluation>/task<u>` for
    every task evaluated, and `accuracy/<evaluation>/mean` over the tasks learned so far (u <= t; none at stage 0)."""
    scalars: dict[str, float] = {}
    learned: dict[str, list[float]] = {}
    for row in stage_rows:
        if row_split(row) != TEST:
            continue
        evaluation = row["evaluation"]
        scalars[f"accuracy/{evaluation}/task{row['task']}"] = float(row["accuracy"])
        if row["task"] <= row["stage"]:
            learned.setdefault(evaluation, []).append(float(row["accuracy"]))
    for evaluation, values in learned.items():
        scalars[f"accuracy/{evaluation}/mean"] = math.fsum(values) / len(values)
    return scalars


def stage_steps(epochs: int | None) -> int:
    """The steps a stage of `epochs` epochs takes: max(1, epochs)."""
    return max(1, int(epochs or 0))


def stage_end_step(rows: Sequence[Mapping[str, Any]], stages: int) -> int:
    """The step of stage `stages`'s evaluation (1-based; 0: initialisation) from the stored rows of stages
    1..stages (`stage_epochs`, the same in every row of a stage)."""
    epochs = {row["stage"]: row.get("stage_epochs") for row in rows if 1 <= row["stage"] <= stages}
    return sum(stage_steps(epochs.get(stage)) for stage in range(1, stages + 1))

