"""WSN: the mask of hand-made scores (the authors' top-c rule), its straight-through gradient, bit-packed masks;
after the 3 tiny tasks, the weights of earlier tasks' masks bit-identical and earlier tasks' outputs too."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from learned import Learned, inputs_of, learned
from synthetic import make_approach, tiny_resnet_spec, tiny_spec, tiny_tasks

from clbench.approaches.resolution import resolve
from clbench.approaches.wsn.functions import (
    pack_mask,
    straight_through_mask,
    threshold_rank,
    top_c_mask,
    union,
    unpack_mask,
)
from clbench.approaches.wsn.masking import mask_layers, original
from clbench.errors import SpecError


# ---------------------------------------------------------------------------- the mathematics, by hand
def test_the_mask_of_hand_made_scores_keeps_the_top_c_by_the_authors_rank() -> None:
    scores = torch.tensor([[0.3, -0.9, 0.1], [0.5, -0.2, 0.05]])
    # c 0.5 over 6 scores: k = 1 + round(0.5 * 5) = 1 + round(2.5) = 3 (half to even); |scores| ascending
    # 0.05, 0.1, 0.2, 0.3, 0.5, 0.9: the 3rd is 0.2, kept are those >= 0.2, so 4 of 6 (the authors' rounding)
    assert threshold_rank(6, 0.5) == 3
    assert top_c_mask(scores.abs(), 0.5).tolist() == [[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
    # c 0.1 over 6: k = 1 + round(0.9 * 5) = 1 + round(4.5) = 5: only 0.5 and 0.9 (>= the 5th, 0.5)
    assert threshold_rank(6, 0.1) == 5
    assert top_c_mask(scores.abs(), 0.1).tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    # c 1: k = 1, every weight; c 0: k = 6, the largest only
    assert top_c_mask(scores.abs(), 1.0).sum() == 6
    assert top_c_mask(scores.abs(), 0.0).tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_ties_at_the_threshold_are_all_kept() -> None:
    # c 0.5 over 4: k = 1 + round(1.5) = 3; the 3rd smallest is 0.4, and both 0.4 are kept
    assert top_c_mask(torch.tensor([0.1, 0.4, 0.4, 0.2]), 0.5).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_a_large_layer_keeps_c_of_its_weights() -> None:
    scores = torch.randn(100, 784, generator=torch.Generator().manual_seed(0))
    # 78400 distinct scores at c 0.5: k = 1 + round(0.5 * 78399) = 39201 (39199.5 -> 39200), kept 78400 - 39200
    assert int(top_c_mask(scores.abs(), 0.5).sum()) == 39200


def test_the_gradient_goes_straight_through_to_the_scores() -> None:
    scores = torch.tensor([0.3, -0.9, 0.1, -0.5], requires_grad=True)
    weight = torch.tensor([2.0, 3.0, 5.0, 7.0])
    mask = straight_through_mask(scores, 0.5)  # k = 1 + round(1.5) = 3: |-0.5| and |-0.9| kept
    assert mask.tolist() == [0.0, 1.0, 0.0, 1.0]
    (weight * mask).sum().backward()
    # d/d mask = weight, passed unchanged to |scores|, then times sign(scores): masked-out scores learn too
    assert scores.grad is not None and scores.grad.tolist() == [2.0, -3.0, 5.0, -7.0]


def test_masks_are_packed_eight_to_a_byte() -> None:
    mask = torch.tensor([1, 0, 1, 1, 0, 0, 0, 1, 1], dtype=torch.bool)
    packed = pack_mask(mask)
    assert packed.dtype == torch.uint8 and packed.tolist() == [0b10110001, 0b10000000]
    assert torch.equal(unpack_mask(packed, (9,)), mask)
    big = torch.rand(3, 5, 7, generator=torch.Generator().manual_seed(1)) > 0.5
    assert pack_mask(big).numel() == 14 and torch.equal(unpack_mask(pack_mask(big), big.shape), big)


def test_the_used_weights_are_the_union_of_the_masks() -> None:
    used = torch.tensor([True, False, False, True])
    assert union(used, torch.tensor([0.0, 1.0, 0.0, 1.0])).tolist() == [True, True, False, True]


def test_layers_are_masked_by_the_scores_and_heads_are_not() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    network = make_approach("sgd", spec, tasks).network
    gates = mask_layers(network, 0.5)
    assert sorted(gates) == ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight"]
    layer = network.layers[1]
    gates["layers.1.weight"].fixed = None
    expected = original(network, "layers.1.weight") * top_c_mask(gates["layers.1.weight"].scores.abs(), 0.5)
    assert torch.equal(layer.weight, expected)
    assert not hasattr(network.heads[0], "parametrizations")


# ---------------------------------------------------------------------------- the method on the tiny tasks
@pytest.fixture(scope="module", params=["mlp", "alexnet"])
def run(request: pytest.FixtureRequest) -> Learned:
    return learned("wsn", request.param)


def masks_of(run: Learned, stage: int, task: int) -> dict[str, torch.Tensor]:
    """Task `task`'s stored masks in the checkpoint after stage `stage`, unpacked."""
    gates = run.approach.gates
    return {name: unpack_mask(packed, gates[name].scores.shape)
            for name, packed in run.states[stage]["extra"]["task_masks"][task].items()}


def weight_key(name: str) -> str:
    module, tensor = name.rsplit(".", 1)
    return f"{module}.parametrizations.{tensor}.original"


