"""HAT wired into the training loop: gradient masks, protection of earlier tasks, state, monitoring."""

from __future__ import annotations

import copy
import io
from dataclasses import replace

import numpy as np
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.hat import functions as hf
from clbench.approaches.hat.approach import Hat, HatHyperparameters
from clbench.approaches.hat.network import GatedNet, HatAlexNet, HatMLP
from clbench.approaches.resolution import resolve
from clbench.data.batches import TaskSequence
from clbench.spec import load_benchmark

NETWORKS = ["mlp", "alexnet"]


def tiny_hat(network: str, seed: int = 0, epochs: int = TINY_TRAINING.max_epochs,
             **hparams: object) -> tuple[Hat, TaskSequence]:
    spec = tiny_spec(network, training=replace(TINY_TRAINING, max_epochs=epochs))
    tasks = tiny_tasks(spec)
    return make_approach("hat", spec, tasks, seed, **hparams), tasks


def fc_input_owner(net: HatAlexNet) -> torch.Tensor:
    """Brute force: which conv channel each input column of the first fc layer belongs to.

    Doubles one channel's mask of the last conv layer at a time and records which fc inputs change (on a copy
    with positive conv weights and biases, so that no ReLU is dead and every position responds).
    """
    net = copy.deepcopy(net).eval()
    with torch.no_grad():
        for conv in net.convs:
            conv.weight.abs_()
            conv.bias.fill_(1.0)
    captured: list[torch.Tensor] = []
    hook = net.fcs[0].register_forward_hook(lambda module, inputs, output: captured.append(inputs[0]))
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    n_convs = len(net.convs)
    ones = [torch.ones(embedding.shape) for embedding in net.embeddings[0]]
    with torch.no_grad():
        net.gated_features(x, ones)
        base = captured.pop()
        owner = torch.full((base.shape[1],), -1)
        for channel in range(ones[n_convs - 1].shape[0]):
            masks = [mask.clone() for mask in ones]
            masks[n_convs - 1][channel] = 2.0
            net.gated_features(x, masks)
            changed = (captured.pop() != base).any(0)  # (F,)
            assert (owner[changed] == -1).all(), "a position changed with two channels"
            owner[changed] = channel
    hook.remove()
    assert (owner >= 0).all(), "a position belongs to no channel (dead unit): use another input"
    return owner


def test_conv_to_fc_mapping_matches_brute_force() -> None:
    approach, _ = tiny_hat("alexnet")
    net = approach.network
    assert isinstance(net, HatAlexNet)
    owner = fc_input_owner(net)
    conv_channels = net.convs[-1].out_channels
    fc_shape = net.layer_shapes()[len(net.convs)]
    assert fc_shape.input_repeat == net.spatial_side**2
    assert torch.equal(hf.expand_input_mask(torch.arange(conv_channels), fc_shape.input_repeat), owner)
    # the weight mask of fc1 is min(a_fc_i, a_conv_owner(k))
    masks = [torch.rand(embedding.shape, generator=torch.Generator().manual_seed(i))
             for i, embedding in enumerate(net.embeddings[0])]
    fc_mask = hf.weight_masks(masks, net.layer_shapes())[len(net.convs)]
    expected = torch.minimum(masks[len(net.convs)][:, None], masks[len(net.convs) - 1][owner][None, :])
    assert torch.equal(fc_mask, expected)


