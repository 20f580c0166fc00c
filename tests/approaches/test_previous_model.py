"""`PreviousModel`, the frozen network after the previous task that LwF, LFL and iCaRL hold; and the replay step's
order in its one `training_step` (ER, DER++: the batch stored after the optimiser step)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from synthetic import make_approach, tiny_spec, tiny_tasks
from torch import nn

import clbench.approaches.lfl
from clbench.approaches.datatypes import StepInfo
from clbench.approaches.previous_model import PreviousModel, frozen_network
from clbench.nets import build_network

SPEC = tiny_spec("mlp")
CPU = torch.device("cpu")


def network_builder():  # type: ignore[no-untyped-def]
    tasks = tiny_tasks(SPEC)
    return lambda: build_network(SPEC.network, tasks.input_shape, tasks.head_sizes), tasks


def test_before_a_task_there_is_no_previous_model_and_asking_for_one_names_the_approach() -> None:
    build, tasks = network_builder()
    previous = PreviousModel(build, CPU, "lwf")
    assert not previous.available and previous.state() == {"previous_network": {}} and previous.nbytes == 0
    inputs = tasks[0].valid.batch(slice(0, 4)).inputs
    with pytest.raises(RuntimeError, match="lwf: stage 2 needs the model of the previous task"):
        previous.features(inputs, 1)


def test_it_is_a_frozen_copy_the_live_network_no_longer_moves() -> None:
    build, tasks = network_builder()
    live = build()
    previous = PreviousModel(build, CPU, "lwf")
    previous.remember(live)
    inputs = tasks[0].valid.batch(slice(0, 8)).inputs
    live.eval()
    expected_features = live.features(inputs).detach()
    expected_logits = [live.heads[task](expected_features).detach() for task in (0, 1)]
    with torch.no_grad():
        for parameter in live.parameters():
            parameter.add_(1.0)
    features = previous.features(inputs, 1)
    assert torch.equal(features, expected_features) and not features.requires_grad
    logits = previous.logits(inputs, [0, 1], 1)
    assert all(torch.equal(a, b) and not a.requires_grad for a, b in zip(logits, expected_logits))
    assert previous.network is not None and not previous.network.training
    assert not any(parameter.requires_grad for parameter in previous.network.parameters())


def test_its_state_restores_the_same_outputs_under_the_checkpoint_key() -> None:
    build, tasks = network_builder()
    previous = PreviousModel(build, CPU, "lfl")
    previous.remember(build())
    state = previous.state()
    assert list(state) == ["previous_network"]  # the key checkpoints have always used
    restored = PreviousModel(build, CPU, "lfl")
    restored.load_state(state)
    inputs = tasks[0].valid.batch(slice(0, 8)).inputs
    assert torch.equal(restored.features(inputs, 1), previous.features(inputs, 1))
    assert restored.nbytes == previous.nbytes > 0
    restored.load_state({})  # a state without one (the first task's checkpoint)
    assert not restored.available


@pytest.mark.parametrize("method", ["lwf", "lfl", "icarl"])
def test_the_approaches_hold_one_and_count_it_in_their_memory(method: str) -> None:
    spec = tiny_spec("mlp", scenario="class" if method == "icarl" else "task")
    tasks = tiny_tasks(spec)
    approach = make_approach(method, spec, tasks)
    assert isinstance(approach.previous, PreviousModel) and not approach.previous.available
    approach.begin_task(0, tasks)
    approach.end_task(0, tasks)  # the end of the first task (iCaRL also chooses its exemplars)
    assert approach.previous.available
    assert approach.extra_state()["previous_network"] is approach.previous.weights
    samples, nbytes = approach.memory_usage()
    assert nbytes >= approach.previous.nbytes > 0
    if method != "icarl":
        assert (samples, nbytes) == (0, approach.previous.nbytes)


def test_lfl_does_not_import_its_sibling_lwf() -> None:
    tree = ast.parse(Path(clbench.approaches.lfl.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "clbench.approaches.previous_model" in imported and "clbench.approaches.lwf" not in imported


@pytest.mark.parametrize("method", ["er", "derpp"])
def test_a_replay_step_stores_its_batch_after_the_optimiser_step(method: str) -> None:
    tasks = tiny_tasks(SPEC)
    approach = make_approach(method, SPEC, tasks, buffer_size=50, replay_batch_size=8)
    approach.begin_task(0, tasks)
    batch = approach.training_batch(tasks[0].train, torch.arange(8))
    approach.network.train()
    optimizer = approach.make_optimizer(0, 0.05)
    stored_at_the_step: list[int] = []
    original_step = optimizer.step

    def recorded_step() -> None:
        stored_at_the_step.append(len(approach.buffer))
        original_step()

    optimizer.step = recorded_step  # type: ignore[method-assign]
    approach.training_step(batch, StepInfo(0, 0, 0, 1), optimizer)
    assert stored_at_the_step == [0]  # the step's loss drew from the memory; nothing was stored before the step
    assert len(approach.buffer) == 8 and torch.equal(approach.buffer.contents().images, batch.images)
    assert (approach.buffer.contents().logits is not None) == (method == "derpp")  # DER++ keeps the logits
    assert not hasattr(approach, "to_store")  # the step hands nothing on to another hook


def test_frozen_network_is_a_gradient_free_eval_copy_and_leaves_the_global_rng_alone() -> None:
    source = nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5))
    torch.manual_seed(0)
    expected_next = torch.rand(1)
    torch.manual_seed(0)
    copy = frozen_network(lambda: nn.Sequential(nn.Linear(3, 2), nn.Dropout(0.5)), source.state_dict(),
                          torch.device("cpu"))
    assert torch.equal(torch.rand(1), expected_next)
    assert not copy.training and not any(p.requires_grad for p in copy.parameters())
    x = torch.randn(4, 3)
    torch.testing.assert_close(copy(x), source.eval()(x))
