"""Progressive neural networks: column structure, frozen columns, parameter budget, learning, checkpoints."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.approaches import ApproachContext, resolve
from clbench.approaches.pathnet.network import base_widths, body_plan
from clbench.approaches.pnn.approach import ProgressiveNetworks
from clbench.approaches.pnn.network import ProgressiveNet, build_progressive, progressive_parameter_count
from clbench.data.sources import get_source
from clbench.data.tasks import TaskSequence, head_sizes_for, input_shape_for
from clbench.nets import build_network, parameter_count
from clbench.spec import load_benchmark


def benchmark_approach(method: str, name: str, overrides: tuple[str, ...] = ()):
    """The approach as the engine builds it for a real benchmark (no data needed), and the base net's count."""
    spec = load_benchmark(name, list(overrides))
    resolved = resolve(spec, method)
    heads = head_sizes_for(spec.data, lambda dataset: get_source(dataset).n_classes)
    shape = input_shape_for(spec.data)
    context = ApproachContext(spec.network, resolved.training, shape, heads, torch.device("cpu"), 0)
    base = parameter_count(build_network(spec.network, shape, heads))
    return resolved.cls(context, resolved.hyperparameters), base


# ------------------------------------------------------------------------------------------ parameter budget
@pytest.mark.parametrize(("name", "overrides", "base", "count", "widths"), [
    ("mixture8", (), 7_104_229, 7_099_424, (9, 18, 35, 284, 284)),
    ("mnist2", (), 1_917_610, 1_913_781, (381, 381, 381)),
    ("pmnist", (), 98_700, 97_902, (10, 14)),
])
def test_total_parameters_match_the_base_network(name: str, overrides: tuple[str, ...], base: int, count: int,
                                                  widths: tuple[int, ...]) -> None:
    approach, base_count = benchmark_approach("pnn", name, overrides)
    assert base_count == base
    assert parameter_count(approach.network) == count
    assert abs(count - base) / base < 0.01
    assert approach.widths.widths == widths


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
@pytest.mark.parametrize("heads", [(4,), (4, 4, 2), (10, 3, 7, 2)])
def test_parameter_count_formula_matches_the_built_network(network: str, heads: tuple[int, ...]) -> None:
    spec = tiny_spec(network).network
    shape = (784,) if network == "mlp" else (3, 32, 32)
    widths = tuple(w + 1 for w in base_widths(spec))
    net = build_progressive(spec, shape, heads, widths)
    assert progressive_parameter_count(body_plan(spec, shape, widths), heads) == parameter_count(net)


# ------------------------------------------------------------------------------------------ structure
def tiny_net(network: str, heads: tuple[int, ...] = (4, 4, 2)) -> ProgressiveNet:
    spec = tiny_spec(network).network
    shape = (784,) if network == "mlp" else (3, 32, 32)
    torch.manual_seed(0)
    return build_progressive(spec, shape, heads, base_widths(spec)).eval()


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
def test_adapters_reach_layers_two_to_l_and_the_head_from_every_earlier_column(network: str) -> None:
    net = tiny_net(network)
    n_layers = len(net.plan.layers)
    assert len(net.columns[0].adapters) == 0
    for k in (1, 2):
        adapters = net.columns[k].adapters
        assert len(adapters) == n_layers  # layers 2..L (L - 1 of them) and the head
        assert all(adapter.alpha.shape == (k,) for adapter in adapters)
        assert all(0.0 <= adapter.alpha.min() and adapter.alpha.max() <= 0.1 for adapter in adapters)


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
def test_task_t_uses_columns_up_to_t_only(network: str) -> None:
    net = tiny_net(network)
    x = torch.randn(5, 784) if network == "mlp" else torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        before = [net(x, t) for t in range(3)]
        for parameter in net.columns[2].parameters():  # a later column: no effect on tasks 0 and 1
            parameter.add_(1.0)
        after = [net(x, t) for t in range(3)]
        assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
        assert not torch.allclose(before[2], after[2])
        for parameter in net.columns[0].layers.parameters():  # column 0 feeds task 1 through the adapters
            parameter.mul_(1.5)
        assert not torch.allclose(net(x, 1), after[1])
    assert before[0].shape == (5, 4) and before[2].shape == (5, 2)


