"""Approaches on the batch-norm ResNet-18: what batch norm's running statistics do, and the refused approaches."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, tiny_resnet_spec, tiny_tasks

from clbench.approaches import BUILTINS
from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.lfl import penultimate
from clbench.approaches.registry import REGISTRY
from clbench.approaches.regularizers import task_fisher
from clbench.errors import SpecError

SPEC = tiny_resnet_spec(nf=4, augment=False, training=replace(TINY_TRAINING, max_epochs=2))
REFUSED = ("adahat", "gpm", "hat", "packnet", "pathnet", "pnn", "supsup", "wsn")


@pytest.fixture(scope="module")
def tasks():  # type: ignore[no-untyped-def]
    return tiny_tasks(SPEC)


def body_state(approach) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    """The network's state without the heads: weights and batch norm's running statistics."""
    return {key: value.clone() for key, value in approach.network.state_dict().items() if not key.startswith("heads.")}


def test_sgd_f_freezes_the_bodys_batch_norm_statistics_with_its_weights(tasks) -> None:
    approach = make_approach("sgd-f", SPEC, tasks)
    approach.learn_task(0, tasks)
    after_first = body_state(approach)
    approach.learn_task(1, tasks)
    after_second = body_state(approach)
    assert any(key.endswith("running_mean") for key in after_first)
    assert all(torch.equal(after_first[key], after_second[key]) for key in after_first)
    assert approach.network.heads[1].weight.grad is not None  # the new head did learn


def test_a_fisher_estimate_in_training_mode_leaves_the_batch_norm_statistics_as_they_were(tasks) -> None:
    approach = make_approach("ewc", SPEC, tasks)
    approach.learn_task(0, tasks)
    before = {key: value.clone() for key, value in approach.network.state_dict().items()}
    approach.network.eval()
    parameters = dict(approach.network.named_parameters())
    fisher = task_fisher(approach.network, parameters, tasks[0].train, 0, 20, train_mode=True)
    assert float(fisher["conv1.weight"].sum()) > 0.0
    after = approach.network.state_dict()
    assert all(torch.equal(before[key], after[key]) for key in before)
    assert not approach.network.training  # the mode is restored too


def test_lfl_takes_the_pooled_features_of_a_body_without_fully_connected_layers(tasks) -> None:
    approach = make_approach("lfl", SPEC, tasks)
    inputs = tasks[0].train.batch(slice(0, 8)).inputs
    approach.network.eval()
    torch.testing.assert_close(penultimate(approach.multihead, inputs), approach.multihead.features(inputs))


@pytest.mark.parametrize("method", REFUSED)
def test_an_approach_refuses_a_body_it_cannot_run_on_when_built(method: str, tasks) -> None:
    reason = REGISTRY[method].unsupported_networks["resnet18"]
    with pytest.raises(SpecError) as error:
        make_approach(method, replace(SPEC, source="<library>"), tasks)  # resolve refuses first, naming the spec
    assert str(error.value) == f"<library>: approach {method} does not run on `network.kind` resnet18: {reason}"
    context = ApproachContext(SPEC.network, SPEC.training, tasks.input_shape, tasks.head_sizes, torch.device("cpu"), 0)
    with pytest.raises(SpecError, match=f"^approach {method} does not run on `network.kind` resnet18: "):
        REGISTRY[method](context, REGISTRY[method].hyperparameters_class())  # the constructor itself refuses too


def test_every_other_builtin_runs_on_resnet18() -> None:
    running = sorted(name for name in BUILTINS if "resnet18" not in REGISTRY[name].unsupported_networks)
    assert sorted(set(BUILTINS) - set(running)) == sorted(REFUSED)
