"""EWC, IMM (mean, mode), LwF and LFL as approaches: their mechanics on tiny synthetic benchmarks."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.lfl import penultimate
from clbench.approaches.parameters import named_body_parameters
from clbench.approaches.regularizers import detached_copy, imm_mean_merge, imm_mode_merge, task_fisher
from clbench.approaches.resolution import resolve
from clbench.spec import benchmark_names, load_benchmark

BASELINES = ("ewc", "imm-mean", "imm-mode", "lwf", "lfl")


QUICK = replace(TINY_TRAINING, max_epochs=2)


@pytest.fixture(scope="module")
def mlp():
    """The tiny MLP benchmark with 2 epochs per task: enough for the mechanics."""
    spec = tiny_spec("mlp", training=QUICK)
    return spec, tiny_tasks(spec)


def assert_dicts_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name])


def perturb(parameter: torch.nn.Parameter, amount: float = 0.1) -> None:
    with torch.no_grad():
        parameter.add_(amount)


def spy_on_end_task(approach) -> dict[str, torch.Tensor]:
    """Record the network's weights just before `end_task` runs (the task's trained, restored weights)."""
    recorded: dict[str, torch.Tensor] = {}
    real = approach.end_task

    def end_task(stage, tasks):
        recorded.clear()
        recorded.update(approach.snapshot())
        real(stage, tasks)

    approach.end_task = end_task
    return recorded


def value(penalty: torch.Tensor | float) -> float:
    return float(torch.as_tensor(penalty).detach())


def first_batch(tasks, stage: int, size: int = 16):
    return tasks[stage].train.batch(slice(0, size))


# ---------------------------------------------------------------------------------------------- defaults
def test_defaults_are_the_reference_values_and_every_benchmark_resolves_them() -> None:
    spec = tiny_spec("mlp")
    defaults = {method: resolve(spec, method).hyperparameters for method in BASELINES}
    assert (defaults["ewc"].lamb, defaults["ewc"].clip_grad_norm) == (5000.0, 100.0)
    assert (defaults["imm-mean"].regularization, defaults["imm-mean"].clip_grad_norm) == (1e-4, 10000.0)
    assert (defaults["imm-mode"].regularization, defaults["imm-mode"].clip_grad_norm) == (0.01, 1000.0)
    assert (defaults["lwf"].lamb, defaults["lwf"].temperature, defaults["lwf"].clip_grad_norm) == (2.0, 1.0, 100.0)
    assert (defaults["lfl"].lamb, defaults["lfl"].clip_grad_norm) == (0.05, 200.0)
    for name in benchmark_names():
        benchmark = load_benchmark(name)
        for method in BASELINES:
            assert resolve(benchmark, method).hyperparameters == defaults[method], (name, method)


# ---------------------------------------------------------------------------------------------- EWC
def test_ewc_penalty_fisher_merge_and_anchor(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("ewc", spec, tasks)
    approach.learn_task(0, tasks)
    assert value(approach.penalty(0)) == 0.0
    assert value(approach.penalty(1)) == 0.0  # at the anchor
    trained = approach.snapshot()
    perturb(approach.multihead.layers[0].weight)
    assert value(approach.penalty(1)) > 0.0
    approach.restore(trained)
    assert all(bool((fisher >= 0).all()) for fisher in approach.fisher.values())
    assert float(approach.fisher["heads.0.weight"].sum()) > 0.0
    assert float(approach.fisher["heads.1.weight"].abs().sum()) == 0.0  # a future head is free
    first = detached_copy(approach.fisher)
    approach.learn_task(1, tasks)
    parameters = dict(approach.network.named_parameters())
    second = task_fisher(approach.network, parameters, tasks[1].train, 1, 20, True)
    assert_dicts_close(approach.fisher, {name: (second[name] + first[name]) / 2 for name in first})
    assert_dicts_close(approach.anchor, detached_copy(parameters))
    sgd = make_approach("sgd", spec, tasks)
    sgd.learn_task(0, tasks)
    assert_dicts_close(sgd.snapshot(), trained)  # same start: only the penalty differs on task 2
    sgd.learn_task(1, tasks)
    drift = {name: sum(float((net.snapshot()[key] - trained[key]).pow(2).sum()) for key in first
                       if not key.startswith("heads."))
             for name, net in (("ewc", approach), ("sgd", sgd))}
    assert drift["ewc"] < drift["sgd"]


# ---------------------------------------------------------------------------------------------- IMM
def test_imm_mean_writes_the_average_of_task_trained_bodies_into_the_network(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("imm-mean", spec, tasks)
    trained = spy_on_end_task(approach)
    approach.learn_task(0, tasks)
    first = detached_copy(approach.anchor)
    assert_dicts_close(first, detached_copy(dict(named_body_parameters(approach.multihead))))
    check_l2_transfer(approach)
    approach.learn_task(1, tasks)
    body = dict(named_body_parameters(approach.multihead))
    expected = imm_mean_merge({name: trained[name] for name in body}, first, previous_tasks=1)
    assert_dicts_close(detached_copy(body), expected)
    assert_dicts_close(approach.anchor, expected)
    heads = {name: value for name, value in approach.snapshot().items() if name.startswith("heads.")}
    assert_dicts_close(heads, {name: trained[name] for name in heads})  # heads are not averaged
    assert any(not torch.equal(expected[name], trained[name]) for name in expected)  # it really merged
    assert_evaluates_as(approach, {**trained, **expected}, tasks)


def check_l2_transfer(approach) -> None:
    """After task 1: L2-transfer is 0 at the anchor, ignores the heads, and is regularization/2 * ||delta||^2."""
    trained = approach.snapshot()
    assert value(approach.penalty(0)) == 0.0
    assert value(approach.penalty(1)) == 0.0
    perturb(approach.multihead.heads[1].weight, 1.0)
    assert value(approach.penalty(1)) == 0.0
    perturb(approach.multihead.layers[1].bias, 1.0)
    expected = approach.hparams.regularization / 2 * approach.multihead.layers[1].bias.numel()
    assert value(approach.penalty(1)) == pytest.approx(expected)
    approach.restore(trained)


def assert_evaluates_as(approach, weights: dict[str, torch.Tensor], tasks) -> None:
    """The approach's evaluation is that of a network holding `weights`."""
    reference = approach.build_network()
    reference.load_state_dict(weights)
    reference.eval()
    for task in range(2):
        test = tasks[task].test
        batch = test.batch(slice(0, len(test)))
        with torch.no_grad():
            predictions = reference(batch.inputs, task).argmax(1)
        expected = float((predictions == batch.targets).double().mean())
        assert approach.evaluate(test, task).accuracy == pytest.approx(expected, abs=1e-12)
        with torch.no_grad():
            assert torch.equal(approach.predict(batch.inputs, task).argmax(1), predictions)


