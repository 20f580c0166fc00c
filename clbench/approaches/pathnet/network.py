"""PathNet (Fernando et al. 2017): L layers of M modules each; a path picks N modules per layer.

A layer's output is the sum of the activations of its chosen modules (the paper's Sec. 2.1: "the outputs of the
modules in a layer are summed"); a module is one conv (ReLU, dropout, 2x2 max-pool) or one linear layer (ReLU,
dropout) of the base body, narrowed to a common module width per layer (`clbench.nets.sizing` picks the widths so that
the whole network has as many parameters as the base network). Each task has its own linear head.

This file also holds the layer plans of the spec's bodies (`BodyPlan`), which PNN's network
(`clbench.approaches.pnn.network`) reuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import torch
from torch import nn
from torch.nn import functional

from clbench.nets.alexnet import conv_output_side
from clbench.spec import NetworkSpec

Path = Sequence[Sequence[int]]  # (L, N) module indices: path[l][j] is the j-th module used in layer l


@dataclass(frozen=True)
class LayerPlan:
    """One layer of a body: a conv (then ReLU, dropout, 2x2 max-pool) or a linear layer (then ReLU, dropout)."""

    convolutional: bool
    inputs: int  # channels in, or features in (flattened)
    outputs: int  # channels or units out
    kernel: int  # conv kernel side (1 for linear layers)
    dropout: float

    def make(self, inputs: int | None = None, outputs: int | None = None, kernel: int | None = None) -> nn.Module:
        """The layer's Conv2d/Linear (optionally with other sizes, e.g. for lateral adapters)."""
        inputs = self.inputs if inputs is None else inputs
        outputs = self.outputs if outputs is None else outputs
        if self.convolutional:
            return nn.Conv2d(inputs, outputs, kernel_size=self.kernel if kernel is None else kernel)
        return nn.Linear(inputs, outputs)

    def parameter_count(self, inputs: int | None = None, outputs: int | None = None, kernel: int | None = None) -> int:
        """Weights and biases of `make(inputs, outputs, kernel)`, without building it."""
        inputs = self.inputs if inputs is None else inputs
        outputs = self.outputs if outputs is None else outputs
        kernel = (self.kernel if kernel is None else kernel) if self.convolutional else 1
        return outputs * (inputs * kernel * kernel + 1)


@dataclass(frozen=True)
class BodyPlan:
    """The layers of a body (conv layers first, then linear ones) and where its input is flattened."""

    layers: tuple[LayerPlan, ...]
    input_dropout: float
    flatten_at: int  # index of the first linear layer: its input is flattened

    @property
    def feature_size(self) -> int:
        return self.layers[-1].outputs


def base_widths(spec: NetworkSpec) -> tuple[int, ...]:
    """The base body's width per layer: hidden units (mlp) or conv channels then fc units (alexnet)."""
    return tuple(spec.hidden) if spec.kind == "mlp" else (*spec.conv_channels, *spec.fc_units)


def body_plan(spec: NetworkSpec, input_shape: Sequence[int], widths: Sequence[int]) -> BodyPlan:
    """The spec's body (mlp or alexnet) with the given width per layer (see `base_widths` for the order)."""
    if spec.kind == "mlp":
        sizes = [prod(input_shape), *widths]
        layers = tuple(LayerPlan(False, a, b, 1, spec.dropout) for a, b in zip(sizes[:-1], sizes[1:]))
        return BodyPlan(layers, spec.input_dropout, 0)
    n_conv = len(spec.conv_channels)
    channels, side = input_shape[0], input_shape[1]
    conv_in = [channels, *widths[: n_conv - 1]]
    convs = [LayerPlan(True, a, b, k, p)
             for a, b, k, p in zip(conv_in, widths[:n_conv], spec.conv_kernels, spec.conv_dropout)]
    flat = widths[n_conv - 1] * conv_output_side(side, spec.conv_kernels) ** 2
    fc_sizes = [flat, *widths[n_conv:]]
    fcs = [LayerPlan(False, a, b, 1, spec.fc_dropout) for a, b in zip(fc_sizes[:-1], fc_sizes[1:])]
    return BodyPlan((*convs, *fcs), 0.0, n_conv)


def heads_parameter_count(feature_size: int, head_sizes: Sequence[int]) -> int:
    """Weights and biases of one linear head per task."""
    return sum((feature_size + 1) * n for n in head_sizes)


def pathnet_parameter_count(plan: BodyPlan, head_sizes: Sequence[int], modules_per_layer: int) -> int:
    """Parameters of `PathNet(plan, head_sizes, modules_per_layer)` (with M = 1: the plain body and heads)."""
    body = sum(layer.parameter_count() for layer in plan.layers)
    return modules_per_layer * body + heads_parameter_count(plan.feature_size, head_sizes)


def activate(layer: LayerPlan, dropout: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """ReLU, dropout, and for conv layers a 2x2 max-pool (the base nets' order)."""
    h = dropout(torch.relu(z))
    return functional.max_pool2d(h, 2) if layer.convolutional else h


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform weights and zero biases of every Linear/Conv2d (as the base nets)."""
    for child in module.modules():
        if isinstance(child, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(child.weight)
            nn.init.zeros_(child.bias)


class PathNet(nn.Module):
    """L layers of M same-shaped modules; the features of a path sum the chosen modules' activations per layer."""

    def __init__(self, plan: BodyPlan, head_sizes: Sequence[int], modules_per_layer: int) -> None:
        super().__init__()
        self.plan = plan
        self.modules_per_layer = modules_per_layer
        self.input_dropout = nn.Dropout(plan.input_dropout)
        self.layers = nn.ModuleList(
            nn.ModuleList(layer.make() for _ in range(modules_per_layer)) for layer in plan.layers
        )
        self.dropouts = nn.ModuleList(nn.Dropout(layer.dropout) for layer in plan.layers)
        self.heads = nn.ModuleList(nn.Linear(plan.feature_size, n) for n in head_sizes)
        self.feature_size = plan.feature_size
        xavier_init(self)

    @property
    def n_layers(self) -> int:
        return len(self.plan.layers)

    def features(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        """(B, ...) -> (B, F): each layer sums the activations of the path's modules."""
        h = self.input_dropout(x)  # (B, C, H, W) or (B, D)
        for index, (layer, modules, dropout, chosen) in enumerate(
                zip(self.plan.layers, self.layers, self.dropouts, path)):
            if index == self.plan.flatten_at:
                h = h.flatten(1)  # (B, D_l)
            outputs = [activate(layer, dropout, modules[module](h)) for module in chosen]
            h = torch.stack(outputs).sum(0)  # (B, C_l, S_l, S_l) or (B, H_l)
        return h

    def forward(self, x: torch.Tensor, task: int, path: Path) -> torch.Tensor:
        """Logits of task `task`'s head on the features of `path`: (B, n_classes[task])."""
        return self.heads[task](self.features(x, path))


def build_pathnet(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int],
                  modules_per_layer: int, widths: Sequence[int]) -> PathNet:
    """A PathNet over the spec's body with the given module width per layer (see `base_widths`)."""
    return PathNet(body_plan(spec, input_shape, widths), head_sizes, modules_per_layer)
