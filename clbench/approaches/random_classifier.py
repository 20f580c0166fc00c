"""Random: a stratified random classifier, the reference A_R of the forgetting ratio.

It predicts labels drawn from the task's training label distribution (seeded); nothing is trained.

Task-aware, a learned task: the task's training label frequencies. Task-agnostic, every candidate task learned:
the pooled training labels of the candidate tasks (each class by its share of their training samples). A task not
learned yet (stage 0, u > t), or a task-agnostic candidate set with one: uniform chance over the candidate classes.
In the domain scenario (no task id; class c of every task is one shared output c) there is one evaluation, stored as
task-aware: the pooled training labels of the candidate tasks, class by class over the C shared classes (uniform
over them while a candidate is not learned), drawn with the task-aware cell's generator.

The guesses of one cell (stage, task, evaluation) come from a generator seeded afresh for that cell from the run
seed (`clbench.seeding`, purpose `random-classifier/stage-<t>/task-<u>/<evaluation>`, numbered as the stored rows):
they do not depend on how many evaluations came before, so `train`, a resumed run and `clbench evaluate` give the
same rows, and a checkpoint keeps no generator state.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import (
    TASK_AGNOSTIC,
    TASK_AWARE,
    ApproachContext,
    Evaluation,
    Hyperparameters,
    ProgressCallback,
    TaskLog,
)
from clbench.data.batches import LabelledData, TaskSequence
from clbench.spec import DataSpec, TrainingSpec


def class_frequencies(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Relative frequency of each class in `labels`: (n_classes,), sums to 1."""
    counts = torch.bincount(labels.cpu(), minlength=n_classes).double()
    return counts / counts.sum()


def stratified_guesses(frequencies: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """`n` labels drawn independently from `frequencies` (the stratified random classifier)."""
    return torch.multinomial(frequencies, n, replacement=True, generator=generator)


class RandomClassifier(Approach):
    """Predicts each test sample's label at random with the training set's class frequencies.

    The HAT authors' code for this reference: joansj/hat@6fd0b9d `src/approaches/random.py`.
    """

    name = "random"
    summary = "stratified random classifier: the reference A_R"
    is_reference = True
    # 1: each (stage, task, evaluation) draws from its own generator seeded from the run seed (before: two
    # generators drawn on from run to stage, which `clbench evaluate` could not reproduce)
    revision = 1

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.frequencies: dict[int, torch.Tensor] = {}
        self.train_sizes: dict[int, int] = {}

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        return None  # trains nothing: any protocol, with or without a validation split

    def build_network(self) -> torch.nn.Module:
        return torch.nn.Identity()  # nothing to learn

    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        start = time.perf_counter()
        self.frequencies[stage] = class_frequencies(tasks[stage].train.labels, tasks[stage].n_classes)
        self.train_sizes[stage] = len(tasks[stage].train)
        return TaskLog(stage, 0, 0, float("nan"), 0.0, time.perf_counter() - start, 0)

    def evaluate(self, data: LabelledData, task: int) -> Evaluation:
        """The task-aware evaluation: the task's training frequencies if learned, else chance over its head."""
        frequencies = self.frequencies.get(task)
        if frequencies is None:
            frequencies = uniform(self.context.head_sizes[task])
        return self.guessed(data.labels.cpu(), frequencies, self.cell_generator(task, TASK_AWARE))

    def predicts_without_task_id(self) -> bool:
        return True

    def evaluate_task(self, data: LabelledData, task: int, n_candidates: int) -> dict[str, Evaluation]:
        """Both evaluations (see the module docstring); the task-aware one is `evaluate`."""
        if self.domain_scenario:
            return {TASK_AWARE: self.domain_guess(data, task, n_candidates)}
        labels = data.labels.cpu()
        aware = self.evaluate(data, task)
        offsets = self.context.class_offsets
        candidates = range(n_candidates)
        if all(u in self.frequencies for u in candidates):
            pooled = torch.cat([self.frequencies[u] * self.train_sizes.get(u, 1) for u in candidates])
            frequencies = pooled / pooled.sum()
        else:
            frequencies = uniform(sum(self.context.head_sizes[u] for u in candidates))
        agnostic = self.guessed(labels + offsets[task], frequencies, self.cell_generator(task, TASK_AGNOSTIC))
        return {TASK_AWARE: aware, TASK_AGNOSTIC: agnostic}

    def domain_guess(self, data: LabelledData, task: int, n_candidates: int) -> Evaluation:
        """The domain scenario's one evaluation: guesses over the C shared classes from the pooled training labels
        of tasks 0..n_candidates-1 (each class by its count over them), uniform while one is not learned."""
        candidates = range(n_candidates)
        if all(u in self.frequencies for u in candidates):
            pooled = sum(self.frequencies[u] * self.train_sizes.get(u, 1) for u in candidates)
            frequencies = pooled / pooled.sum()
        else:
            frequencies = uniform(self.context.head_sizes[task])
        return self.guessed(data.labels.cpu(), frequencies, self.cell_generator(task, TASK_AWARE))

    def cell_generator(self, task: int, evaluation: str) -> torch.Generator:
        """A generator for one (stage, task, evaluation), seeded from the run seed alone (module docstring).

        The stage is the number of tasks learned so far (the stored rows' stage: 0 at initialisation, t + 1 after
        task t); task and stage are numbered as the stored rows are (1-based task).
        """
        stage = len(self.frequencies)
        return self.context.generator(f"random-classifier/stage-{stage}/task-{task + 1}/{evaluation}")

    @staticmethod
    def guessed(labels: torch.Tensor, frequencies: torch.Tensor, generator: torch.Generator) -> Evaluation:
        """The accuracy of guesses drawn from `frequencies` with `generator` against `labels` (CPU)."""
        guesses = stratified_guesses(frequencies, len(labels), generator)
        accuracy = float((guesses == labels).double().mean()) if len(labels) else 0.0
        return Evaluation(float("nan"), accuracy, len(labels))

    def extra_state(self) -> dict[str, Any]:
        return {"frequencies": self.frequencies, "train_sizes": self.train_sizes}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.frequencies = dict(state.get("frequencies", {}))
        self.train_sizes = dict(state.get("train_sizes", {}))


def uniform(n_classes: int) -> torch.Tensor:
    """Equal frequencies over `n_classes` classes (chance)."""
    return torch.full((n_classes,), 1.0 / n_classes, dtype=torch.float64)