def test_imm_mode_writes_the_fisher_weighted_merge_into_the_network(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("imm-mode", spec, tasks)
    trained = spy_on_end_task(approach)
    approach.learn_task(0, tasks)
    first, precision = detached_copy(approach.anchor), detached_copy(approach.precision)
    assert_dicts_close(first, detached_copy(dict(named_body_parameters(approach.multihead))))
    check_l2_transfer(approach)
    approach.learn_task(1, tasks)
    network = approach.build_network()
    network.load_state_dict(trained)
    fisher = task_fisher(network, dict(named_body_parameters(network)), tasks[1].train, 1, 20, True)
    current = {name: trained[name] for name in fisher}
    expected, expected_precision = imm_mode_merge(first, precision, current, fisher, 1e-8)
    assert_dicts_close(detached_copy(dict(named_body_parameters(approach.multihead))), expected)
    assert_dicts_close(approach.precision, expected_precision)
    assert any(not torch.equal(expected[name], trained[name]) for name in expected)  # it really merged
    assert_evaluates_as(approach, {**trained, **expected}, tasks)


# ---------------------------------------------------------------------------------------------- LwF
def test_lwf_distillation_is_zero_on_the_first_task(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("lwf", spec, tasks)
    batch = first_batch(tasks, 0)
    features = approach.multihead.features(batch.inputs)
    assert torch.equal(approach.distillation(batch.inputs, features, 0), torch.zeros(len(batch.targets)))
    cross_entropy = functional.cross_entropy(approach.network(batch.inputs, 0), batch.targets)
    assert torch.equal(approach.loss(batch, StepInfo(0, 0, 0, 1)), cross_entropy)


def test_lwf_distillation_grows_when_the_model_changes_and_trains_body_and_old_heads(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("lwf", spec, tasks)
    approach.learn_task(0, tasks)
    batch = first_batch(tasks, 1)
    net = approach.multihead
    unchanged = approach.distillation(batch.inputs, net.features(batch.inputs), 1)
    perturb(net.layers[1].bias, 0.1)
    changed = approach.distillation(batch.inputs, net.features(batch.inputs), 1)
    assert value(changed.mean()) > value(unchanged.mean()) + 1e-4
    step = StepInfo(1, 0, 0, 1)
    gradients = {}
    for name, loss in (("lwf", lambda: approach.loss(batch, step)),
                       ("cross-entropy", lambda: functional.cross_entropy(net(batch.inputs, 1), batch.targets))):
        net.zero_grad()
        loss().backward()
        gradients[name] = {key: None if p.grad is None else p.grad.clone() for key, p in net.named_parameters()}
    difference = gradients["lwf"]["layers.0.weight"] - gradients["cross-entropy"]["layers.0.weight"]
    assert float(difference.abs().sum()) > 0.0  # the distillation's gradient reaches the shared body
    assert float(gradients["lwf"]["heads.0.weight"].abs().sum()) > 0.0  # and the earlier head
    torch.testing.assert_close(gradients["lwf"]["heads.1.weight"], gradients["cross-entropy"]["heads.1.weight"])


# ---------------------------------------------------------------------------------------------- LFL
@pytest.mark.parametrize("network", ["mlp", "alexnet"])
def test_penultimate_is_the_body_output_before_its_final_dropout(network: str) -> None:
    spec = tiny_spec(network)
    tasks = tiny_tasks(spec)
    approach = make_approach("lfl", spec, tasks)
    inputs = first_batch(tasks, 0).inputs
    approach.network.eval()
    torch.testing.assert_close(penultimate(approach.multihead, inputs), approach.multihead.features(inputs))
    if network == "alexnet":  # training mode: features = dropout(penultimate), p = 0.5
        approach.network.train()
        torch.manual_seed(0)
        features = approach.multihead.features(inputs)
        torch.manual_seed(0)
        activations = penultimate(approach.multihead, inputs)
        kept = features != 0
        torch.testing.assert_close(features[kept], 2 * activations[kept])
        assert bool((activations > 0).any() & (features == 0).any())


def test_lfl_penalty_is_zero_when_activations_match_and_positive_otherwise(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("lfl", spec, tasks)
    batch = first_batch(tasks, 1)
    features = approach.multihead.features(batch.inputs)
    assert torch.equal(approach.activation_penalty(batch.inputs, features, 0), torch.zeros(len(batch.targets)))
    approach.learn_task(0, tasks)
    approach.network.eval()
    activations = penultimate(approach.multihead, batch.inputs)
    assert value(approach.activation_penalty(batch.inputs, activations, 1).sum()) == 0.0
    perturb(approach.multihead.layers[1].bias, 0.1)
    activations = penultimate(approach.multihead, batch.inputs)
    penalty = approach.activation_penalty(batch.inputs, activations, 1)
    assert value(penalty.sum()) > 0.0
    approach.network.zero_grad()
    penalty.sum().backward()
    assert float(approach.multihead.layers[0].weight.grad.abs().sum()) > 0.0
    batch = first_batch(tasks, 1, size=spec.training.batch_size)  # validation: scaled as a training batch
    with torch.no_grad():
        training = approach.loss(batch, StepInfo(1, 0, 0, 1))
        validation, _ = approach.validation_loss(batch, 1)
    torch.testing.assert_close(validation / len(batch.targets), training)


# ---------------------------------------------------------------------------------------------- all five
def learn_sequence(method: str, spec, tasks):
    approach = make_approach(method, spec, tasks)
    matrix = torch.full((3, 3), float("nan"))
    for stage in range(3):
        approach.learn_task(stage, tasks)
        for task in range(stage + 1):
            matrix[stage, task] = approach.evaluate(tasks[task].test, task).accuracy
    lower = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    assert bool(torch.isfinite(matrix[lower]).all()) and bool(torch.isnan(matrix[~lower]).all())
    return approach, matrix


@pytest.mark.parametrize("method", BASELINES)
def test_learns_a_tiny_mlp_sequence_and_its_state_round_trips(method: str) -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach, matrix = learn_sequence(method, spec, tasks)
    for stage in range(3):  # each task is learned well above chance when it is trained
        assert float(matrix[stage, stage]) > 1.5 / tasks[stage].n_classes
    buffer = io.BytesIO()
    torch.save(approach.state(), buffer)
    buffer.seek(0)
    fresh = make_approach(method, spec, tasks, seed=1)
    fresh.load_state(torch.load(buffer, weights_only=True))
    batch = first_batch(tasks, 2, size=32)
    for network in (approach.network, fresh.network):
        network.eval()
        perturb(network.layers[1].bias, 0.1)  # away from the anchors, where the regularisers are 0
    with torch.no_grad():
        for task in range(3):
            assert torch.equal(approach.predict(batch.inputs, task), fresh.predict(batch.inputs, task))
        step = StepInfo(3, 0, 0, 1)  # as if training a 4th task on task 3's data: every regulariser is on
        loss, fresh_loss = approach.loss(batch, step), fresh.loss(batch, step)
        cross_entropy = functional.cross_entropy(approach.network(batch.inputs, 2), batch.targets)
    assert torch.equal(loss, fresh_loss)
    assert not math.isclose(float(loss), float(cross_entropy))  # the state's regulariser is in the loss


@pytest.mark.parametrize("method", BASELINES)
def test_runs_a_tiny_conv_sequence(method: str) -> None:
    spec = tiny_spec("alexnet", training=replace(TINY_TRAINING, max_epochs=1))
    learn_sequence(method, spec, tiny_tasks(spec))


@pytest.mark.parametrize("method", BASELINES)
def test_a_later_stage_without_the_earlier_tasks_state_is_an_error(mlp, method: str) -> None:
    spec, tasks = mlp
    approach = make_approach(method, spec, tasks)
    with pytest.raises(RuntimeError, match="stage 2 needs"):
        approach.loss(first_batch(tasks, 1), StepInfo(1, 0, 0, 1))