# ------------------------------------------------------------------------------------------ training
@dataclass
class Run:
    network: str
    approach: ProgressiveNetworks
    tasks: TaskSequence
    first_logits: torch.Tensor  # task 1's test logits right after learning it
    first_column: dict[str, torch.Tensor]
    state_after_two: dict
    accuracy: list[list[float]]  # row t: accuracies on tasks 0..t after task t


def inputs_of(tasks: TaskSequence, task: int) -> torch.Tensor:
    """All test inputs of a task."""
    return tasks[task].test.batch(slice(0, len(tasks[task].test))).inputs


def column_weights(approach: ProgressiveNetworks, k: int) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in approach.progressive.columns[k].state_dict().items()}


@pytest.fixture(scope="module", params=["mlp", "alexnet"])
def run(request: pytest.FixtureRequest) -> Run:
    spec = tiny_spec(request.param)
    tasks = tiny_tasks(spec)
    approach = make_approach("pnn", spec, tasks)
    accuracy, first_logits, first_column, state = [], None, None, None
    for stage in range(3):
        approach.learn_task(stage, tasks)
        accuracy.append([approach.evaluate(tasks[u].test, u).accuracy for u in range(stage + 1)])
        if stage == 0:
            approach.network.eval()
            with torch.inference_mode():
                first_logits = approach.predict(inputs_of(tasks, 0), 0)
            first_column = column_weights(approach, 0)
        if stage == 1:
            state = copy.deepcopy(approach.state())
    return Run(request.param, approach, tasks, first_logits, first_column, state, accuracy)


def test_learns_every_task_above_chance(run: Run) -> None:
    assert [len(row) for row in run.accuracy] == [1, 2, 3]
    values = torch.tensor([a for row in run.accuracy for a in row])
    assert torch.isfinite(values).all()
    assert run.accuracy[0][0] > 1.5 / run.tasks[0].n_classes
    assert run.accuracy[-1][0] == run.accuracy[0][0]  # task 1 never forgets


def test_frozen_column_outputs_are_bit_identical_after_later_tasks(run: Run) -> None:
    approach = run.approach
    approach.network.eval()
    with torch.inference_mode():
        logits = approach.predict(inputs_of(run.tasks, 0), 0)
    assert torch.equal(logits, run.first_logits)
    now = column_weights(approach, 0)
    assert all(torch.equal(now[key], run.first_column[key]) for key in now)
    later = run.state_after_two["network"]
    assert any(not torch.equal(value, approach.network.state_dict()[key]) for key, value in later.items()
               if key.startswith("columns.2."))  # the last column did learn


def test_only_the_current_column_is_trainable(run: Run) -> None:
    approach = run.approach
    for stage in range(3):
        approach.begin_task(stage, run.tasks)
        trainable = {id(p) for p in approach.trainable_parameters(stage)}
        column = {id(p) for p in approach.progressive.columns[stage].parameters()}
        assert trainable == column
        others = [p for k, c in enumerate(approach.progressive.columns) if k != stage for p in c.parameters()]
        assert not any(p.requires_grad for p in others)


def test_state_round_trip_predicts_identically(run: Run) -> None:
    fresh = make_approach("pnn", tiny_spec(run.network), run.tasks, seed=1)
    fresh.load_state(copy.deepcopy(run.approach.state()))
    fresh.network.eval()
    run.approach.network.eval()
    with torch.inference_mode():
        for task in range(3):
            inputs = inputs_of(run.tasks, task)
            assert torch.equal(fresh.predict(inputs, task), run.approach.predict(inputs, task))


def test_checkpoint_with_other_widths_is_refused() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("pnn", spec, tasks)
    with pytest.raises(ValueError, match="column widths"):
        approach.load_extra_state({"column_widths": [1, 2]})
