"""Progressive neural networks: column structure, frozen columns, parameter budget, learning, checkpoints."""

from __future__ import annotations

import copy

import pytest
import torch
from learned import Learned, inputs_of, learned
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.pathnet.network import base_widths, body_plan
from clbench.approaches.pnn.network import ProgressiveNet, build_progressive, progressive_parameter_count
from clbench.approaches.resolution import resolve
from clbench.data.sources import get_source
from clbench.data.tasks import head_sizes_for, input_shape_for
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
# Learning each task above chance with task 1's outputs bit-identical afterwards: tests/approaches/test_isolation.py.
@pytest.fixture(scope="module", params=["mlp", "alexnet"])
def run(request: pytest.FixtureRequest) -> Learned:
    return learned("pnn", request.param)


def test_only_the_current_column_is_trainable(run: Learned) -> None:
    approach = run.approach
    for stage in range(3):
        approach.begin_task(stage, run.tasks)
        trainable = {id(p) for p in approach.trainable_parameters(stage)}
        column = {id(p) for p in approach.progressive.columns[stage].parameters()}
        assert trainable == column
        others = [p for k, c in enumerate(approach.progressive.columns) if k != stage for p in c.parameters()]
        assert not any(p.requires_grad for p in others)


def test_state_round_trip_predicts_identically(run: Learned) -> None:
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
