"""SI and MAS: their importance against hand computations, and their wiring as approaches."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_spec, tiny_tasks
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.importance.functions import (
    accumulate_importance,
    clip_at_zero,
    linear_absolute_gradient_sums,
    mas_importance,
    output_norm_gradients,
    penalty_stiffness,
    quadratic_penalty,
    quadratic_penalty_gradient,
    si_importance,
    si_path_step,
    stiffness_rows,
)
from clbench.approaches.resolution import resolve
from clbench.spec import benchmark_names, load_benchmark

QUICK = replace(TINY_TRAINING, max_epochs=2)


@pytest.fixture(scope="module")
def mlp():
    spec = tiny_spec("mlp", training=QUICK)
    return spec, tiny_tasks(spec)


# ---------------------------------------------------------------------------------------------- pure functions
def test_si_path_integral_and_importance_match_a_hand_computation() -> None:
    # L(x, y) = x^2 + 2 y^2, gradient (2x, 4y); two SGD steps of lr 0.1 from (1, 1):
    # step 1: g = (2, 4),     delta = (-0.2, -0.4),   theta -> (0.8, 0.6),   -g*delta = (0.4, 1.6)
    # step 2: g = (1.6, 2.4), delta = (-0.16, -0.24), theta -> (0.64, 0.36), -g*delta = (0.256, 0.576)
    omega = {"w": torch.zeros(2, dtype=torch.float64)}
    steps = [((2.0, 4.0), (-0.2, -0.4)), ((1.6, 2.4), (-0.16, -0.24))]
    for gradient, delta in steps:
        omega = si_path_step(omega, {"w": torch.tensor(gradient, dtype=torch.float64)},
                             {"w": torch.tensor(delta, dtype=torch.float64)})
    torch.testing.assert_close(omega["w"], torch.tensor([0.656, 2.176], dtype=torch.float64))
    start, end = {"w": torch.tensor([1.0, 1.0], dtype=torch.float64)}, {"w": torch.tensor([0.64, 0.36],
                                                                                          dtype=torch.float64)}
    importance = si_importance(omega, start, end, xi=1e-3)
    # (0.64 - 1)^2 + 1e-3 = 0.1306; (0.36 - 1)^2 + 1e-3 = 0.4106
    torch.testing.assert_close(importance["w"], torch.tensor([0.656 / 0.1306, 2.176 / 0.4106], dtype=torch.float64))


def test_importance_accumulates_as_a_sum_over_tasks() -> None:
    first = accumulate_importance({"w": torch.tensor([1.0, 2.0])}, None)
    total = accumulate_importance({"w": torch.tensor([0.5, 0.25])}, first)
    assert torch.equal(total["w"], torch.tensor([1.5, 2.25]))
    assert torch.equal(first["w"], torch.tensor([1.0, 2.0]))  # inputs untouched


def test_quadratic_penalty_and_its_gradient_by_hand() -> None:
    theta = {"w": torch.tensor([1.5, -1.0], requires_grad=True)}
    anchor, importance = {"w": torch.tensor([1.0, 0.0])}, {"w": torch.tensor([1.0, 2.0])}
    penalty = quadratic_penalty(theta, anchor, importance, strength=3.0)
    assert float(penalty.detach()) == pytest.approx(3 * (1 * 0.25 + 2 * 1.0))  # 6.75
    assert float(quadratic_penalty(anchor, anchor, importance, 3.0)) == 0.0
    gradient = quadratic_penalty_gradient(theta, anchor, importance, 3.0)["w"]
    assert torch.allclose(gradient, torch.tensor([2 * 3 * 1 * 0.5, 2 * 3 * 2 * -1.0]))
    (autograd,) = torch.autograd.grad(penalty, theta["w"])
    assert torch.allclose(gradient, autograd)


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_mas_importance_is_the_mean_absolute_per_sample_gradient_of_the_squared_output_norm(mlp, batch_size) -> None:
    spec, tasks = mlp
    approach = make_approach("mas", spec, tasks)
    network, body, data = approach.network, approach.body, tasks[1].train
    network.train()
    importance = mas_importance(network, body, data, 1, batch_size)
    assert network.training  # mode restored
    network.eval()
    expected = {name: torch.zeros_like(p) for name, p in body.items()}
    for i in range(len(data)):  # the direct computation: one sample at a time
        output = network(data.batch(slice(i, i + 1)).inputs, 1)  # (1, C)
        gradients = torch.autograd.grad(output.pow(2).sum(), list(body.values()))
        for name, gradient in zip(body, gradients):
            expected[name] += gradient.abs()
    assert importance.keys() == expected.keys() and not any("heads" in name for name in importance)
    for name in expected:
        torch.testing.assert_close(importance[name], expected[name] / len(data), rtol=1e-4, atol=1e-6)
    assert all(float(value.sum()) > 0 for value in importance.values())


@pytest.mark.parametrize("seen", [False, True])
def test_mas_linear_layers_sum_of_absolute_gradients_is_the_per_sample_one(mlp, seen: bool) -> None:
    """The one-pass sums |Delta|^T |A| (weights) and sum |delta| (biases) equal the per-sample gradients' absolute
    values summed, for the body and the task's head (the class scenario's output over the seen heads with `seen`)."""
    spec, tasks = mlp
    network = make_approach("mas", spec, tasks).network
    network.eval()
    parameters = {name: p for name, p in network.named_parameters() if not name.startswith("heads.") or
                  name.startswith("heads.1.")}
    inputs = tasks[1].train.batch(slice(0, 9)).inputs
    fast = linear_absolute_gradient_sums(network, parameters, inputs, 1, seen)
    per_sample = output_norm_gradients(network, parameters, inputs, 1, seen)
    assert fast is not None and fast.keys() == per_sample.keys() and any(name.endswith("bias") for name in fast)
    for name in fast:
        torch.testing.assert_close(fast[name], per_sample[name].abs().sum(0), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(fast[name], per_sample[name].sum(0).abs())  # not |sum|: the absolute value first


def test_mas_importance_of_a_convolutional_body_falls_back_to_per_sample_gradients() -> None:
    spec = tiny_spec("alexnet", training=QUICK)
    tasks = tiny_tasks(spec)
    approach = make_approach("mas", spec, tasks)
    network, body = approach.network, approach.body
    network.eval()
    inputs = tasks[0].train.batch(slice(0, 3)).inputs
    assert any(p.dim() == 4 for p in body.values())  # a convolution's weight
    assert linear_absolute_gradient_sums(network, body, inputs, 0) is None


def mean_absolute_output_gradient(network, body, data, head: int) -> dict[str, torch.Tensor]:
    """MAS's importance the direct way: one sample at a time, |d ||f(x)||^2 / d theta| through `head`, averaged."""
    network.eval()
    total = {name: torch.zeros_like(p) for name, p in body.items()}
    for i in range(len(data)):
        output = network(data.batch(slice(i, i + 1)).inputs, head)  # (1, C)
        for name, gradient in zip(body, torch.autograd.grad(output.pow(2).sum(), list(body.values()))):
            total[name] += gradient.abs()
    return {name: value / len(data) for name, value in total.items()}


