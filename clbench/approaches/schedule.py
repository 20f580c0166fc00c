"""The paper's lr schedule and early stopping (Experiments: Training), as a small state machine on validation
losses: an improvement resets the patience; otherwise the patience drops and, at zero, the lr is divided by
`lr_factor`, training stops if lr < `lr_min`, else the patience resets."""

from __future__ import annotations

from typing import Any

from clbench.spec import TrainingSpec


class PlateauSchedule:
    """The paper's lr schedule and early stopping as a small state machine on validation losses."""

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
