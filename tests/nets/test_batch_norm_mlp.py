"""`BatchNormMLP` (GDumb's `batch_norm`, the authors' MNIST MLP): Linear -> BatchNorm1d -> ReLU, heads Linear ->
BatchNorm1d, against the formula written out by hand."""

from __future__ import annotations

import pytest
import torch

from clbench.nets.mlp import BatchNormMLP

EPS = 1e-6


def network() -> BatchNormMLP:
    torch.manual_seed(0)
    return BatchNormMLP(6, [5, 4], [2, 3], eps=EPS)


def test_in_eval_mode_each_linear_output_is_standardised_by_its_running_statistics() -> None:
    """Running statistics set by hand (mean 1 and variance 4 in the hidden layers, mean -2 and variance 9 in the heads;
    affine weight 1, bias 0): each linear output x becomes (x - mean) / sqrt(var + eps)."""
    net = network().eval()
    for norm in [*net.norms, *(head.norm for head in net.heads)]:
        hidden = norm in list(net.norms)
        norm.running_mean.fill_(1.0 if hidden else -2.0)
        norm.running_var.fill_(4.0 if hidden else 9.0)
    x = torch.randn(7, 6)
    h = x
    for layer in net.layers:
        h = torch.relu((h @ layer.weight.T + layer.bias - 1.0) / (4.0 + EPS) ** 0.5)
    expected = torch.cat([(h @ head.linear.weight.T + head.linear.bias + 2.0) / (9.0 + EPS) ** 0.5
                          for head in net.heads], dim=1)
    with torch.no_grad():
        assert torch.allclose(net.all_heads(net.features(x)), expected, atol=1e-6)
        assert torch.allclose(net(x, 1), expected[:, 2:], atol=1e-6)  # task 1's head: classes 2..4


def test_in_train_mode_every_output_is_standardised_over_the_batch() -> None:
    net = network().train()
    logits = net.all_heads(net.features(torch.randn(64, 6)))  # (64, 5)
    assert torch.allclose(logits.mean(0), torch.zeros(5), atol=1e-5)
    assert torch.allclose(logits.var(0, unbiased=False), torch.ones(5), atol=1e-3)
    assert net.class_offset(1) == 2


def test_the_heads_are_not_one_linear_map() -> None:
    with pytest.raises(TypeError, match="not one linear map"):
        network().stacked_heads()
