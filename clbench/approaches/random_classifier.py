"""Random: a stratified random classifier, the reference A_R of the forgetting ratio.

It predicts labels drawn from the task's training label distribution (seeded); nothing is trained.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from clbench.approaches.base import (
    Approach,
    ApproachContext,
    Evaluation,
    Hyperparameters,
    ProgressCallback,
    TaskLog,
)
from clbench.data.tasks import LabelledData, TaskSequence


def class_frequencies(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Relative frequency of each class in `labels`: (n_classes,), sums to 1."""
    counts = torch.bincount(labels.cpu(), minlength=n_classes).double()
    return counts / counts.sum()


def stratified_guesses(frequencies: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """`n` labels drawn independently from `frequencies` (the stratified random classifier)."""
    return torch.multinomial(frequencies, n, replacement=True, generator=generator)


class RandomClassifier(Approach):
    """Predicts each test sample's label at random with the training set's class frequencies."""

    name = "random"
    summary = "stratified random classifier: the reference A_R"
    is_reference = True

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.frequencies: dict[int, torch.Tensor] = {}
        self.guess_generator = context.generator("random-classifier")

    def build_network(self) -> torch.nn.Module:
        return torch.nn.Identity()  # nothing to learn

    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        start = time.perf_counter()
        self.frequencies[stage] = class_frequencies(tasks[stage].train.labels, tasks[stage].n_classes)
        return TaskLog(stage, 0, 0, float("nan"), 0.0, time.perf_counter() - start, 0)

    def evaluate(self, data: LabelledData, task: int) -> Evaluation:
        guesses = stratified_guesses(self.frequencies[task], len(data), self.guess_generator)
        accuracy = float((guesses == data.labels.cpu()).double().mean()) if len(data) else 0.0
        return Evaluation(float("nan"), accuracy, len(data))

    def extra_state(self) -> dict[str, Any]:
        return {"frequencies": self.frequencies, "guess_generator": self.guess_generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.frequencies = dict(state.get("frequencies", {}))
        if "guess_generator" in state:
            self.guess_generator.set_state(state["guess_generator"])
