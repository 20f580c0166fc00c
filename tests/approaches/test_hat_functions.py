"""HAT's mathematics (clbench.approaches.hat.functions) on hand-made tensors."""

from __future__ import annotations

import pytest
import torch

from clbench.approaches.hat import functions as hf
from clbench.approaches.hat.functions import LayerShape


# ---------------------------------------------------------------------------------------------- annealing
@pytest.mark.parametrize("smax", [1.0, 25.0, 400.0])
@pytest.mark.parametrize("n_batches", [2, 3, 17])
def test_annealing_endpoints_and_linearity(smax: float, n_batches: int) -> None:
    assert hf.annealed_scale(0, n_batches, smax) == pytest.approx(1.0 / smax)  # b = 1
    assert hf.annealed_scale(n_batches - 1, n_batches, smax) == pytest.approx(smax)  # b = B
    values = [hf.annealed_scale(b, n_batches, smax) for b in range(n_batches)]
    steps = torch.tensor(values, dtype=torch.float64).diff()
    assert torch.allclose(steps, torch.full_like(steps, (smax - 1 / smax) / (n_batches - 1)))
    schedule = hf.annealing_schedule(n_batches, smax)
    assert schedule.shape == (n_batches,)
    assert torch.allclose(schedule.double(), torch.tensor(values, dtype=torch.float64), rtol=1e-6)
    assert schedule[-1].item() == smax


def test_annealing_single_batch_starts_the_ramp() -> None:
    assert hf.annealed_scale(0, 1, 400.0) == pytest.approx(1 / 400)
    assert hf.annealing_schedule(1, 400.0).tolist() == pytest.approx([1 / 400])


# ---------------------------------------------------------------------------------------------- compensation
def test_compensation_matches_closed_form_and_autograd_ratio() -> None:
    smax = 400.0
    embedding = torch.linspace(-6, 6, 101, dtype=torch.float64)
    for s in (1 / smax, 0.3, 2.0):  # |s e| <= 12: no clamping, and sigma'(s e) is accurate in float64
        factor = hf.compensation_factor(embedding, s, smax)
        closed = smax * (torch.cosh(s * embedding) + 1) / (s * (torch.cosh(embedding) + 1))
        assert torch.allclose(factor, closed, rtol=1e-12)
        e = embedding.clone().requires_grad_(True)
        (plain,) = torch.autograd.grad(torch.sigmoid(e).sum(), e)  # sigma'(e)
        (annealed,) = torch.autograd.grad(torch.sigmoid(s * e).sum(), e)  # s sigma'(s e)
        assert torch.allclose(factor, smax * plain / annealed, rtol=1e-8)


def test_compensation_clamps_cosh_argument() -> None:
    embedding = torch.tensor([6.0, -6.0, 0.1])  # s e = +-2400: clamped to +-50; 40 is not clamped
    factor = hf.compensation_factor(embedding, 400.0, 400.0)
    assert torch.isfinite(factor).all()
    expected = (torch.cosh(torch.tensor(50.0)) + 1) / (torch.cosh(torch.tensor(6.0)) + 1)
    assert torch.allclose(factor[:2], expected.expand(2))
    assert factor[2] == pytest.approx(((torch.cosh(torch.tensor(40.0)) + 1) / (torch.cosh(torch.tensor(0.1)) + 1))
                                      .item(), rel=1e-5)


# ---------------------------------------------------------------------------------------------- regulariser
def test_regulariser_hand_computed() -> None:
    masks = [torch.tensor([1.0, 0.5]), torch.tensor([0.0, 1.0, 0.25])]
    previous = [torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.0, 0.0])]
    # free capacity 1 - a^{<t}: [0, 1], [0.5, 1, 1]; numerator 0 + .5 + 0 + 1 + .25 = 1.75; denominator 3.5
    assert hf.attention_regulariser(masks, previous).item() == pytest.approx(0.5)
    # first task: the mean attention, 2.75 / 5
    assert hf.attention_regulariser(masks, None).item() == pytest.approx(0.55)


def test_regulariser_gradient_is_free_capacity_over_denominator() -> None:
    masks = [torch.tensor([1.0, 0.5], requires_grad=True), torch.tensor([0.0, 1.0, 0.25], requires_grad=True)]
    previous = [torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.0, 0.0])]
    hf.attention_regulariser(masks, previous).backward()
    assert torch.allclose(masks[0].grad, torch.tensor([0.0, 1.0]) / 3.5)
    assert torch.allclose(masks[1].grad, torch.tensor([0.5, 1.0, 1.0]) / 3.5)


def test_regulariser_is_zero_when_every_unit_is_used() -> None:
    masks = [torch.tensor([0.3, 0.9], requires_grad=True)]
    value = hf.attention_regulariser(masks, [torch.ones(2)])
    assert value.item() == 0.0
    value.backward()
    assert torch.isfinite(masks[0].grad).all() and (masks[0].grad == 0).all()