def binary_masks(net: GatedNet, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [(torch.rand(embedding.shape, generator=generator) < 0.5).float() for embedding in net.embeddings[0]]


def input_owner(net: GatedNet, layer: int) -> torch.Tensor | None:
    """The previous-layer unit of each input column of gated layer `layer` (None for the first layer)."""
    if layer == 0:
        return None
    if isinstance(net, HatAlexNet) and layer == len(net.convs):
        return fc_input_owner(net)
    return torch.arange(net.gated_modules()[layer - 1].weight.shape[0])


@pytest.mark.parametrize("network", NETWORKS)
def test_gradient_masks_zero_protected_weights_only(network: str) -> None:
    approach, tasks = tiny_hat(network)
    net = approach.network
    cumulative = binary_masks(net, seed=1)
    approach.load_extra_state({"cumulative_masks": cumulative, "task_masks": [cumulative]})
    batch = tasks[1].train.batch(torch.arange(32))
    step = StepInfo(stage=1, epoch=0, batch=1, n_batches=4)
    net.train()
    approach.loss(batch, step).backward()
    raw = {name: p.grad.clone() for name, p in net.named_parameters() if p.grad is not None}
    approach.before_step(step)
    grads = {name: p.grad for name, p in net.named_parameters() if p.grad is not None}
    assert not any(name.startswith("embeddings.0.") or name.startswith("heads.0.") for name in grads)
    for layer, module in enumerate(net.gated_modules()):
        out = cumulative[layer]
        owner = input_owner(net, layer)
        protected = out.view(-1, *(1,) * (module.weight.dim() - 1)).expand_as(module.weight) == 1
        if owner is not None:
            incoming = cumulative[layer - 1][owner].view(1, -1, *(1,) * (module.weight.dim() - 2))
            protected = protected & (incoming == 1)
        weight, bias = module.weight.grad, module.bias.grad
        raw_weight, raw_bias = raw_grad(raw, net, module.weight), raw_grad(raw, net, module.bias)
        assert protected.any() and (~protected).any()
        assert (raw_weight[protected] != 0).float().mean() > 0.3  # the mask has something to remove
        assert (weight[protected] == 0).all()
        assert torch.equal(weight[~protected], raw_weight[~protected])
        assert (bias[out == 1] == 0).all()
        assert torch.equal(bias[out == 0], raw_bias[out == 0])
    for name in ("heads.1.weight", "heads.1.bias"):
        assert torch.equal(grads[name], raw[name])
    scale = approach.scale(step)
    for index, embedding in enumerate(net.embeddings[1]):
        factor = hf.compensation_factor(embedding.detach(), scale, approach.hparams.smax)
        assert torch.allclose(embedding.grad, raw[f"embeddings.1.{index}"] * factor)


def raw_grad(raw: dict[str, torch.Tensor], net: GatedNet, parameter: torch.nn.Parameter) -> torch.Tensor:
    name = next(name for name, p in net.named_parameters() if p is parameter)
    return raw[name]


def test_first_task_has_no_gradient_mask_and_trains_only_its_embedding() -> None:
    approach, tasks = tiny_hat("mlp")
    net = approach.network
    trainable = {id(p) for p in approach.trainable_parameters(0)}
    assert all(id(p) in trainable for p in net.embeddings[0])
    assert not any(id(p) in trainable for task in (1, 2) for p in net.embeddings[task])
    step = StepInfo(stage=0, epoch=0, batch=0, n_batches=3)
    approach.loss(tasks[0].train.batch(torch.arange(16)), step).backward()
    raw = net.layers[1].weight.grad.clone()
    approach.before_step(step)
    assert torch.equal(net.layers[1].weight.grad, raw)


def test_after_step_clamps_only_the_current_embedding() -> None:
    approach, _ = tiny_hat("mlp")
    with torch.no_grad():
        for task in (0, 1):
            approach.network.embeddings[task][0].fill_(10.0)
    approach.after_step(StepInfo(stage=1, epoch=0, batch=0, n_batches=1))
    assert (approach.network.embeddings[1][0] == 6.0).all()
    assert (approach.network.embeddings[0][0] == 10.0).all()


def test_training_scale_is_annealed_and_evaluation_uses_smax() -> None:
    approach, tasks = tiny_hat("mlp", smax=50.0)
    assert approach.scale(StepInfo(0, 0, 0, 5)).item() == pytest.approx(1 / 50)
    assert approach.scale(StepInfo(0, 0, 4, 5)).item() == pytest.approx(50.0)
    x = tasks[0].test.batch(torch.arange(8)).inputs
    net = approach.network
    net.eval()
    with torch.no_grad():
        expected = net.heads[0](net.gated_features(x, [torch.sigmoid(50 * e) for e in net.embeddings[0]]))
        assert torch.equal(approach.predict(x, 0), expected)
        assert not torch.equal(approach.predict(x, 0), net(x, 0, 1.0))


def test_validation_loss_includes_the_regulariser() -> None:
    approach, tasks = tiny_hat("mlp", c=0.0)
    n = len(tasks[0].valid)
    batch = tasks[0].valid.batch(torch.arange(n))
    approach.network.eval()
    with torch.no_grad():
        plain, correct = approach.validation_loss(batch, 0)
        logits = approach.predict(batch.inputs, 0)
        assert plain.item() == pytest.approx(functional.cross_entropy(logits, batch.targets, reduction="sum").item())
        approach.hparams = HatHyperparameters(c=2.0)
        regularised, _ = approach.validation_loss(batch, 0)
        r = hf.attention_regulariser(approach.network.masks(0), None)
    assert regularised.item() == pytest.approx(plain.item() + 2.0 * r.item() * n, rel=1e-6)
    assert correct.item() == (logits.argmax(1) == batch.targets).sum().item()


def test_the_regulariser_uses_the_cumulative_masks_of_the_tasks_learned_so_far() -> None:
    """The weights of Eq. 5 are computed once per task: after each task (and after a restore) they must be
    those of the new a^{<=t}, i.e. the training loss's R equals Eq. 5 computed from scratch."""
    approach, tasks = tiny_hat("mlp", epochs=1)
    for stage in range(2):
        masks = approach.network.masks(stage, 3.0)
        expected = hf.attention_regulariser(masks, approach.cumulative)
        assert torch.equal(approach.regulariser(masks), approach.hparams.c * expected)
        approach.learn_task(stage, tasks)
    assert approach.cumulative is not None and float(approach.regulariser_weights.free.min()) < 1.0
    restored, _ = tiny_hat("mlp", epochs=1)
    restored.load_state(approach.state())
    masks = approach.network.masks(2, 3.0)
    assert torch.equal(restored.regulariser(masks), approach.regulariser(masks))
    assert torch.equal(restored.regulariser(masks), approach.hparams.c * hf.attention_regulariser(
        masks, approach.cumulative))


@pytest.mark.parametrize("network", NETWORKS)
def test_one_gate_over_all_layers_equals_a_gate_per_layer(network: str) -> None:
    approach, _ = tiny_hat(network)
    scale = torch.tensor(7.5)
    embeddings = approach.network.embedding_parameters(1)
    masks = approach.network.masks(1, scale)
    assert [m.shape for m in masks] == [e.shape for e in embeddings]
    # equal up to the last bit: a vectorised sigmoid rounds some elements differently from its scalar tail
    assert all(torch.allclose(m, hf.gate(e, scale), rtol=1e-6, atol=0) for m, e in zip(masks, embeddings))


def test_embedding_initialisation() -> None:
    approach, _ = tiny_hat("mlp", embedding_init="uniform", embedding_init_scale=3.0)
    values = torch.cat([e.detach() for task in approach.network.embeddings for e in task])
    assert values.min() >= 0 and values.max() <= 3.0 and values.max() > 2.0
    approach, _ = tiny_hat("mlp")
    values = torch.cat([e.detach() for task in approach.network.embeddings for e in task])
    assert values.min() < -1 and 0.8 < values.std() < 1.2


# ---------------------------------------------------------------------------------------------- protection
@pytest.mark.parametrize("network", NETWORKS)
def test_earlier_task_is_exactly_protected(network: str) -> None:
    approach, tasks = tiny_hat(network, smax=1000.0)
    net = approach.network
    approach.learn_task(0, tasks)
    before = approach.evaluate(tasks[0].test, 0)
    logits_before = approach.predict(tasks[0].test.batch(torch.arange(len(tasks[0].test))).inputs, 0)
    weights = {name: p.detach().clone() for name, p in net.named_parameters()}
    mask = approach.task_masks[0]
    assert all(((m < 1e-6) | (m > 1 - 1e-6)).all() for m in mask), "task-1 mask should be binary at smax"
    assert torch.equal(approach.cumulative[0], mask[0])
    protected = [m == 1 for m in hf.weight_masks(approach.cumulative, net.layer_shapes())]

    approach.learn_task(1, tasks)

    after = approach.evaluate(tasks[0].test, 0)
    assert after.accuracy == before.accuracy
    logits_after = approach.predict(tasks[0].test.batch(torch.arange(len(tasks[0].test))).inputs, 0)
    assert torch.allclose(logits_after, logits_before, atol=1e-5)
    changed = 0
    for layer, module in enumerate(net.gated_modules()):
        name = next(n for n, p in net.named_parameters() if p is module.weight)[: -len(".weight")]
        old_weight, old_bias = weights[f"{name}.weight"], weights[f"{name}.bias"]
        assert protected[layer].any()
        assert torch.equal(module.weight.detach()[protected[layer]], old_weight[protected[layer]])
        assert torch.equal(module.bias.detach()[mask[layer] == 1], old_bias[mask[layer] == 1])
        changed += int((module.weight.detach() != old_weight).sum())
    assert changed > 0, "task 2 should have trained the free weights"
    for name in ("heads.0.weight", "heads.0.bias", *(f"embeddings.0.{i}" for i in range(len(mask)))):
        assert torch.equal(dict(net.named_parameters())[name].detach(), weights[name])
    assert not torch.equal(net.heads[1].weight.detach(), weights["heads.1.weight"])
    assert len(approach.task_masks) == 2
    for cumulative, first, second in zip(approach.cumulative, *approach.task_masks):
        assert torch.equal(cumulative, torch.maximum(first, second))


# ---------------------------------------------------------------------------------------------- state
@pytest.mark.parametrize("network", NETWORKS)
def test_state_round_trip(network: str) -> None:
    approach, tasks = tiny_hat(network, epochs=1)
    approach.learn_task(0, tasks)
    approach.learn_task(1, tasks)
    buffer = io.BytesIO()
    torch.save(approach.state(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    fresh, _ = tiny_hat(network, seed=1, epochs=1)
    x = tasks[0].test.batch(torch.arange(len(tasks[0].test))).inputs
    assert not torch.equal(fresh.predict(x, 0), approach.predict(x, 0))
    fresh.load_state(state)
    approach.network.eval()
    fresh.network.eval()
    for task in (0, 1):
        inputs = tasks[task].test.batch(torch.arange(len(tasks[task].test))).inputs
        assert torch.equal(fresh.predict(inputs, task), approach.predict(inputs, task))
    assert all(torch.equal(a, b) for a, b in zip(fresh.cumulative, approach.cumulative))
    assert all(torch.equal(a, b) for pair_a, pair_b in zip(fresh.multipliers, approach.multipliers)
               for a, b in zip(pair_a, pair_b))
    assert fresh.monitoring(1, tasks)["hat_capacity"] == approach.monitoring(1, tasks)["hat_capacity"]


def test_fresh_state_round_trip_before_any_task() -> None:
    approach, _ = tiny_hat("mlp")
    fresh, _ = tiny_hat("mlp", seed=1)
    fresh.load_state(approach.state())
    assert fresh.cumulative is None and fresh.task_masks == [] and fresh.multipliers == []


# ---------------------------------------------------------------------------------------------- monitoring
def unit_mask(size: int, on: list[int]) -> torch.Tensor:
    mask = torch.zeros(size)
    mask[on] = 1.0
    return mask


def test_monitoring_tables_hand_made() -> None:
    approach, tasks = tiny_hat("mlp")  # 784 -> 32 -> 32
    first = [unit_mask(32, list(range(8))), unit_mask(32, [0, 1, 2, 3])]
    second = [unit_mask(32, list(range(4, 12))), unit_mask(32, [0, 1, 8, 9])]
    second[0][20] = 0.25  # soft: not counted at threshold 0.5
    cumulative = [torch.maximum(a, b) for a, b in zip(first, second)]
    approach.load_extra_state({"cumulative_masks": cumulative, "task_masks": [first, second]})
    tables = approach.monitoring(1, tasks)

    masks = tables["hat_masks"]
    assert len(masks) == 64 and {row["task"] for row in masks} == {2}
    fc1 = [row["attention"] for row in masks if row["layer"] == "fc1"]
    assert np.array_equal(np.array(fc1), second[0].numpy()) and isinstance(fc1[0], np.float32)
    assert [row["unit"] for row in masks if row["layer"] == "fc2"] == list(range(32))

    capacity = {(row["mask"], row["layer"]): (row["used"], row["weights"], row["fraction"])
                for row in tables["hat_capacity"]}
    assert len(capacity) == 6
    assert capacity["cumulative", "fc1"][:2] == (12 * 784, 32 * 784)  # units 0..11
    assert capacity["cumulative", "fc2"][:2] == (6 * 12, 32 * 32)  # out {0..3, 8, 9} x in {0..11}
    assert capacity["task", "fc1"][:2] == (8 * 784, 32 * 784)
    assert capacity["task", "fc2"][:2] == (4 * 8, 32 * 32)  # out {0, 1, 8, 9} x in {4..11}
    total = capacity["cumulative", "total"]
    assert total[:2] == (12 * 784 + 72, 32 * 784 + 1024)
    assert total[2] == pytest.approx((12 * 784 + 72) / (32 * 784 + 1024))

    (reuse,) = tables["hat_reuse"]
    used = 8 * 784 + 4 * 8  # task 1: fc1 units 0..7, fc2 out 0..3 x in 0..7
    shared = 4 * 784 + 2 * 4  # fc1 units 4..7; fc2 out {0, 1} x in {4..7}
    assert (reuse["task"], reuse["later_task"], reuse["shared"], reuse["used"]) == (1, 2, shared, used)
    assert reuse["fraction"] == pytest.approx(shared / used)

    stage0 = approach.monitoring(0, tasks)  # as stored after the first task: a^{<=1} = a^1
    assert "hat_reuse" not in stage0 and {row["task"] for row in stage0["hat_masks"]} == {1}
    rows = {(row["mask"], row["layer"]): row["used"] for row in stage0["hat_capacity"]}
    assert rows["cumulative", "fc1"] == rows["task", "fc1"] == 8 * 784
    assert rows["cumulative", "fc2"] == rows["task", "fc2"] == 4 * 8


def test_monitoring_after_training_three_tasks_covers_all_pairs() -> None:
    approach, tasks = tiny_hat("mlp", epochs=2)
    for stage in range(3):
        approach.learn_task(stage, tasks)
    tables = approach.monitoring(2, tasks)
    assert [(row["task"], row["later_task"]) for row in tables["hat_reuse"]] == [(1, 2), (1, 3), (2, 3)]
    cumulative_total = next(row for row in tables["hat_capacity"] if row == {**row, "mask": "cumulative",
                                                                             "layer": "total"})
    task_total = next(row for row in tables["hat_capacity"] if row == {**row, "mask": "task", "layer": "total"})
    assert 0 < task_total["used"] <= cumulative_total["used"] <= cumulative_total["weights"]


# ---------------------------------------------------------------------------------------------- config
def test_hyperparameters_from_the_benchmark_specs() -> None:
    expected = {"mnist2": (400.0, 0.1), "pmnist": (200.0, 0.5), "mixture8": (400.0, 0.75),
                "cifar-incremental": (400.0, 0.75)}
    for name, (smax, c) in expected.items():
        resolved = resolve(load_benchmark(name), "hat")
        assert (resolved.hyperparameters.smax, resolved.hyperparameters.c) == (smax, c), name
        assert resolved.hyperparameters.clip_grad_norm == 10000.0
    assert resolve(load_benchmark("mnist2"), "hat").training.max_epochs == 50
    compression = resolve(load_benchmark("mixture8", ["hat.c=1.5", "hat.embedding_init=uniform"]), "hat")
    assert compression.hyperparameters.c == 1.5 and compression.hyperparameters.embedding_init == "uniform"
    assert compression.hyperparameters.embedding_init_scale == 2.0


def test_gated_networks_share_the_base_structure() -> None:
    approach, _ = tiny_hat("mlp")
    assert isinstance(approach.network, HatMLP)
    names = [name for name, _ in approach.network.named_parameters() if not name.startswith("embeddings.")]
    from clbench.nets import build_network

    base = build_network(tiny_spec("mlp").network, (1, 28, 28), (4, 4, 4))
    assert names == [name for name, _ in base.named_parameters()]
    assert [shape.name for shape in approach.network.layer_shapes()] == ["fc1", "fc2"]
    with pytest.raises(TypeError):
        approach.network.features(torch.zeros(2, 784))