# ---------------------------------------------------------------------------------------------- approaches
# SI's xi per shipped benchmark and its source in Zenke et al.'s code (ganguli-lab/pathint, read with `fetch`):
# fig_permuted_mnist/Permuted MNIST.ipynb sets xi = 0.1; fig_split_mnist/Figure split MNIST.ipynb and
# fig_transfer_cifar/train.py call PATH_INT_PROTOCOL(..., xi=1e-3). mixture8 takes split CIFAR's (the conv net).
# rot-mnist takes Mammoth's rot-mnist values (aimagelab/mammoth@e75a491 utils/best_args.py 'rot-mnist' 'si':
# c 1.0, xi 1.0).
SI_XI = {"pmnist": 0.1, "mnist2": 1e-3, "mnist5": 1e-3, "cifar-incremental": 1e-3, "cifar100-10": 1e-3,
         "mixture8": 1e-3, "rot-mnist": 1.0,
         "seq-mnist": 0.1, "cifar10-5": 0.1}  # no `si` section (not among the DER paper's approaches they ship):
# clbench's default


def test_defaults_are_the_original_papers_and_every_benchmark_resolves() -> None:
    spec = tiny_spec("mlp")
    si, mas = resolve(spec, "si").hyperparameters, resolve(spec, "mas").hyperparameters
    assert (si.c, si.xi, mas.lamb) == (0.1, 0.1, 1.0)
    assert set(SI_XI) == set(benchmark_names())
    for name in benchmark_names():
        benchmark = load_benchmark(name)
        assert resolve(benchmark, "si").hyperparameters.xi == SI_XI[name], name
        assert resolve(benchmark, "mas").hyperparameters.lamb == 1.0
    assert resolve(load_benchmark("pmnist"), "si").hyperparameters.c == 0.1
    assert resolve(load_benchmark("mnist2"), "si").hyperparameters.c == 1.0


