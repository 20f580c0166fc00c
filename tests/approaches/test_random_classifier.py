"""The random reference's guesses for a (stage, task, evaluation) depend on the run seed and that cell only.

So `clbench train`, a resumed run and `clbench evaluate` (which evaluate different numbers of cells before a given
one) store the same rows; `tests/run/test_evaluate_reproduces_train.py` checks that end to end.
"""

from __future__ import annotations

import dataclasses

import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import TASK_AGNOSTIC, TASK_AWARE
from clbench.approaches.random_classifier import RandomClassifier, uniform
from clbench.data.batches import LabelledData, TaskSequence

SPEC = tiny_spec("mlp")


def reference(tasks: TaskSequence, learned: int, seed: int = 0) -> RandomClassifier:
    """The random reference after `learned` tasks, each with chance frequencies over its head."""
    approach: RandomClassifier = make_approach("random", SPEC, tasks, seed=seed)
    approach.frequencies = {u: uniform(tasks.head_sizes[u]) for u in range(learned)}
    approach.train_sizes = dict.fromkeys(range(learned), 100)
    return approach


def all_zeros(tasks: TaskSequence, n: int = 4000) -> LabelledData:
    """n test samples of task 1, every label 0: the accuracy is the share of guesses that are 0."""
    test = tasks[0].test
    return dataclasses.replace(test, labels=torch.zeros(n, dtype=torch.long),
                               images=test.images[:1].expand(n, *test.images.shape[1:]))


def accuracies(approach: RandomClassifier, data: LabelledData, task: int, n_candidates: int) -> dict[str, float]:
    return {name: result.accuracy for name, result in approach.evaluate_task(data, task, n_candidates).items()}


def test_a_cells_guesses_do_not_depend_on_the_evaluations_before_it() -> None:
    tasks = tiny_tasks(SPEC)
    data = all_zeros(tasks)
    first = accuracies(reference(tasks, learned=2), data, 0, 2)  # stage 2, task 1: the first cell evaluated
    busy = reference(tasks, learned=2)
    for task in (2, 1, 0, 0):  # other cells, and this one, before it
        accuracies(busy, data, task, max(2, task + 1))
    assert accuracies(busy, data, 0, 2) == first
    assert set(first) == {TASK_AWARE, TASK_AGNOSTIC}
    # 4000 guesses, 1 in 4 of them 0 (task-aware) or 1 in 8 (task-agnostic over 2 tasks of 4 classes)
    assert abs(first[TASK_AWARE] - 0.25) < 0.03 and abs(first[TASK_AGNOSTIC] - 0.125) < 0.03


def test_the_stage_the_evaluation_and_the_seed_each_give_other_guesses() -> None:
    tasks = tiny_tasks(SPEC)
    data = all_zeros(tasks)
    # the same frequencies (chance over task 1's 4 classes) at stage 1, stage 2 and with seed 1: other draws each
    after_one = accuracies(reference(tasks, learned=1), data, 0, 1)
    after_two = accuracies(reference(tasks, learned=2), data, 0, 1)
    other_seed = accuracies(reference(tasks, learned=1, seed=1), data, 0, 1)
    assert len({after_one[TASK_AWARE], after_two[TASK_AWARE], other_seed[TASK_AWARE]}) == 3
    # one candidate task learned: both evaluations guess task 1's 4 classes from chance, with their own generators
    assert after_one[TASK_AWARE] != after_one[TASK_AGNOSTIC]


def test_a_checkpoint_of_the_random_reference_holds_no_generator_state() -> None:
    approach = reference(tiny_tasks(SPEC), learned=2)
    assert set(approach.extra_state()) == {"frequencies", "train_sizes"}
