"""Progressive neural networks (Rusu et al. 2016): one column per task with lateral adapters.

Column k is the spec's body (narrowed; `clbench.nets.sizing` picks the widths so that all columns, adapters and heads
together have as many parameters as the base network) plus task k's head. Layer i >= 2 of column k (and its
head) also receives the earlier columns' layer i-1 activations through the paper's non-linear lateral adapter
(Sec. 2): h_i^(k) = relu(W_i^(k) h_{i-1}^(k) + U_i^(k) relu(V_i^(k) [alpha_j h_{i-1}^(j)]_{j<k})), where
V reduces the concatenated activations to one column's width (a 1x1 conv for conv layers, as in the paper) and
U has the shape of W. Column k's outputs depend on columns 0..k only, so training column k leaves every earlier
task's function unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from clbench.approaches.pathnet.network import (
    BodyPlan,
    LayerPlan,
    activate,
    body_plan,
    heads_parameter_count,
    pathnet_parameter_count,
    xavier_init,
)
from clbench.spec import NetworkSpec

ALPHA_INIT_MAX = 0.1  # adapter scalars alpha ~ U(0, 0.1): "initialized by a random small value" (Rusu et al. Sec. 2)


class LateralAdapter(nn.Module):
    """U relu(V [alpha_j h_j]_{j<k}): the earlier columns' activations into one layer of column k."""

    def __init__(self, n_previous: int, reduce: nn.Module, project: nn.Module) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.empty(n_previous))  # (k,) one learned scale per earlier column
        self.reduce = reduce  # V: k * width -> width (1x1 conv or linear)
        self.project = project  # U: same shape as the column's own layer (or head)

    def reset_alpha(self) -> None:
        nn.init.uniform_(self.alpha, 0.0, ALPHA_INIT_MAX)

    def forward(self, previous: Sequence[torch.Tensor]) -> torch.Tensor:
        scaled = torch.cat([self.alpha[j] * h for j, h in enumerate(previous)], dim=1)  # (B, k * C, ...)
        return self.project(torch.relu(self.reduce(scaled)))


def _adapter(n_previous: int, layer: LayerPlan) -> LateralAdapter:
    """An adapter into a layer shaped like `layer` (inputs = one column's width of the layer below)."""
    reduce = layer.make(inputs=n_previous * layer.inputs, outputs=layer.inputs, kernel=1)
    return LateralAdapter(n_previous, reduce, layer.make())


def _adapter_parameter_count(n_previous: int, layer: LayerPlan) -> int:
    reduce = layer.parameter_count(inputs=n_previous * layer.inputs, outputs=layer.inputs, kernel=1)
    return n_previous + reduce + layer.parameter_count()


def _adapted_layers(plan: BodyPlan, index: int, n_classes: int) -> list[LayerPlan]:
    """The layers of column `index` that get a lateral adapter: layers 2..L and the head (none for column 0)."""
    head = LayerPlan(False, plan.feature_size, n_classes, 1, 0.0)
    return [*plan.layers[1:], head] if index > 0 else []


def progressive_parameter_count(plan: BodyPlan, head_sizes: Sequence[int]) -> int:
    """Parameters of `ProgressiveNet(plan, head_sizes)`: columns, heads and adapters."""
    columns = pathnet_parameter_count(plan, (), len(head_sizes)) + heads_parameter_count(plan.feature_size, head_sizes)
    adapters = sum(_adapter_parameter_count(k, layer)
                   for k, n in enumerate(head_sizes) for layer in _adapted_layers(plan, k, n))
    return columns + adapters


class Column(nn.Module):
    """One task's column: the body's layers, its head, and (for k > 0) adapters into layers 2..L and the head."""

    def __init__(self, index: int, plan: BodyPlan, n_classes: int) -> None:
        super().__init__()
        self.index = index
        self.layers = nn.ModuleList(layer.make() for layer in plan.layers)
        self.head = nn.Linear(plan.feature_size, n_classes)
        adapted = _adapted_layers(plan, index, n_classes)
        self.adapters = nn.ModuleList(_adapter(index, layer) for layer in adapted)  # layers 2..L, then head


class ProgressiveNet(nn.Module):
    """One column per task; the logits of task t use columns 0..t (earlier ones through the adapters)."""

    def __init__(self, plan: BodyPlan, head_sizes: Sequence[int]) -> None:
        super().__init__()
        self.plan = plan
        self.input_dropout = nn.Dropout(plan.input_dropout)
        self.dropouts = nn.ModuleList(nn.Dropout(layer.dropout) for layer in plan.layers)
        self.columns = nn.ModuleList(Column(k, plan, n) for k, n in enumerate(head_sizes))
        self.feature_size = plan.feature_size
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights, zero biases, adapter scalars U(0, ALPHA_INIT_MAX)."""
        xavier_init(self)
        for module in self.modules():
            if isinstance(module, LateralAdapter):
                module.reset_alpha()

    def column_features(self, x: torch.Tensor, task: int) -> list[torch.Tensor]:
        """Last-layer activations of columns 0..task: task + 1 tensors of shape (B, F)."""
        columns = self.columns[: task + 1]
        hidden = [self.input_dropout(x)] * len(columns)  # per column: (B, C, H, W) or (B, D)
        for index, (layer, dropout) in enumerate(zip(self.plan.layers, self.dropouts)):
            if index == self.plan.flatten_at:
                hidden = [h.flatten(1) for h in hidden]
            below = hidden
            hidden = []
            for k, column in enumerate(columns):
                z = column.layers[index](below[k])  # (B, C_l, S, S) or (B, H_l)
                if k > 0 and index > 0:
                    z = z + column.adapters[index - 1](below[:k])
                hidden.append(activate(layer, dropout, z))
        return hidden

    def forward(self, x: torch.Tensor, task: int) -> torch.Tensor:
        """Logits of task `task`: its column's head plus the head adapter from earlier columns."""
        hidden = self.column_features(x, task)
        column = self.columns[task]
        logits = column.head(hidden[task])  # (B, n_classes[task])
        if task > 0:
            logits = logits + column.adapters[-1](hidden[:task])
        return logits


def build_progressive(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int],
                      widths: Sequence[int]) -> ProgressiveNet:
    """A progressive net over the spec's body, one column per task with the given width per layer."""
    return ProgressiveNet(body_plan(spec, input_shape, widths), head_sizes)
