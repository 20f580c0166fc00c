"""L2-transfer's mechanics (penalty 0 at the anchor, a hand computation after a perturbation) and a tiny run."""

from __future__ import annotations

import math

import pytest
import torch
from clbench_l2transfer import L2Transfer, L2TransferHyperparameters, l2_transfer_penalty

import clbench.api as cl


def trained_on_first_task(lamb: float = 0.5) -> tuple[L2Transfer, cl.TaskSequence]:
    tasks = cl.toy_tasks(n_tasks=2)
    torch.manual_seed(0)
    approach = L2Transfer(cl.toy_context(tasks, max_epochs=2), L2TransferHyperparameters(lamb=lamb))
    approach.learn_task(0, tasks)
    return approach, tasks


def test_penalty_is_zero_before_the_first_anchor_and_at_the_anchor() -> None:
    tasks = cl.toy_tasks(n_tasks=2)
    fresh = L2Transfer(cl.toy_context(tasks), L2TransferHyperparameters(lamb=0.5))
    assert fresh.penalty(0) == 0.0
    approach, _ = trained_on_first_task()
    assert set(approach.anchor) == {"layers.0.weight", "layers.0.bias"}  # the body only, no head
    assert float(approach.penalty(1).detach()) == 0.0


def test_penalty_after_a_perturbation_equals_a_hand_computation() -> None:
    approach, _ = trained_on_first_task(lamb=0.5)
    with torch.no_grad():
        approach.network.layers[0].weight[0, 0] += 0.1
        approach.network.layers[0].bias[:3] -= 0.2
        approach.network.heads[0].weight += 1.0  # heads are not in the penalty
    expected = 0.5 * (0.1 ** 2 + 3 * 0.2 ** 2)
    assert math.isclose(float(approach.penalty(1).detach()), expected, rel_tol=1e-4)


def test_penalty_function_on_hand_values() -> None:
    parameters = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5])}
    anchor = {"w": torch.tensor([0.0, 2.0]), "b": torch.tensor([1.5])}
    assert float(l2_transfer_penalty(parameters, anchor, 2.0)) == pytest.approx(2.0 * (1.0 + 0.0 + 1.0))


def test_a_tiny_run_learns_both_tasks_and_keeps_its_anchor_in_the_checkpoint() -> None:
    approach, tasks = trained_on_first_task()
    approach.learn_task(1, tasks)
    accuracies = [approach.evaluate(tasks[t].test, t).accuracy for t in range(2)]
    assert all(accuracy > 0.6 for accuracy in accuracies), accuracies
    state = approach.state()
    fresh = L2Transfer(cl.toy_context(tasks), L2TransferHyperparameters(lamb=0.5))
    fresh.load_state(state)
    assert all(torch.equal(fresh.anchor[name], approach.anchor[name]) for name in approach.anchor)
    assert float(fresh.penalty(2).detach()) == pytest.approx(float(approach.penalty(2).detach()))
