"""SupSup: supermasks by hand, the straight-through gradient, fixed weights, isolation of earlier tasks, one-shot
task inference on hand-made masks, the task-agnostic layout, refusals, memory and monitoring."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from learned import Learned, inputs_of, learned
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks

from clbench.approaches.refusals import approach_refusal
from clbench.approaches.registry import REGISTRY
from clbench.approaches.resolution import resolve
from clbench.approaches.supsup import functions
from clbench.approaches.supsup.approach import OTHER_TASKS_LOGIT

SCORES = torch.tensor([[0.3, -0.9, 0.1], [0.5, -0.2, 0.0]])


# ---------------------------------------------------------------------------- the masks, by hand
def test_threshold_mask_keeps_the_scores_at_or_above_zero() -> None:
    assert functions.supermask(SCORES, "threshold", 0.5).tolist() == [[1, 0, 1], [1, 0, 1]]


@pytest.mark.parametrize(("density", "expected"), [
    (0.5, [[1, 1, 0], [1, 0, 0]]),  # 6 - int(0.5 * 6) = 3 kept: |-0.9|, 0.5, 0.3
    (0.25, [[0, 1, 0], [1, 0, 0]]),  # 6 - int(0.75 * 6) = 2 kept: |-0.9|, 0.5
    (1.0, [[1, 1, 1], [1, 1, 1]]),
])
def test_top_k_mask_keeps_the_largest_magnitudes(density: float, expected: list[list[int]]) -> None:
    assert functions.supermask(SCORES, "top-k", density).tolist() == expected


def test_the_gradient_goes_straight_through_the_mask() -> None:
    upstream = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for rule, expected in [("threshold", upstream), ("top-k", upstream * torch.tensor([[1, -1, 1], [1, -1, 0]]))]:
        scores = SCORES.clone().requires_grad_(True)
        mask = functions.straight_through_mask(scores, rule, 0.5)
        assert torch.equal(mask, functions.supermask(SCORES, rule, 0.5))  # the forward value is the mask exactly
        (mask * upstream).sum().backward()
        assert torch.equal(scores.grad, expected), rule  # top-k: through |s|, sign(0) = 0


def test_signed_constant_and_score_initialisation() -> None:
    torch.manual_seed(0)
    weight = functions.signed_constant(50, 8)
    assert set(weight.flatten().tolist()) == {math.sqrt(2 / 8), -math.sqrt(2 / 8)}
    assert 0.3 < (weight > 0).float().mean() < 0.7
    scores = functions.initial_scores(50, 16)
    assert scores.abs().max() <= 0.25 and scores.abs().max() > 0.2  # U(-1/sqrt(16), 1/sqrt(16))


# ---------------------------------------------------------------------------- one-shot task inference
def test_entropy_gradient_by_hand_and_each_sample_infers_its_own_task() -> None:
    """One layer, 2 inputs, 2 classes; task 0's mask passes input 0 to class 0, task 1's input 1 to class 0.
    Sample a = (3, 0) gives logits (3 alpha_0, 0): with the gap d = 3 alpha_0 at alpha = 1/2, dH/dalpha_0 =
    dH/dd * 3 = -d sigma(d)(1 - sigma(d)) * 3, and dH/dalpha_1 = 0 (task 1's mask sees nothing of a)."""
    weights = [torch.ones(2, 2)]
    masks = [torch.tensor([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]])]  # (K=2, out, in)
    inputs = torch.tensor([[3.0, 0.0], [0.0, 3.0]])
    gradient = functions.entropy_gradients(inputs, weights, masks)
    sigma = 1 / (1 + math.exp(-1.5))
    by_hand = -1.5 * sigma * (1 - sigma) * 3
    assert gradient[0].tolist() == pytest.approx([by_hand, 0.0], abs=1e-6)
    assert gradient[1].tolist() == pytest.approx([0.0, by_hand], abs=1e-6)
    assert functions.infer_tasks(inputs, weights, masks).tolist() == [0, 1]
    with torch.inference_mode():  # the evaluation's mode: inference still takes its gradient
        assert functions.infer_tasks(inputs, weights, masks).tolist() == [0, 1]


def test_superposition_at_one_hot_alphas_is_that_tasks_network() -> None:
    torch.manual_seed(1)
    weights = [torch.randn(5, 4), torch.randn(3, 5)]
    masks = [(torch.rand(2, 5, 4) > 0.5).float(), (torch.rand(2, 3, 5) > 0.5).float()]
    x = torch.randn(6, 4)
    alphas = torch.tensor([[0.0, 1.0]]).expand(6, 2)
    own = torch.relu(x @ (weights[0] * masks[0][1]).T) @ (weights[1] * masks[1][1]).T
    assert torch.allclose(functions.superposed_logits(x, weights, masks, alphas), own, atol=1e-6)