def test_the_weights_of_earlier_masks_stay_bit_identical_and_the_others_learn(run: Learned) -> None:
    for stage in range(2):
        used = {name: torch.zeros_like(mask) for name, mask in masks_of(run, stage, 0).items()}
        for task in range(stage + 1):
            used = {name: used[name] | mask for name, mask in masks_of(run, stage, task).items()}
        before, final = run.weights(stage), run.weights(2)
        for name, mask in used.items():
            key = weight_key(name)
            assert torch.equal(final[key][mask], before[key][mask]), (stage, name)
        free = [not torch.equal(final[weight_key(name)][~mask], before[weight_key(name)][~mask])
                for name, mask in used.items() if (~mask).any()]
        assert any(free), stage  # the weights no task used did change: the test can fail


def test_earlier_tasks_outputs_are_bit_identical_after_later_tasks(run: Learned) -> None:
    for stage, outputs in enumerate(run.outputs):
        for task, output in enumerate(outputs):
            assert torch.equal(output, run.outputs[-1][task]), (stage, task)
    assert run.accuracy[-1][0] == run.accuracy[0][0]


def test_each_task_stores_its_own_top_c_mask_bit_packed(run: Learned) -> None:
    approach = run.approach
    first, second = masks_of(run, 2, 0), masks_of(run, 2, 1)
    for name, mask in first.items():
        n = mask.numel()
        assert int(mask.sum()) == n - threshold_rank(n, 0.5) + 1, name  # continuous scores: no ties
    if run.network == "mlp":  # the tiny conv net's scores move too little under plain SGD (see below)
        assert any(not torch.equal(first[name], second[name]) for name in first)  # the scores learned
    packed_bytes = sum(-(-gate.scores.numel() // 8) for gate in approach.gates.values())
    assert approach.memory_usage() == (0, 3 * packed_bytes)
    # the stored mask of the last task is its last training step's
    assert all(torch.equal(masks_of(run, 2, 2)[name], gate.last.bool()) for name, gate in approach.gates.items())


def test_a_task_is_predicted_with_its_stored_mask(run: Learned) -> None:
    from torch.func import functional_call

    approach = run.approach
    approach.network.eval()
    weights = run.weights(2)
    masked = {}
    for name, mask in masks_of(run, 2, 0).items():
        masked[name] = weights[weight_key(name)] * mask
    approach.set_masks({name: torch.ones_like(mask) for name, mask in masks_of(run, 2, 0).items()})
    try:  # every mask 1: the tensors computed by hand with task 1's mask are what the body computes with
        with torch.no_grad():
            by_hand = functional_call(approach.network, {weight_key(k): v for k, v in masked.items()},
                                      (inputs_of(run.tasks, 0), 0))
    finally:
        approach.set_masks(None)
    assert torch.equal(by_hand, run.outputs[-1][0])


def test_capacity_monitoring_counts_the_masks(run: Learned) -> None:
    approach = run.approach
    rows = approach.monitoring(2, run.tasks)["wsn_capacity"]
    last, before = masks_of(run, 2, 2), masks_of(run, 2, 0)
    for task in (1,):
        before = {name: before[name] | mask for name, mask in masks_of(run, 2, task).items()}
    for row in rows[:-1]:
        name = row["layer"]
        assert row["in_mask"] == int(last[name].sum())
        assert row["reused"] == int((last[name] & before[name]).sum())
        assert row["used"] == int((before[name] | last[name]).sum())
    assert rows[-1]["layer"] == "total" and rows[-1]["weights"] == sum(row["weights"] for row in rows[:-1])


def test_a_checkpoint_restores_the_used_weights() -> None:
    run = learned("wsn", "mlp")
    spec = tiny_spec("mlp")
    fresh = make_approach("wsn", spec, run.tasks)
    fresh.load_state(run.states[1])
    used = {name: masks_of(run, 1, 0)[name] | masks_of(run, 1, 1)[name] for name in fresh.gates}
    assert all(torch.equal(fresh.used[name], used[name]) for name in used)


def test_the_conv_net_learns_its_scores_under_the_authors_adam() -> None:
    """Plain SGD at lr 0.05 barely moves the scores (their gradient is the weight times the output's), so the
    masks stay those of the initial scores; Adam at the authors' lr 1e-3 (scripts/wsn/*.sh) moves each score by
    about the lr per step, and the tiny conv net learns task 1 above chance."""
    spec = tiny_spec("alexnet")
    spec = replace(spec, training=replace(spec.training, optimizer="adam", lr=0.001, max_epochs=6))
    tasks = tiny_tasks(spec)
    approach = make_approach("wsn", spec, tasks)
    initial = {name: gate.current_mask() for name, gate in approach.gates.items()}
    approach.learn_task(0, tasks)
    assert approach.evaluate(tasks[0].test, 0).accuracy > 1.5 / tasks[0].n_classes
    assert any(not torch.equal(approach.mask_of(0)[name], mask) for name, mask in initial.items())


# ---------------------------------------------------------------------------- refusals
def test_weight_decay_and_resnet18_are_refused() -> None:
    spec = tiny_spec("mlp")
    decayed = replace(spec, training=replace(spec.training, weight_decay=1e-4))
    with pytest.raises(SpecError, match="weight_decay"):
        resolve(decayed, "wsn")
    with pytest.raises(SpecError, match="batch norm"):
        make_approach("wsn", tiny_resnet_spec(), tiny_tasks(tiny_resnet_spec()))
