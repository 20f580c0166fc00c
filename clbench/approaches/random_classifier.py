"""Random: a stratified random classifier, the reference A_R of the forgetting ratio.

It predicts labels drawn from the task's training label distribution (seeded); nothing is trained.

Task-aware, a learned task: the task's training label frequencies (the draws of schema-1 results, from the same
generator in the same order). Task-agnostic, every candidate task learned: the pooled training labels of the
candidate tasks (each class by its share of their training samples). A task not learned yet (stage 0, u > t), or
a task-agnostic candidate set with one: uniform chance over the candidate classes. These extra draws come from
a generator of their own, so the task-aware numbers of learned tasks are those clbench stored before.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from clbench.approaches.base import (
    TASK_AGNOSTIC,
    TASK_AWARE,
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
        self.train_sizes: dict[int, int] = {}
        self.guess_generator = context.generator("random-classifier")
        self.extra_generator = context.generator("random-classifier-extra")  # unlearned tasks, task-agnostic

    def build_network(self) -> torch.nn.Module:
        return torch.nn.Identity()  # nothing to learn

    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        start = time.perf_counter()
        self.frequencies[stage] = class_frequencies(tasks[stage].train.labels, tasks[stage].n_classes)
        self.train_sizes[stage] = len(tasks[stage].train)
        return TaskLog(stage, 0, 0, float("nan"), 0.0, time.perf_counter() - start, 0)

    def evaluate(self, data: LabelledData, task: int) -> Evaluation:
        guesses = stratified_guesses(self.frequencies[task], len(data), self.guess_generator)
        accuracy = float((guesses == data.labels.cpu()).double().mean()) if len(data) else 0.0
        return Evaluation(float("nan"), accuracy, len(data))

    def predicts_without_task_id(self) -> bool:
        return True

    def evaluate_task(self, data: LabelledData, task: int, n_candidates: int) -> dict[str, Evaluation]:
        """Both evaluations (see the module docstring); the task-aware one of a learned task is `evaluate`."""
        labels = data.labels.cpu()
        if task in self.frequencies:
            aware = self.evaluate(data, task)
        else:
            aware = self.guessed(labels, uniform(self.context.head_sizes[task]))
        offsets = self.context.class_offsets
        candidates = range(n_candidates)
        if all(u in self.frequencies for u in candidates):
            pooled = torch.cat([self.frequencies[u] * self.train_sizes.get(u, 1) for u in candidates])
            frequencies = pooled / pooled.sum()
        else:
            frequencies = uniform(sum(self.context.head_sizes[u] for u in candidates))
        return {TASK_AWARE: aware, TASK_AGNOSTIC: self.guessed(labels + offsets[task], frequencies)}

    def guessed(self, labels: torch.Tensor, frequencies: torch.Tensor) -> Evaluation:
        """The accuracy of guesses drawn from `frequencies` (the extra generator) against `labels` (CPU)."""
        guesses = stratified_guesses(frequencies, len(labels), self.extra_generator)
        accuracy = float((guesses == labels).double().mean()) if len(labels) else 0.0
        return Evaluation(float("nan"), accuracy, len(labels))

    def extra_state(self) -> dict[str, Any]:
        return {"frequencies": self.frequencies, "train_sizes": self.train_sizes,
                "guess_generator": self.guess_generator.get_state(),
                "extra_generator": self.extra_generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.frequencies = dict(state.get("frequencies", {}))
        self.train_sizes = dict(state.get("train_sizes", {}))
        if "guess_generator" in state:
            self.guess_generator.set_state(state["guess_generator"])
        if "extra_generator" in state:
            self.extra_generator.set_state(state["extra_generator"])


def uniform(n_classes: int) -> torch.Tensor:
    """Equal frequencies over `n_classes` classes (chance)."""
    return torch.full((n_classes,), 1.0 / n_classes, dtype=torch.float64)