def test_si_omega_is_clipped_at_zero_after_each_task_and_monitoring_counts_the_negatives(mlp) -> None:
    # as relu(Omega_old + omega / (delta^2 + xi)) in the authors' pathint/protocols.py
    spec, tasks = mlp
    approach = make_approach("si", spec, tasks)
    name = next(iter(approach.body))

    def task_importance(values: list[float]) -> dict[str, torch.Tensor]:
        importance = {key: torch.ones_like(p) for key, p in approach.body.items()}
        importance[name].view(-1)[:3] = torch.tensor(values)
        return importance

    approach.consolidate(task_importance([2.0, -1.0, 0.5]))
    assert approach.importance[name].view(-1)[:3].tolist() == [2.0, 0.0, 0.5]
    approach.consolidate(task_importance([-3.0, 0.5, 0.25]))
    # kept sum: 2 - 3 = -1 -> 0; 0 + 0.5 = 0.5; 0.5 + 0.25 = 0.75; the other entries 1 + 1 = 2
    assert approach.importance[name].view(-1)[:3].tolist() == [0.0, 0.5, 0.75]
    assert float(approach.importance[name].min()) == 0.0
    row = next(row for row in approach.monitoring(1, tasks)["penalty_stiffness"] if row["parameter"] == name)
    assert row["min_importance"] == -1.0 and row["negative"] == 1
    assert row["max_importance"] == 2.0  # of the kept (clipped) Omega
    others = [row for row in approach.monitoring(1, tasks)["penalty_stiffness"] if row["parameter"] != name]
    assert all(row["negative"] == 0 and row["min_importance"] == 2.0 for row in others)


def test_clip_at_zero_by_hand() -> None:
    clipped = clip_at_zero({"w": torch.tensor([-2.0, 0.0, 3.0])})
    assert clipped["w"].tolist() == [0.0, 0.0, 3.0]


