"""How the epochs of a task run: the paper's lr schedule with early stopping (`PlateauSchedule`), or a fixed number
of epochs at one lr (`FixedEpochs`: `training.early_stopping: false`, the online protocol with `max_epochs: 1`).

Both are small state machines on the epochs' validation losses, with one interface (`TaskSchedule`) that
`Approach.learn_task`'s one loop reads: the lr of the next epoch, whether to stop, whether an epoch improved (the
loop then snapshots the weights) and whether the best snapshot is restored at the end of the task."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from clbench.spec import TrainingSpec


class TaskSchedule(Protocol):
    """What the loop reads from a task's schedule after each epoch's validation loss."""

    restores_best: ClassVar[bool]  # snapshot the weights at an improvement, restore the best after the task
    lr: float  # the lr of the next epoch
    stopped: bool  # no more epochs
    best_loss: float  # the task log's validation loss

    def step(self, valid_loss: float) -> tuple[bool, bool]:
        """Record one epoch's validation loss; returns (improved, lr_changed)."""
        ...


class PlateauSchedule:
    """The paper's lr schedule and early stopping (Experiments: Training), on validation losses: an improvement
    resets the patience; otherwise the patience drops and, at zero, the lr is divided by `lr_factor`, training
    stops if lr < `lr_min`, else the patience resets. The best epoch's weights are restored."""

    restores_best: ClassVar[bool] = True

    def __init__(self, training: TrainingSpec, lr: float | None = None) -> None:
        self.training = training
        self.lr = training.lr if lr is None else lr
        self.patience = training.patience
        self.best_loss = float("inf")
        self.stopped = False

    def step(self, valid_loss: float) -> tuple[bool, bool]:
        """Record one epoch's validation loss; returns (improved, lr_changed). Sets `stopped` when done."""
        if valid_loss < self.best_loss:
            self.best_loss = valid_loss
            self.patience = self.training.patience
            return True, False
        self.patience -= 1
        if self.patience > 0:
            return False, False
        self.lr /= self.training.lr_factor
        if self.lr < self.training.lr_min:
            self.stopped = True
            return False, False
        self.patience = self.training.patience
        return False, True

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "patience": self.patience, "best_loss": self.best_loss, "stopped": self.stopped}


class FixedEpochs:
    """Exactly `max_epochs` epochs at the protocol's lr, the last weights kept (`training.early_stopping: false`;
    with `max_epochs: 1` the online protocol's single pass). The validation loss, when there is a validation split,
    is only logged; the task log's is the last epoch's."""

    restores_best: ClassVar[bool] = False

    def __init__(self, training: TrainingSpec) -> None:
        self.lr = training.lr
        self.best_loss = float("nan")
        self.stopped = False

    def step(self, valid_loss: float) -> tuple[bool, bool]:
        """Record one epoch's validation loss (never an improvement, never a new lr)."""
        self.best_loss = valid_loss
        return False, False
