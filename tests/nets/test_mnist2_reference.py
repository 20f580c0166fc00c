"""mnist2's `reference` variant: the reference code's HAT network, and the MLP's input dropout."""

from __future__ import annotations

import torch

from clbench.approaches.hat.network import HatMLP
from clbench.data.tasks import head_sizes_for, input_shape_for
from clbench.nets import build_network
from clbench.nets.mlp import MLP
from clbench.spec import load_benchmark


def _parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_default_stays_the_papers_network() -> None:
    spec = load_benchmark("mnist2")
    assert spec.variant is None
    assert (spec.network.hidden, spec.network.input_dropout, spec.network.dropout) == ((800, 800, 800), 0.0, 0.0)
    net = build_network(spec.network, input_shape_for(spec.data), head_sizes_for(spec.data, lambda name: 10))
    assert _parameters(net) == 784 * 800 + 800 + 2 * (800 * 800 + 800) + 2 * (800 * 5 + 5)  # 1,917,610


def test_reference_variant_is_the_reference_codes_hat_network() -> None:
    spec = load_benchmark("mnist2", ["variant=reference"])
    assert spec.variant == "reference" and "2000" in spec.description
    assert (spec.network.hidden, spec.network.input_dropout, spec.network.dropout) == ((2000, 2000), 0.2, 0.5)
    assert spec.data == load_benchmark("mnist2").data  # same tasks as the paper's setting
    heads = head_sizes_for(spec.data, lambda name: 10)
    assert heads == (5, 5)
    net = build_network(spec.network, input_shape_for(spec.data), heads)
    assert _parameters(net) == 784 * 2000 + 2000 + 2000 * 2000 + 2000 + 2 * (2000 * 5 + 5) == 5_592_010


def _first_layer_inputs(net: MLP, x: torch.Tensor) -> torch.Tensor:
    seen: list[torch.Tensor] = []
    handle = net.layers[0].register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].detach()))
    try:
        net(x, 0)
    finally:
        handle.remove()
    return seen[0]


def test_input_dropout_acts_in_train_mode_only() -> None:
    torch.manual_seed(0)
    x = torch.ones(64, 100)  # (B, D)
    for net in (MLP(100, [8], [2], input_dropout=0.5), HatMLP(100, [8], [2], input_dropout=0.5)):
        net.train()
        dropped = _first_layer_inputs(net, x)
        assert set(dropped.unique().tolist()) == {0.0, 2.0}  # zeroed or scaled by 1 / (1 - p)
        assert 0.4 < (dropped == 0).float().mean().item() < 0.6
        net.eval()
        assert torch.equal(_first_layer_inputs(net, x), x)


def test_no_input_dropout_by_default() -> None:
    net = MLP(100, [8], [2], dropout=0.5).train()
    x = torch.rand(16, 100)
    assert torch.equal(_first_layer_inputs(net, x), x)  # hidden dropout does not touch the input
