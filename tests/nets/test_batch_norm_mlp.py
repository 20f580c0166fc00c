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


def test_in_eval_mode_fresh_norms_divide_each_linear_output_by_sqrt_one_plus_eps() -> None:
    """Fresh running statistics are mean 0 and variance 1, the affine weight 1 and bias 0."""
    net = network().eval()
    x = torch.randn(7, 6)
    scale = (1 + EPS) ** 0.5
    h = x
    for layer in net.layers:
        h = torch.relu((h @ layer.weight.T + layer.bias) / scale)
    expected = torch.cat([(h @ head.linear.weight.T + head.linear.bias) / scale for head in net.heads], dim=1)
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
