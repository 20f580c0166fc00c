"""AdaHAT: its adjustment (Wang et al. 2024, Eqs. 7-9) on hand-made masks and mask histories, worked out by hand, and
the adjustment wired into HAT's training step (rates, state, what stays HAT's)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks

from clbench.approaches.adahat import functions as af
from clbench.approaches.adahat.approach import AdaHat, AdaHatHyperparameters
from clbench.approaches.datatypes import StepInfo
from clbench.approaches.hat.approach import Hat
from clbench.approaches.hat.functions import LayerShape
from clbench.data.batches import TaskSequence

# Two gated layers: fc1 2 units over 3 inputs (the network input: no input mask), fc2 2 units over fc1's 2.
LAYERS = [LayerShape("fc1", (2, 3), gated_input=False), LayerShape("fc2", (2, 2))]
HISTORY = [  # a^1, a^2 of two finished tasks, per layer
    [torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0])],
    [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])],
]


def test_summative_mask_is_the_sum_of_the_task_masks_not_their_maximum() -> None:
    summative = af.summative_masks(HISTORY)
    assert torch.equal(summative[0], torch.tensor([2.0, 1.0]))
    assert torch.equal(summative[1], torch.tensor([0.0, 2.0]))
    assert torch.equal(af.summative_masks(HISTORY[:1])[0], torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError):
        af.summative_masks([])


def test_parameter_importance_is_the_min_of_the_two_units_summative_masks() -> None:
    (weight1, bias1), (weight2, bias2) = af.parameter_importance([torch.tensor([2.0, 1.0]), torch.tensor([0.0, 3.0])],
                                                                 LAYERS)
    assert torch.equal(weight1, torch.tensor([[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]))  # first layer: the output unit
    assert torch.equal(bias1, torch.tensor([2.0, 1.0]))
    # w_ij joins output unit i (m = 0, 3) and input unit j (m = 2, 1): min(0, 2), min(0, 1); min(3, 2), min(3, 1)
    assert torch.equal(weight2, torch.tensor([[0.0, 0.0], [2.0, 1.0]]))
    assert torch.equal(bias2, torch.tensor([0.0, 3.0]))


def test_network_sparsity_per_layer_by_hand() -> None:
    # layer 1: 14 units, earlier tasks use units 0-1 and half of 2-3 (free 2 x 0.5 + 10 = 11 > 10):
    # R = (1 x 0 + 1 x 0 + 0.5 x 0.5 + 0 x 0.5 + 1 x 1 + 0.25 x 1) / 11 = 1.5 / 11
    previous1 = torch.tensor([1.0, 1.0, 0.5, 0.5] + [0.0] * 10)
    mask1 = torch.tensor([1.0, 1.0, 0.5, 0.0, 1.0, 0.25] + [0.0] * 8)
    # layer 2: 12 units, 3 free (<= 10): R = 0 whatever the mask
    previous2 = torch.tensor([1.0] * 9 + [0.0] * 3)
    mask2 = torch.ones(12)
    # layer 3: exactly 10 free units (not more than 10): R = 0
    previous3 = torch.tensor([1.0, 1.0] + [0.0] * 10)
    sparsity = af.network_sparsity([mask1, mask2, torch.ones(12)], [previous1, previous2, previous3])
    assert sparsity.tolist() == pytest.approx([1.5 / 11, 0.0, 0.0])
    # the first task (a^{<1} = 0): the mean mask of each layer with more than 10 units
    first = af.network_sparsity([mask1, torch.ones(3)], None)
    assert first.tolist() == pytest.approx([3.75 / 14, 0.0])


def test_adjustment_rates_by_hand() -> None:
    importance = af.parameter_importance([torch.tensor([2.0, 1.0]), torch.tensor([0.0, 3.0])], LAYERS)
    # alpha 1, epsilon 0.5: r_1 = 1 / (0.5 + 0.5) = 1, r_2 = 1 / (0.5 + 1.5) = 0.5
    (weight1, bias1), (weight2, bias2) = af.adjustment_rates(importance, torch.tensor([0.5, 1.5]), 1.0, 0.5)
    third, half = 1 / 3, 1 / 2  # r_1 / (2 + r_1), r_1 / (1 + r_1)
    assert torch.allclose(weight1, torch.tensor([[third] * 3, [half] * 3]))
    assert torch.allclose(bias1, torch.tensor([third, half]))
    # r_2 / (I + r_2) with I = [[0, 0], [2, 1]]: 1, 1; 0.5 / 2.5, 0.5 / 1.5; bias I = [0, 3]: 1, 0.5 / 3.5
    assert torch.allclose(weight2, torch.tensor([[1.0, 1.0], [0.2, 1 / 3]]))
    assert torch.allclose(bias2, torch.tensor([1.0, 1 / 7]))


def test_authors_intensity_nearly_freezes_used_weights_and_frees_unused_ones() -> None:
    """alpha 1e-6, epsilon 0.1, R = 0.5: r = 1e-6 / 0.6; a weight used once gets r / (1 + r) ~ 1.67e-6."""
    importance = af.parameter_importance(af.summative_masks(HISTORY), LAYERS)
    (weight1, _), (weight2, _) = af.adjustment_rates(importance, torch.tensor([0.5, 0.5]), 1e-6, 0.1)
    r = 1e-6 / 0.6
    assert weight1[1].tolist() == pytest.approx([r / (1 + r)] * 3, rel=1e-5)  # fc1 unit 1: used by task 1 only
    assert weight1[0].tolist() == pytest.approx([r / (2 + r)] * 3, rel=1e-5)  # fc1 unit 0: used by both
    assert torch.equal(weight2[0], torch.ones(2))  # fc2 unit 0: no earlier task used it
    assert (weight2[1] > 0).all()  # never exactly frozen (HAT's 1 - min(a) would be 0 here)


# ---------------------------------------------------------------------------------------------- in the step
def tiny_adahat(seed: int = 0, epochs: int = 1, **hparams: object) -> tuple[AdaHat, TaskSequence]:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=epochs))
    tasks = tiny_tasks(spec)
    approach = make_approach("adahat", spec, tasks, seed, **hparams)
    assert isinstance(approach, AdaHat)
    return approach, tasks


def unit_masks(approach: AdaHat, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, generator=generator) < 0.5).float() for n in approach.unit_counts]


def test_before_step_multiplies_each_gradient_by_its_rate_from_the_step_masks() -> None:
    approach, tasks = tiny_adahat(adjustment_intensity=0.05, epsilon=0.1)
    net = approach.network
    first, second = unit_masks(approach, 1), unit_masks(approach, 2)
    cumulative = [torch.maximum(a, b) for a, b in zip(first, second)]
    approach.load_extra_state({"cumulative_masks": cumulative, "task_masks": [first, second]})
    step = StepInfo(stage=2, epoch=0, batch=1, n_batches=4)
    net.train()
    approach.loss(tasks[2].train.batch(torch.arange(32)), step).backward()
    raw = [(m.weight.grad.clone(), m.bias.grad.clone()) for m in net.gated_modules()]
    approach.before_step(step)
    # by hand from the same inputs: R_l from the step's masks and a^{<3}; I from a^1 + a^2
    masks = [mask.detach() for mask in approach.step_masks]
    for layer, (module, (raw_weight, raw_bias)) in enumerate(zip(net.gated_modules(), raw)):
        free = 1.0 - cumulative[layer]
        sparsity = float((masks[layer] * free).sum() / free.sum()) if free.sum() > 10 else 0.0
        r = 0.05 / (0.1 + sparsity)
        summed = first[layer] + second[layer]
        incoming = summed if layer == 0 else first[layer - 1] + second[layer - 1]
        importance = summed[:, None] if layer == 0 else torch.minimum(summed[:, None], incoming[None, :])
        assert torch.allclose(module.weight.grad, raw_weight * r / (importance + r), rtol=1e-5, atol=1e-30)
        assert torch.allclose(module.bias.grad, raw_bias * r / (summed + r), rtol=1e-5, atol=1e-30)
        unused = (importance == 0).expand_as(raw_weight)
        assert unused.any() and torch.equal(module.weight.grad[unused], raw_weight[unused])  # rate exactly 1


def test_first_task_gradients_are_hat_s_unmasked_ones() -> None:
    approach, tasks = tiny_adahat()
    step = StepInfo(stage=0, epoch=0, batch=0, n_batches=3)
    approach.loss(tasks[0].train.batch(torch.arange(16)), step).backward()
    raw = approach.network.layers[1].weight.grad.clone()
    approach.before_step(step)
    assert torch.equal(approach.network.layers[1].weight.grad, raw)


def task_zero_change(method: str, **hparams: object) -> float:
    """Largest change of task 1's logits on its test set while the method learns task 2."""
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=2))
    tasks = tiny_tasks(spec)
    approach = make_approach(method, spec, tasks, 0, **hparams)
    inputs = tasks[0].test.batch(torch.arange(len(tasks[0].test))).inputs
    approach.learn_task(0, tasks)
    approach.network.eval()
    before = approach.predict(inputs, 0).detach()
    approach.learn_task(1, tasks)
    approach.network.eval()
    return float((approach.predict(inputs, 0).detach() - before).abs().max())


