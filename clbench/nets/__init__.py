"""Networks: the MLPs of the MNIST benchmarks, the AlexNet-like conv net and the CIFAR ResNet-18, each with one head
per task."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from clbench.nets.alexnet import AlexNet
from clbench.nets.common import MultiHeadNet, compile_network, parameter_count
from clbench.nets.mlp import MLP
from clbench.nets.resnet import ResNet18
from clbench.spec import NetworkSpec

__all__ = ["AlexNet", "MLP", "MultiHeadNet", "ResNet18", "build_network", "compile_network", "parameter_count"]


def build_network(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int]) -> MultiHeadNet:
    """The body described by `spec` with one head per task (`head_sizes[t]` classes for task t)."""
    if spec.kind == "mlp":
        return MLP(prod(input_shape), spec.hidden, head_sizes, spec.input_dropout, spec.dropout, spec.bias)
    if spec.kind == "resnet18":
        return ResNet18(input_shape, head_sizes, spec.nf)
    return AlexNet(input_shape, head_sizes, spec.conv_channels, spec.conv_kernels, spec.conv_dropout,
                   spec.fc_units, spec.fc_dropout)
