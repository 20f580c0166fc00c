"""The regularisers' mathematics against hand values and independent computations."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.regularizers import (
    diagonal_fisher,
    distillation_loss,
    ewc_penalty,
    fisher_weighted_average,
    imm_mean_merge,
    imm_mode_merge,
    l2_transfer_penalty,
    lfl_penalty,
    merge_fisher,
)


def tensors(**values: list[float]) -> dict[str, torch.Tensor]:
    return {name: torch.tensor(value) for name, value in values.items()}


def assert_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name])


# ---------------------------------------------------------------------------------------------- EWC
def test_ewc_penalty_is_zero_at_the_anchor_and_matches_hand_value_after_a_perturbation() -> None:
    anchor = tensors(w=[1.0, -2.0], b=[0.5])
    fisher = tensors(w=[2.0, 0.0], b=[4.0])
    assert float(ewc_penalty(anchor, anchor, fisher, lamb=10.0)) == 0.0
    moved = tensors(w=[1.5, 7.0], b=[0.0])
    # lamb/2 * (2 * 0.5^2 + 0 * 9^2 + 4 * 0.5^2) = 5 * 1.5
    assert float(ewc_penalty(moved, anchor, fisher, lamb=10.0)) == pytest.approx(7.5)


def linear_softmax_problem(n: int = 7) -> tuple[nn.Linear, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    model = nn.Linear(4, 3)
    with torch.no_grad():
        model.weight.copy_(torch.randn(3, 4, generator=generator))
        model.bias.copy_(torch.randn(3, generator=generator))
    inputs = torch.randn(n, 4, generator=generator)  # (N, 4)
    targets = torch.randint(0, 3, (n,), generator=generator)  # (N,)
    return model, inputs, targets


def batch_losses(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, size: int):
    for start in range(0, len(targets), size):
        x, y = inputs[start:start + size], targets[start:start + size]
        yield functional.cross_entropy(model(x), y), len(y)


def test_fisher_with_batches_of_one_equals_the_analytic_per_sample_estimate() -> None:
    model, inputs, targets = linear_softmax_problem()
    fisher = diagonal_fisher(dict(model.named_parameters()), batch_losses(model, inputs, targets, 1))
    with torch.no_grad():
        residual = functional.softmax(model(inputs), dim=1) - functional.one_hot(targets, 3)  # (N, 3)
        weight_gradients = residual[:, :, None] * inputs[:, None, :]  # (N, 3, 4): dl_i/dW
    expected = {"weight": weight_gradients.pow(2).mean(0), "bias": residual.pow(2).mean(0)}
    assert_close(fisher, expected)
    assert all(bool((value >= 0).all()) for value in fisher.values())


def test_fisher_with_larger_batches_is_the_size_weighted_mean_of_squared_batch_gradients() -> None:
    model, inputs, targets = linear_softmax_problem(n=7)
    fisher = diagonal_fisher(dict(model.named_parameters()), batch_losses(model, inputs, targets, 3))
    expected = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for start, size in ((0, 3), (3, 3), (6, 1)):  # the last, partial batch weighs by its true size
        model.zero_grad()
        functional.cross_entropy(model(inputs[start:start + size]), targets[start:start + size]).backward()
        for name, p in model.named_parameters():
            expected[name] += size * p.grad.pow(2) / 7
    assert_close(fisher, expected)


def test_fisher_is_zero_for_parameters_the_loss_does_not_use() -> None:
    model, inputs, targets = linear_softmax_problem()
    unused = nn.Parameter(torch.ones(2))
    fisher = diagonal_fisher({"weight": model.weight, "unused": unused}, batch_losses(model, inputs, targets, 2))
    assert torch.equal(fisher["unused"], torch.zeros(2))
    assert float(fisher["weight"].sum()) > 0


def test_fisher_merge_weighs_the_old_fisher_by_the_number_of_earlier_tasks() -> None:
    new, old = tensors(a=[1.0, 3.0]), tensors(a=[3.0, 0.0])
    assert_close(merge_fisher(new, old, previous_tasks=1), tensors(a=[2.0, 1.5]))
    assert_close(merge_fisher(new, old, previous_tasks=2), tensors(a=[7.0 / 3, 1.0]))


def test_fisher_merge_applied_in_sequence_is_the_mean_of_all_tasks_fishers() -> None:
    fishers = [tensors(a=[1.0]), tensors(a=[2.0]), tensors(a=[6.0])]
    merged = fishers[0]
    for t in (1, 2):
        merged = merge_fisher(fishers[t], merged, previous_tasks=t)
    assert_close(merged, tensors(a=[3.0]))


# ---------------------------------------------------------------------------------------------- IMM
def test_l2_transfer_penalty_matches_hand_value() -> None:
    anchor = tensors(w=[1.0, 2.0])
    assert float(l2_transfer_penalty(anchor, anchor, 0.1)) == 0.0
    assert float(l2_transfer_penalty(tensors(w=[2.0, 0.0]), anchor, 0.1)) == pytest.approx(0.05 * 5)


def test_mean_merge_is_the_weighted_average_and_in_sequence_the_uniform_average() -> None:
    assert_close(imm_mean_merge(tensors(w=[3.0]), tensors(w=[0.0]), previous_tasks=2), tensors(w=[1.0]))
    models = [tensors(w=[1.0, 0.0]), tensors(w=[2.0, 3.0]), tensors(w=[6.0, -3.0])]
    merged = models[0]
    for t in (1, 2):
        merged = imm_mean_merge(models[t], merged, previous_tasks=t)
    assert_close(merged, tensors(w=[3.0, 0.0]))


def test_fisher_weighted_average_matches_hand_values() -> None:
    thetas = [tensors(w=[1.0, 2.0, 5.0]), tensors(w=[4.0, 8.0, 7.0])]
    fishers = [tensors(w=[1.0, 3.0, 0.0]), tensors(w=[2.0, 1.0, 0.0])]
    merged = fisher_weighted_average(thetas, fishers, epsilon=1e-12)
    # (1*1 + 2*4)/3 = 3, (3*2 + 1*8)/4 = 3.5, no Fisher anywhere: plain mean 6
    assert_close(merged, tensors(w=[3.0, 3.5, 6.0]))


def test_sequential_mode_merge_equals_the_closed_form_over_all_tasks() -> None:
    generator = torch.Generator().manual_seed(0)
    thetas = [{"w": torch.randn(5, generator=generator)} for _ in range(3)]
    fishers = [{"w": torch.rand(5, generator=generator)} for _ in range(3)]
    fishers[1]["w"][0] = 0.0
    merged, precision = thetas[0], {"w": torch.zeros(5)}
    for theta, fisher in zip(thetas, fishers):
        merged, precision = imm_mode_merge(merged, precision, theta, fisher, epsilon=1e-3)
    assert_close(merged, fisher_weighted_average(thetas, fishers, epsilon=1e-3))
    assert_close(precision, {"w": sum(f["w"] for f in fishers) + 3e-3})


def test_mode_merge_first_step_keeps_the_current_model() -> None:
    theta, fisher = tensors(w=[1.0, -2.0]), tensors(w=[0.0, 5.0])
    merged, precision = imm_mode_merge(theta, tensors(w=[0.0, 0.0]), theta, fisher, epsilon=1e-8)
    assert_close(merged, theta)
    assert_close(precision, tensors(w=[1e-8, 5.0 + 1e-8]))


# ---------------------------------------------------------------------------------------------- LwF, LFL
def test_distillation_matches_the_softened_cross_entropy_by_hand() -> None:
    new, old = torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[math.log(2.0), math.log(4.0)]])
    # T = 2: old softened (sqrt 2, 2) / sum, new softened (1, sqrt 3) / sum
    target = torch.tensor([math.sqrt(2.0), 2.0]) / (math.sqrt(2.0) + 2.0)
    prediction = torch.tensor([1.0, math.sqrt(3.0)]) / (1.0 + math.sqrt(3.0))
    expected = -(target * prediction.log()).sum()
    torch.testing.assert_close(distillation_loss(new, old, temperature=2.0), expected.reshape(1))


def test_distillation_is_smallest_when_the_outputs_match() -> None:
    generator = torch.Generator().manual_seed(1)
    old = torch.randn(6, 5, generator=generator)
    entropy = distillation_loss(old, old, temperature=1.0)  # (6,): the targets' entropy
    moved = distillation_loss(old + torch.randn(6, 5, generator=generator), old, temperature=1.0)
    assert entropy.shape == (6,)
    assert bool((moved > entropy).all())


def test_lfl_penalty_is_zero_for_equal_activations_and_half_squared_distance_otherwise() -> None:
    h = torch.tensor([[1.0, 2.0], [0.0, 3.0]])
    assert torch.equal(lfl_penalty(h, h), torch.zeros(2))
    torch.testing.assert_close(lfl_penalty(h, torch.tensor([[1.0, 0.0], [1.0, 1.0]])), torch.tensor([2.0, 2.5]))