def test_earlier_tasks_move_where_hat_keeps_them() -> None:
    """HAT keeps a learned task's logits (up to its masks' distance from 0 and 1 at s = smax); AdaHAT with a large
    intensity lets them move (the method's point: plasticity); with a tiny one it keeps them as HAT does."""
    hat = task_zero_change("hat", c=0.1)
    assert hat < 1e-4
    assert task_zero_change("adahat", adjustment_intensity=0.5) > 100 * max(hat, 1e-5)
    assert task_zero_change("adahat", adjustment_intensity=1e-9) < 1e-4


def test_state_round_trip_restores_the_importance() -> None:
    approach, tasks = tiny_adahat(epochs=1)
    approach.learn_task(0, tasks)
    approach.learn_task(1, tasks)
    buffer = io.BytesIO()
    torch.save(approach.state(), buffer)
    buffer.seek(0)
    fresh, _ = tiny_adahat(seed=1, epochs=1)
    fresh.load_state(torch.load(buffer, weights_only=True))
    summed = [a + b for a, b in zip(*approach.task_masks)]
    assert torch.equal(fresh.importance[0][1], summed[0])
    for (weight_a, bias_a), (weight_b, bias_b) in zip(fresh.importance, approach.importance):
        assert torch.equal(weight_a, weight_b) and torch.equal(bias_a, bias_b)


def test_hyperparameters_are_the_authors_and_the_rest_is_hat() -> None:
    defaults = AdaHatHyperparameters()
    assert (defaults.adjustment_intensity, defaults.epsilon, defaults.smax, defaults.c) == (1e-6, 0.1, 400.0, 0.1)
    assert issubclass(AdaHat, Hat) and AdaHat.monitoring_reporter == Hat.monitoring_reporter
    assert "resnet18" in AdaHat.unsupported_networks and AdaHat.needs_task_id
