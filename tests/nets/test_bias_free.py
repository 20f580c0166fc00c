"""`network.bias: false`: an MLP without biases (hidden layers and heads), refused where a network keeps them."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.approaches.resolution import refusal, resolve
from clbench.errors import SpecError
from clbench.nets import build_network
from clbench.run.plan import run_config
from clbench.spec import NetworkSpec, load_benchmark


def test_a_bias_free_mlp_has_no_bias_anywhere_and_its_heads_stack() -> None:
    net = build_network(NetworkSpec(kind="mlp", hidden=(8, 6), bias=False), (784,), (2, 3))
    assert all(not name.endswith("bias") for name, _ in net.named_parameters())
    weight, bias = net.stacked_heads()
    assert weight.shape == (5, 6) and bias is None
    x = torch.randn(4, 784)
    features = net.features(x)
    # every head on the features equals the heads' outputs side by side (no bias added anywhere)
    expected = torch.cat([features @ net.heads[0].weight.T, features @ net.heads[1].weight.T], dim=1)
    assert torch.allclose(net.all_heads(features), expected)
    assert torch.allclose(features, torch.relu(torch.relu(x @ net.layers[0].weight.T) @ net.layers[1].weight.T))


def test_the_default_keeps_biases_and_the_config() -> None:
    net = build_network(NetworkSpec(kind="mlp", hidden=(8,)), (784,), (2,))
    assert net.layers[0].bias is not None and net.heads[0].bias is not None
    spec = load_benchmark("pmnist")
    assert "bias" not in run_config(spec, resolve(spec, "sgd"))["network"]
    bias_free = load_benchmark("pmnist", ["network.bias=false"])
    assert run_config(bias_free, resolve(bias_free, "sgd"))["network"]["bias"] is False


def test_only_the_mlp_takes_it() -> None:
    with pytest.raises(SpecError, match=r"network.bias: false` is supported by the mlp only, not `network.kind` "
                                        r"alexnet"):
        load_benchmark("cifar100-10", ["network.bias=false"])


@pytest.mark.parametrize("method", ["adahat", "hat", "pathnet", "pnn"])
def test_approaches_whose_networks_keep_biases_refuse_it_in_one_line(method: str) -> None:
    spec = load_benchmark("pmnist", ["network.bias=false"])
    problem = refusal(spec, method)
    assert problem is not None and f"approach {method} does not run with `network.bias: false`" in str(problem)
    assert refusal(load_benchmark("pmnist"), method) is None


def test_sgd_trains_a_bias_free_mlp() -> None:
    spec = tiny_spec()
    spec = replace(spec, network=replace(spec.network, bias=False))
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    approach.learn_task(0, tasks)
    assert all(parameter.ndim == 2 for parameter in approach.network.parameters())