def test_mas_importance_is_not_clipped(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("mas", spec, tasks)
    name = next(iter(approach.body))
    importance = {key: torch.ones_like(p) for key, p in approach.body.items()}
    importance[name].view(-1)[0] = -1.0  # MAS's importance is never negative; here only to show it is kept as is
    approach.consolidate(importance)
    assert float(approach.importance[name].view(-1)[0]) == -1.0


def scripted_validation(approach, losses: list[float]):
    """Replace the validation measure by a fixed sequence of losses (one per epoch)."""
    from clbench.approaches.datatypes import Evaluation

    sequence = iter(losses)
    approach.evaluate_validation = lambda data, stage: Evaluation(next(sequence), 0.5, len(data))


def test_si_omega_ends_at_the_best_epoch_not_after_the_epochs_early_stopping_discards(mlp) -> None:
    spec, tasks = mlp
    training = replace(QUICK, max_epochs=4, patience=10)
    spec = replace(spec, training=training)
    longer = make_approach("si", spec, tasks)
    scripted_validation(longer, [1.0, 0.5, 0.7, 0.8])  # best epoch 2 of 4
    log = longer.learn_task(0, tasks)
    assert (log.best_epoch, log.epochs) == (2, 4)
    stopped = make_approach("si", replace(spec, training=replace(training, max_epochs=2)), tasks)
    scripted_validation(stopped, [1.0, 0.5])  # the same first two epochs, then the task ends
    stopped.learn_task(0, tasks)
    for name in longer.body:
        assert torch.equal(longer.body[name], stopped.body[name])  # same weights restored
        assert torch.equal(longer.omega[name], stopped.omega[name])
        assert torch.equal(longer.importance[name], stopped.importance[name])


def test_si_records_the_task_loss_gradient_without_the_penalty(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("si", spec, tasks)
    approach.learn_task(0, tasks)
    assert set(approach.importance) == set(approach.body)  # body only: heads are not penalised
    assert all(float(value.abs().sum()) > 0 for value in approach.importance.values())
    approach.begin_task(1, tasks)
    with torch.no_grad():
        approach.network.layers[0].weight.add_(0.05)  # away from the anchor: the penalty's gradient is not 0
    batch = tasks[1].train.batch(slice(0, 16))
    step = StepInfo(1, 0, 0, 1)
    approach.network.zero_grad()
    loss = approach.loss(batch, step)
    loss.backward()
    approach.before_step(step)
    cross_entropy = functional.cross_entropy(approach.network(batch.inputs, 1), batch.targets)
    expected = torch.autograd.grad(cross_entropy, list(approach.body.values()))
    for name, gradient in zip(approach.body, expected):
        torch.testing.assert_close(approach.step_gradients[name], gradient, rtol=1e-4, atol=1e-6)
    assert not torch.allclose(approach.body["layers.0.weight"].grad, expected[0])  # the penalty was in the step


def test_si_omega_is_the_sum_over_steps_of_minus_gradient_times_change(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("si", spec, tasks)
    approach.begin_task(0, tasks)
    optimizer = torch.optim.SGD(list(approach.network.parameters()), lr=0.05)
    expected = {name: torch.zeros_like(p) for name, p in approach.body.items()}
    for index in range(3):
        step = StepInfo(0, 0, index, 3)
        batch = tasks[0].train.batch(slice(16 * index, 16 * index + 16))
        optimizer.zero_grad()
        approach.loss(batch, step).backward()
        gradients = {name: p.grad.clone() for name, p in approach.body.items()}
        before = {name: p.detach().clone() for name, p in approach.body.items()}
        approach.before_step(step)
        optimizer.step()
        approach.after_step(step)
        for name, p in approach.body.items():
            expected[name] -= gradients[name] * (p.detach() - before[name])
    for name in expected:
        torch.testing.assert_close(approach.omega[name], expected[name])
    assert float(sum(value.sum() for value in approach.omega.values())) > 0  # the loss went down


def test_mas_end_task_measures_the_tasks_own_head_on_its_own_data(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("mas", spec, tasks)
    approach.end_task(1, tasks)  # the second task's importance, before any other: Omega is that task's alone
    expected = mean_absolute_output_gradient(approach.network, approach.body, tasks[1].train, head=1)
    head_0 = mean_absolute_output_gradient(approach.network, approach.body, tasks[1].train, head=0)
    for name in expected:
        torch.testing.assert_close(approach.importance[name], expected[name], rtol=1e-4, atol=1e-6)
        assert torch.equal(approach.anchor[name], approach.body[name].detach())
    assert not torch.allclose(head_0["layers.0.weight"], expected["layers.0.weight"], rtol=1e-2)  # heads differ


def test_si_begin_task_starts_a_new_path_integral_at_the_current_weights(mlp) -> None:
    spec, tasks = mlp
    approach = make_approach("si", spec, tasks)
    initial = {name: p.detach().clone() for name, p in approach.body.items()}
    approach.learn_task(0, tasks)
    omega_1 = {name: value.clone() for name, value in approach.importance.items()}
    assert any(float(value.abs().sum()) > 0 for value in approach.omega.values())  # task 1's path integral
    assert not torch.equal(approach.body["layers.0.weight"], initial["layers.0.weight"])
    approach.begin_task(1, tasks)
    for name, p in approach.body.items():
        assert torch.equal(approach.omega[name], torch.zeros_like(p))
        assert torch.equal(approach.start[name], p.detach())
    # no step: omega 0 and theta_end = theta_start, so task 2 adds 0 / (0 + xi) = 0 to Omega
    approach.end_task(1, tasks)
    assert all(torch.equal(approach.importance[name], omega_1[name]) for name in omega_1)


@pytest.mark.parametrize("method", ["si", "mas"])
def test_state_round_trips_and_the_penalty_is_in_the_loss(mlp, method: str) -> None:
    spec, tasks = mlp
    approach = make_approach(method, spec, tasks)
    approach.learn_task(0, tasks)
    approach.learn_task(1, tasks)
    buffer = io.BytesIO()
    torch.save(approach.state(), buffer)
    buffer.seek(0)
    fresh = make_approach(method, spec, tasks, seed=1)
    fresh.load_state(torch.load(buffer, weights_only=True))
    for network in (approach.network, fresh.network):
        with torch.no_grad():
            network.layers[1].bias.add_(0.1)
    batch = tasks[2].train.batch(slice(0, 16))
    step = StepInfo(2, 0, 0, 1)
    with torch.no_grad():
        loss, fresh_loss = approach.loss(batch, step), fresh.loss(batch, step)
        cross_entropy = functional.cross_entropy(approach.network(batch.inputs, 2), batch.targets)
    assert torch.equal(loss, fresh_loss) and float(loss) > float(cross_entropy)
    if method == "si":
        assert all(torch.equal(fresh.omega[name], approach.omega[name]) for name in approach.omega)


@pytest.mark.parametrize("method", ["si", "mas"])
def test_a_later_stage_without_the_earlier_tasks_state_is_an_error(mlp, method: str) -> None:
    spec, tasks = mlp
    approach = make_approach(method, spec, tasks)
    with pytest.raises(RuntimeError, match="stage 2 needs"):
        approach.loss(tasks[1].train.batch(slice(0, 4)), StepInfo(1, 0, 0, 1))


# ---------------------------------------------------------------------------------------------- SGD stability
def test_penalty_stiffness_and_its_rows_by_hand() -> None:
    importance = {"a": torch.tensor([1.0, 10.0, 30.0]), "b": torch.tensor([[0.5, 0.5]])}
    # 2 * lr * strength = 2 * 0.1 * 0.5 = 0.1
    stiffness = penalty_stiffness(importance, strength=0.5, lr=0.1)
    torch.testing.assert_close(stiffness["a"], torch.tensor([0.1, 1.0, 3.0]))
    rows = stiffness_rows(importance, strength=0.5, lr=0.1)
    assert [row["parameter"] for row in rows] == ["a", "b"]
    assert rows[0]["weights"] == 3 and rows[0]["unstable"] == 1  # only 3.0 exceeds 2
    assert rows[0]["max_importance"] == 30.0 and rows[0]["mean_importance"] == pytest.approx(41 / 3)
    assert rows[0]["max_stiffness"] == pytest.approx(3.0)
    assert rows[1] == {"parameter": "b", "weights": 2, "max_importance": 0.5, "mean_importance": 0.5,
                       "min_importance": 0.5, "negative": 0, "max_stiffness": pytest.approx(0.05), "unstable": 0}
    before = {"a": torch.tensor([1.0, -4.0, -0.5]), "b": torch.tensor([[0.5, 0.5]])}
    rows = stiffness_rows(importance, strength=0.5, lr=0.1, before_clipping=before)
    assert (rows[0]["min_importance"], rows[0]["negative"]) == (-4.0, 2)
    assert rows[0]["max_importance"] == 30.0  # max and stiffness stay those of the kept importance


def test_a_stiffness_of_exactly_two_is_not_unstable() -> None:
    # lr 0.5, strength 1 (powers of two, exact): 2 * 0.5 * 1 * Omega = Omega; on the penalty alone theta - theta*
    # is multiplied by 1 - 2 = -1 per step: it oscillates without growing, so 2 itself is not "beyond 2"
    importance = {"w": torch.tensor([1.5, 2.0, 2.5, 4.0])}
    (row,) = stiffness_rows(importance, strength=1.0, lr=0.5)
    assert row["max_stiffness"] == 4.0 and row["unstable"] == 2  # 2.5 and 4.0


@pytest.mark.parametrize(("omega", "grows"), [(15.0, True), (5.0, False), (9.0, False)])
def test_plain_sgd_on_the_penalty_diverges_exactly_where_the_stiffness_exceeds_two(omega: float, grows: bool) -> None:
    # the claim the monitoring table rests on: SGD at lr 0.1 with strength 1 on Omega (theta - theta*)^2 alone
    # moves theta - theta* by the factor 1 - 0.2 Omega per step: |factor| > 1 iff Omega > 10 (9: -0.8, oscillates
    # and settles; 15: -2, oscillates and grows)
    anchor, importance = {"w": torch.zeros(1)}, {"w": torch.tensor([omega])}
    theta = torch.ones(1)
    for _ in range(20):
        theta = theta - 0.1 * quadratic_penalty_gradient({"w": theta}, anchor, importance, 1.0)["w"]
    assert (float(theta.abs()) > 1.0) is grows
    assert (float(penalty_stiffness(importance, 1.0, 0.1)["w"]) > 2) is grows


@pytest.mark.parametrize("method", ["si", "mas"])
def test_monitoring_reports_the_stiffness_of_the_accumulated_importance(mlp, method: str) -> None:
    spec, tasks = mlp
    approach = make_approach(method, spec, tasks)
    assert approach.monitoring(0, tasks) == {}  # no importance before the first task ends
    approach.learn_task(0, tasks)
    rows = approach.monitoring(0, tasks)["penalty_stiffness"]
    assert [row["parameter"] for row in rows] == list(approach.body)
    strength = approach.hparams.c if method == "si" else approach.hparams.lamb
    for row in rows:
        importance = approach.importance[row["parameter"]]
        assert row["weights"] == importance.numel() and row["max_importance"] == float(importance.max())
        assert row["max_stiffness"] == pytest.approx(2 * QUICK.lr * strength * float(importance.max()), rel=1e-6)