# ---------------------------------------------------------------------------- learning three tiny tasks
@pytest.fixture(scope="module")
def run() -> Learned:
    return learned("supsup", "mlp")


def test_learns_above_chance_and_earlier_outputs_are_bit_identical(run: Learned) -> None:
    assert run.accuracy[0][0] > 1.5 / run.tasks[0].n_classes
    for stage, outputs in enumerate(run.outputs):
        for task, output in enumerate(outputs):
            assert torch.equal(output, run.outputs[-1][task]), (stage, task)


def test_fixed_weights_are_bit_identical_and_only_the_tasks_scores_change(run: Learned) -> None:
    initial = make_approach("supsup", tiny_spec("mlp"), run.tasks).network.state_dict()
    fixed = [key for key in initial if key.startswith("weight_")]
    assert len(fixed) == 3
    for stage in range(3):
        state = run.weights(stage)
        assert all(torch.equal(state[key], initial[key]) for key in fixed), stage
        for key in (key for key in state if key.startswith("scores.")):
            task = int(key.rsplit(".", 1)[1])
            changed = not torch.equal(state[key], initial[key])
            assert changed == (task <= stage), (stage, key)  # learned tasks moved, later ones not yet


def test_predict_classes_puts_the_inferred_tasks_logits_in_its_classes(run: Learned) -> None:
    approach, tasks = run.approach, run.tasks
    approach.network.eval()
    inputs = torch.cat([inputs_of(tasks, task) for task in range(3)])
    with torch.inference_mode():
        out = approach.predict_classes(inputs, 3)
        inferred = approach.network.infer_tasks(inputs, 3)
        offsets, sizes = approach.context.class_offsets, approach.context.head_sizes
        assert out.shape == (len(inputs), sum(sizes))
        for task in range(3):
            rows = inferred == task
            own = out[rows, offsets[task]:offsets[task] + sizes[task]]
            assert torch.equal(own, approach.predict(inputs[rows], task))
            rest = torch.cat([out[rows, :offsets[task]], out[rows, offsets[task] + sizes[task]:]], dim=1)
            assert (rest == OTHER_TASKS_LOGIT).all()


def test_memory_is_one_bit_per_edge_per_learned_task_and_monitoring_counts_mask_edges(run: Learned) -> None:
    approach = run.approach
    edges = 784 * 32 + 32 * 32 + 32 * 100  # output_size 100 (the default) outputs
    assert approach.memory_usage() == (0, 3 * math.ceil(edges / 8))
    rows = approach.monitoring(2, run.tasks)["supsup_masks"]
    total = [row for row in rows if row["layer"] == "total"]
    assert [row["task"] for row in total] == [1, 2, 3]
    assert all(row["weights"] == edges for row in total)
    first = approach.network.masks(0)
    assert total[0]["used"] == sum(int(mask.sum()) for mask in first)


def test_the_protocols_rmsprop_is_torchs_at_its_lr_over_the_tasks_scores() -> None:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, optimizer="rmsprop"))
    approach = make_approach("supsup", spec, tiny_tasks(spec))
    optimizer = approach.make_optimizer(1, 0.001)
    assert isinstance(optimizer, torch.optim.RMSprop) and optimizer.param_groups[0]["lr"] == 0.001
    assert optimizer.param_groups[0]["params"] == approach.network.task_scores(1)


# ---------------------------------------------------------------------------- refusals
def test_refuses_the_domain_scenario_and_conv_bodies_in_one_line() -> None:
    cls = REGISTRY["supsup"]
    domain = replace(tiny_spec("mlp"), data=replace(tiny_spec("mlp").data, scenario="domain"))
    resolved = resolve(tiny_spec("mlp"), "supsup")
    refusal = approach_refusal(cls, domain.network, domain.data, resolved.training, resolved.hyperparameters)
    assert refusal is not None and refusal.key == "data.scenario" and "\n" not in refusal.reason
    conv = tiny_spec("alexnet")
    refusal = approach_refusal(cls, conv.network, conv.data, resolved.training, resolved.hyperparameters)
    assert refusal is not None and refusal.key == "network.kind"


def test_top_k_training_keeps_exactly_the_density_of_each_layer() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("supsup", spec, tasks,
                             mask="top-k", density=0.3)
    approach.learn_task(0, tasks)
    for mask, (out, inp) in zip(approach.network.masks(0), approach.network.shapes):
        assert int(mask.sum()) == out * inp - int(0.7 * out * inp)
    assert approach.evaluate(tasks[0].test, 0).accuracy > 1.5 / tasks[0].n_classes
