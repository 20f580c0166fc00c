"""PathNet: paths and mutation, frozen modules, parameter budget, evolution, learning, checkpoints."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from learned import PATHNET_MLP, Learned, hyperparameters, inputs_of, learned
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.pathnet.approach import Candidate, PathNetApproach, frozen_modules, mutate_path, random_path
from clbench.approaches.pathnet.network import base_widths, body_plan, build_pathnet, pathnet_parameter_count
from clbench.approaches.resolution import resolve
from clbench.approaches.schedule import PlateauSchedule
from clbench.data.batches import TaskSequence
from clbench.data.sources import get_source
from clbench.data.tasks import head_sizes_for, input_shape_for
from clbench.errors import SpecError
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


# ------------------------------------------------------------------------------------------ paths
def test_random_path_uses_distinct_modules_per_layer_and_is_seeded() -> None:
    path = random_path(5, 16, 3, torch.Generator().manual_seed(0))
    assert len(path) == 5 and all(len(layer) == 3 and len(set(layer)) == 3 for layer in path)
    assert all(0 <= module < 16 for layer in path for module in layer)
    assert path == random_path(5, 16, 3, torch.Generator().manual_seed(0))
    draws = {str(random_path(5, 16, 3, torch.Generator().manual_seed(seed))) for seed in range(20)}
    assert len(draws) == 20


def test_mutation_rate_and_shift_match_the_paper() -> None:
    generator = torch.Generator().manual_seed(0)
    path = [[0, 5, 15], [1, 2, 3], [7, 8, 9], [10, 11, 12], [13, 14, 4]]  # L = 5, N = 3, M = 16
    frozen_copy = copy.deepcopy(path)
    changed, trials = 0, 4000
    for _ in range(trials):
        child = mutate_path(path, 16, generator)
        for layer, child_layer in zip(path, child):
            for gene, new in zip(layer, child_layer):
                distance = min((new - gene) % 16, (gene - new) % 16)
                assert distance <= 2  # a shift in [-2, 2] modulo M
                changed += new != gene
    assert path == frozen_copy  # the parent is not modified
    rate = changed / (trials * 15)
    assert rate == pytest.approx(1 / 15 * 4 / 5, rel=0.1)  # p = 1 / (N L), and a shift of 0 changes nothing


def test_frozen_modules_are_the_other_tasks_paths() -> None:
    best = {0: [[1, 2, 3], [4, 5, 6]], 1: [[3, 7, 8], [0, 1, 2]]}
    assert frozen_modules(best, 2, 2) == [{1, 2, 3, 7, 8}, {0, 1, 2, 4, 5, 6}]
    assert frozen_modules(best, 1, 2) == [{1, 2, 3}, {4, 5, 6}]
    assert frozen_modules({}, 0, 3) == [set(), set(), set()]


# ------------------------------------------------------------------------------------------ network
@pytest.mark.parametrize("network", ["mlp", "alexnet"])
def test_features_sum_the_paths_modules_only(network: str) -> None:
    spec = tiny_spec(network).network
    shape = (784,) if network == "mlp" else (3, 32, 32)
    torch.manual_seed(0)
    net = build_pathnet(spec, shape, (4, 3), 6, base_widths(spec)).eval()
    x = torch.randn(5, *shape)
    path = [[0, 2, 4]] * net.n_layers
    with torch.no_grad():
        logits = net(x, 1, path)
        assert logits.shape == (5, 3)
        reordered = net(x, 1, [[4, 0, 2]] * net.n_layers)
        assert torch.allclose(logits, reordered, atol=1e-5)  # a sum: module order does not matter
        for layer in net.layers:
            layer[1].weight.add_(1.0)  # off the path: no effect
        assert torch.equal(net(x, 1, path), logits)
        net.layers[-1][4].weight.add_(1.0)  # on the path: changes the output
        assert not torch.allclose(net(x, 1, path), logits)


@pytest.mark.parametrize("network", ["mlp", "alexnet"])
@pytest.mark.parametrize("modules", [1, 3])
def test_parameter_count_formula_matches_the_built_network(network: str, modules: int) -> None:
    spec = tiny_spec(network).network
    shape = (784,) if network == "mlp" else (3, 32, 32)
    heads = (4, 4, 2)
    widths = base_widths(spec)
    net = build_pathnet(spec, shape, heads, modules, widths)
    count = pathnet_parameter_count(body_plan(spec, shape, widths), heads, modules)
    assert count == parameter_count(net)
    if modules == 1:  # one module per layer is the base network
        assert count == parameter_count(build_network(spec, shape, heads))


@pytest.mark.parametrize(("name", "base", "count", "widths"), [
    ("mixture8", 7_104_229, 7_097_797, (17, 33, 66, 528, 528)),  # the reference: 0.258 x base widths
    ("mnist2", 1_917_610, 1_912_492, (117, 117, 117)),
    ("pmnist", 98_700, 98_736, (7, 47)),
])
def test_total_parameters_match_the_base_network(name: str, base: int, count: int, widths: tuple[int, ...]) -> None:
    approach, base_count = benchmark_approach("pathnet", name)
    assert base_count == base
    assert parameter_count(approach.network) == count
    assert abs(count - base) / base < 0.01
    assert approach.widths.widths == widths
    assert len(approach.pathnet.layers) == len(widths)
    assert all(len(layer) == 16 for layer in approach.pathnet.layers)


# ------------------------------------------------------------------------------------------ evolution
def tiny_mlp(seed: int = 0, **overrides) -> tuple[PathNetApproach, TaskSequence]:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    return make_approach("pathnet", spec, tasks, seed=seed, **{**PATHNET_MLP, **overrides}), tasks


def test_a_path_cannot_use_more_modules_than_a_layer_has() -> None:
    spec = tiny_spec("mlp")
    with pytest.raises(SpecError) as refused:  # before any run, as every hyper-parameter's domain
        resolve(replace(spec, approaches={"pathnet": {"modules": 2, "modules_per_path": 3}}), "pathnet")
    assert str(refused.value) == ("<test>: approach pathnet: `approaches.pathnet.modules_per_path` is 3; a path picks "
                                  "modules_per_path of a layer's 2 modules (pathnet.modules): use at most 2")
    resolve(replace(spec, approaches={"pathnet": {"modules": 2, "modules_per_path": 2}}), "pathnet")


def test_epoch_budget_per_task() -> None:
    approach, tasks = tiny_mlp()  # max_epochs 4, 2 generations -> 2 epochs per candidate and generation
    log = approach.learn_task(0, tasks)
    assert (approach.generations, approach.epochs_per_generation) == (2, 2)
    assert log.epochs == 2 * 2 * 2 and 1 <= log.best_epoch <= log.epochs
    default, _ = tiny_mlp(generations=20)  # max_epochs 4 < 20 generations: 4 generations of one epoch
    assert (default.generations, default.epochs_per_generation) == (4, 1)


def test_next_generation_keeps_the_winner_and_mutates_copies_at_its_lr() -> None:
    approach, _ = tiny_mlp(paths_per_generation=3)
    training = approach.training_protocol
    winner = Candidate([[0, 1, 2], [3, 4, 5]], PlateauSchedule(training, lr=0.01))
    others = [Candidate([[9, 9, 9], [9, 9, 9]], PlateauSchedule(training)) for _ in range(2)]
    following = approach.next_generation([others[0], winner, others[1]], winner=1)
    assert following[1] is winner
    for child in (following[0], following[2]):
        assert child.schedule.lr == 0.01 and not child.schedule.stopped
        assert child.schedule.best_loss == float("inf")
        changed = sum(a != b for la, lb in zip(child.path, winner.path) for a, b in zip(la, lb))
        assert changed <= 6 and all(min((a - b) % 16, (b - a) % 16) <= 2
                                    for la, lb in zip(child.path, winner.path) for a, b in zip(la, lb))
    stopped = Candidate(winner.path, PlateauSchedule(training, lr=training.lr_min / 2))
    assert approach.next_generation([stopped, others[0]], winner=0)[1].schedule.stopped


def test_evolution_is_deterministic_for_a_seed() -> None:
    first, tasks = tiny_mlp(seed=3)
    first.learn_task(0, tasks)
    second, _ = tiny_mlp(seed=3)
    torch.rand(1000)  # the global generator must not matter (the MLP has no dropout)
    second.learn_task(0, tasks)
    assert first.best_paths == second.best_paths
    state, other = first.network.state_dict(), second.network.state_dict()
    assert all(torch.equal(state[key], other[key]) for key in state)
    initial = [tiny_mlp(seed=seed)[0].new_path() for seed in (0, 1, 2)]
    assert len({str(path) for path in initial}) == 3  # the evolution stream depends on the seed


# ------------------------------------------------------------------------------------------ training
# Learning each task above chance with task 1's outputs bit-identical afterwards: tests/approaches/test_isolation.py.
@pytest.fixture(scope="module", params=["mlp", "alexnet"])
def run(request: pytest.FixtureRequest) -> Learned:
    return learned("pathnet", request.param)


def overrides_of(network: str) -> dict[str, int]:
    return hyperparameters("pathnet", network)


def test_earlier_paths_are_frozen_and_free_modules_reset(run: Learned) -> None:
    fresh = make_approach("pathnet", tiny_spec(run.network), run.tasks, seed=1, **overrides_of(run.network))
    fresh.load_state(copy.deepcopy(run.states[1]))  # after tasks 1 and 2
    trained = fresh.snapshot()
    fresh.begin_task(2, run.tasks)
    frozen = frozen_modules(fresh.best_paths, 2, fresh.pathnet.n_layers)
    trainable = {id(p) for p in fresh.trainable_parameters(2)}
    reset = 0
    for layer, modules in enumerate(fresh.pathnet.layers):
        for index, module in enumerate(modules):
            is_trainable = all(id(p) in trainable for p in module.parameters())
            assert is_trainable == (index not in frozen[layer])
            for name, parameter in module.named_parameters():
                key = f"layers.{layer}.{index}.{name}"
                if index in frozen[layer]:
                    assert torch.equal(parameter, trained[key])
                else:
                    assert torch.equal(parameter, fresh.initial_weights[key])
                    reset += not torch.equal(trained[key], fresh.initial_weights[key])
    if run.network == "mlp":  # 16 modules: a losing candidate trained modules that no best path kept
        assert reset > 0
    heads = {id(p) for head in fresh.pathnet.heads for p in head.parameters()} & trainable
    assert heads == {id(p) for p in fresh.pathnet.heads[2].parameters()}


def test_state_round_trip_predicts_identically(run: Learned) -> None:
    fresh = make_approach("pathnet", tiny_spec(run.network), run.tasks, seed=1, **overrides_of(run.network))
    fresh.load_state(copy.deepcopy(run.approach.state()))
    assert fresh.best_paths == run.approach.best_paths
    fresh.network.eval()
    run.approach.network.eval()
    with torch.inference_mode():
        for task in range(3):
            inputs = inputs_of(run.tasks, task)
            assert torch.equal(fresh.predict(inputs, task), run.approach.predict(inputs, task))


def test_checkpoint_resumes_the_same_evolution(run: Learned) -> None:
    fresh = make_approach("pathnet", tiny_spec(run.network), run.tasks, seed=5, **overrides_of(run.network))
    fresh.load_state(copy.deepcopy(run.states[1]))
    torch.set_rng_state(run.rng_states[1])  # the engine's global generator (dropout) is not approach state
    fresh.learn_task(2, run.tasks)
    assert fresh.best_paths == run.approach.best_paths
    final, resumed = run.approach.network.state_dict(), fresh.network.state_dict()
    assert all(torch.equal(final[key], resumed[key]) for key in final)


def test_monitoring_lists_the_tasks_path(run: Learned) -> None:
    rows = run.approach.monitoring(2, run.tasks)["pathnet_paths"]
    path = run.approach.best_paths[2]
    assert [(r["layer"], r["slot"], r["module"]) for r in rows] == [
        (layer + 1, slot, module) for layer, modules in enumerate(path) for slot, module in enumerate(modules)]
    earlier = frozen_modules({t: run.approach.best_paths[t] for t in (0, 1)}, 2, len(path))
    assert [r["reused"] for r in rows] == [m in earlier[layer] for layer, ms in enumerate(path) for m in ms]