def test_cumulative_masks_elementwise_max() -> None:
    first = [torch.tensor([0.0, 1.0, 0.2])]
    second = [torch.tensor([1.0, 0.0, 0.1])]
    cumulative = hf.cumulative_masks(first, None)
    assert torch.equal(cumulative[0], first[0]) and cumulative[0] is not first[0]
    assert torch.equal(hf.cumulative_masks(second, cumulative)[0], torch.tensor([1.0, 1.0, 0.2]))


# ---------------------------------------------------------------------------------------------- weight masks
def test_expand_input_mask_follows_flatten_order() -> None:
    channels, side = 3, 2
    features = torch.arange(channels, dtype=torch.float32).view(1, channels, 1, 1).expand(5, channels, side, side)
    owner = features.flatten(1)[0]  # (C*S*S,): the channel of each flattened position
    assert torch.equal(hf.expand_input_mask(torch.arange(channels, dtype=torch.float32), side * side), owner)


MLP_LAYERS = [LayerShape("fc1", (3, 4), gated_input=False), LayerShape("fc2", (2, 3))]
MLP_MASKS = [torch.tensor([1.0, 0.0, 1.0]), torch.tensor([1.0, 0.0])]


def test_weight_masks_linear_hand_made() -> None:
    first, second = hf.weight_masks(MLP_MASKS, MLP_LAYERS)
    assert torch.equal(first, torch.tensor([[1.0] * 4, [0.0] * 4, [1.0] * 4]))  # output mask only
    assert torch.equal(second, torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))  # min(a_out_i, a_in_j)


def test_weight_masks_take_the_minimum_of_soft_values() -> None:
    masks = [torch.tensor([0.2, 0.9]), torch.tensor([0.6])]
    layers = [LayerShape("fc1", (2, 5), gated_input=False), LayerShape("fc2", (1, 2))]
    assert torch.allclose(hf.weight_masks(masks, layers)[1], torch.tensor([[0.2, 0.6]]))


def test_weight_masks_conv_then_fc() -> None:
    conv1 = LayerShape("conv1", (2, 3, 2, 2), gated_input=False)
    conv2 = LayerShape("conv2", (3, 2, 2, 2))
    fc = LayerShape("fc1", (2, 3 * 4), input_repeat=4)
    masks = [torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0]), torch.tensor([0.0, 1.0])]
    first, second, third = hf.weight_masks(masks, [conv1, conv2, fc])
    assert first.shape == (2, 3, 2, 2) and (first[0] == 1).all() and (first[1] == 0).all()
    assert second.shape == (3, 2, 2, 2)
    expected = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])  # min(out [1,1,0], in [1,0])
    assert torch.equal(second[:, :, 0, 0], expected) and (second == expected[:, :, None, None]).all()
    assert torch.equal(third[0], torch.zeros(12))
    assert torch.equal(third[1], torch.tensor([1.0] * 8 + [0.0] * 4))  # channels 0, 1 used, channel 2 not


def test_gradient_multipliers_are_one_minus_masks() -> None:
    (weight1, bias1), (weight2, bias2) = hf.gradient_multipliers(MLP_MASKS, MLP_LAYERS)
    assert torch.equal(weight1, 1 - hf.weight_masks(MLP_MASKS, MLP_LAYERS)[0])
    assert torch.equal(weight2, torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]))
    assert torch.equal(bias1, torch.tensor([0.0, 1.0, 0.0])) and torch.equal(bias2, torch.tensor([0.0, 1.0]))


# ---------------------------------------------------------------------------------------------- monitoring
def test_capacity_usage_hand_made() -> None:
    assert hf.capacity_usage(MLP_MASKS, MLP_LAYERS, 0.5) == [(8, 12), (2, 6)]
    soft = [torch.tensor([0.5, 0.51, 1.0]), torch.tensor([0.9, 0.2])]
    assert hf.capacity_usage(soft, MLP_LAYERS, 0.5) == [(8, 12), (2, 6)]  # 0.5 itself is not above threshold
    assert hf.capacity_usage(soft, MLP_LAYERS, 0.95) == [(4, 12), (0, 6)]


def test_capacity_usage_conv_to_fc_repeat() -> None:
    layers = [LayerShape("conv1", (2, 3, 2, 2), gated_input=False), LayerShape("fc1", (3, 2 * 4), input_repeat=4)]
    masks = [torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0, 0.0])]
    assert hf.capacity_usage(masks, layers, 0.5) == [(12, 24), (8, 24)]


def test_weight_reuse_hand_made() -> None:
    earlier = [torch.tensor([1.0, 1.0, 0.0]), torch.tensor([1.0, 0.0])]  # fc1: 2*4 = 8; fc2: 1*2 = 2
    later = [torch.tensor([0.0, 1.0, 1.0]), torch.tensor([1.0, 1.0])]  # fc1 shared: unit 1 (4); fc2: (0, 1) (1)
    assert hf.weight_reuse(earlier, later, MLP_LAYERS, 0.5) == (5, 10)
    assert hf.weight_reuse(earlier, earlier, MLP_LAYERS, 0.5) == (10, 10)
