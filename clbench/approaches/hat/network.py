"""HAT-gated variants of the MLP and the AlexNet-like conv net (Serra et al., ICML 2018, Sec. 2.2).

Each gated layer l (every conv layer and hidden fully-connected layer; not the heads, not the input) has one
task embedding e^t_l per task; its units' outputs are multiplied by the attention a^t_l = sigmoid(s e^t_l):
conv layers after maxpool(dropout(relu(conv))), per channel; fully-connected layers after
dropout(relu(fc)). The layers themselves are the base networks' (these classes subclass `MLP` and
`AlexNet`), so parameter names, counts and initialisation are shared; the embeddings are extra parameters
`embeddings.<task>.<layer>`, one (N_l,) vector each, so that training one task's embedding cannot touch
another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.hat.functions import LayerShape, gate
from clbench.nets.alexnet import AlexNet
from clbench.nets.common import MultiHeadNet
from clbench.nets.mlp import MLP
from clbench.spec import NetworkSpec

EMBEDDING_INITS = ("normal", "uniform")


def make_embeddings(n_tasks: int, unit_counts: Sequence[int], init: str, scale: float) -> nn.ModuleList:
    """Per task a ParameterList of one (N_l,) embedding per gated layer: N(0, 1), or U(0, scale)."""
    if init not in EMBEDDING_INITS:
        raise ValueError(f"embedding init {init!r}; expected one of {', '.join(EMBEDDING_INITS)}")
    tasks = nn.ModuleList()
    for _ in range(n_tasks):
        layers = nn.ParameterList()
        for units in unit_counts:
            values = torch.randn(units) if init == "normal" else torch.rand(units) * scale
            layers.append(nn.Parameter(values))
        tasks.append(layers)
    return tasks


class GatedNet(MultiHeadNet):
    """What a HAT-gated network adds to `MultiHeadNet`: task embeddings, masks and a gated forward.

    `s` defaults to `smax`, so `net(x, task)` is the evaluation-time network (s = smax).
    """

    embeddings: nn.ModuleList
    smax: float

    def gated_modules(self) -> list[nn.Module]:
        """The gated layers (conv or linear), in mask order."""
        raise NotImplementedError

    def layer_shapes(self) -> list[LayerShape]:
        """How each gated layer's weight connects units (for gradient masks and monitoring)."""
        raise NotImplementedError

    def gated_features(self, x: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
        """Body output (B, F) with `masks[l]` applied to gated layer l."""
        raise NotImplementedError

    def compile_body(self) -> None:
        """torch.compile `gated_features` (the masks are tensor inputs: neither the task nor s recompiles it)."""
        self.gated_features = torch.compile(self.gated_features)  # type: ignore[method-assign]

    def embedding_parameters(self, task: int) -> list[nn.Parameter]:
        """Task `task`'s embeddings, one (N_l,) per gated layer."""
        return list(self.embeddings[task])

    def unit_counts(self) -> list[int]:
        """Units N_l per gated layer, in mask order."""
        return [embedding.numel() for embedding in self.embeddings[0]]

    def masks(self, task: int, s: torch.Tensor | float | None = None) -> list[torch.Tensor]:
        """a^t_l = sigmoid(s e^t_l) for every gated layer: (N_l,) each.

        One gate over the task's embeddings concatenated, split back into layers (views): three operations
        instead of two per layer (on a GPU, kernel launches count). The values are a gate per layer's up to
        the last bit (a vectorised sigmoid may round an element differently).
        """
        scale = self.smax if s is None else s
        return list(gate(torch.cat(list(self.embeddings[task])), scale).split(self.unit_counts()))

    def forward_with_masks(self, x: torch.Tensor, task: int,
                           s: torch.Tensor | float | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(logits of task `task`'s head (B, n_task), the masks used)."""
        masks = self.masks(task, s)
        return self.heads[task](self.gated_features(x, masks)), masks

    def forward(self, x: torch.Tensor, task: int, s: torch.Tensor | float | None = None) -> torch.Tensor:
        return self.forward_with_masks(x, task, s)[0]

    def features(self, x: torch.Tensor, task: int | None = None,
                 s: torch.Tensor | float | None = None) -> torch.Tensor:
        """Gated body output (B, F) for task `task` (required: a HAT body depends on the task)."""
        if task is None:
            raise TypeError("a HAT-gated network needs the task: features(x, task, s)")
        return self.gated_features(x, self.masks(task, s))

    def body_parameters(self) -> list[nn.Parameter]:
        """Every parameter except the heads' and the task embeddings'."""
        excluded = {id(p) for p in self.heads.parameters()} | {id(p) for p in self.embeddings.parameters()}
        return [p for p in self.parameters() if id(p) not in excluded]


class HatMLP(GatedNet, MLP):
    """`MLP` with a HAT mask after dropout(relu(linear)) of every hidden layer."""

    def __init__(self, input_size: int, hidden: Sequence[int], head_sizes: Sequence[int],
                 input_dropout: float = 0.0, dropout: float = 0.0, smax: float = 400.0,
                 embedding_init: str = "normal", embedding_init_scale: float = 2.0) -> None:
        MLP.__init__(self, input_size, hidden, head_sizes, input_dropout, dropout)
        self.smax = smax
        self.embeddings = make_embeddings(len(head_sizes), list(hidden), embedding_init, embedding_init_scale)

    def gated_modules(self) -> list[nn.Module]:
        return list(self.layers)

    def layer_shapes(self) -> list[LayerShape]:
        return [LayerShape(f"fc{index + 1}", tuple(layer.weight.shape), gated_input=index > 0)
                for index, layer in enumerate(self.layers)]

    def gated_features(self, x: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
        h = self.input_dropout(x.flatten(1))  # (B, D)
        for layer, mask in zip(self.layers, masks):
            h = self.dropout(torch.relu(layer(h))) * mask  # (B, H_l)
        return h


class HatAlexNet(GatedNet, AlexNet):
    """`AlexNet` with a HAT mask per conv channel (after maxpool) and per fc unit (after dropout)."""

    def __init__(self, input_shape: Sequence[int], head_sizes: Sequence[int],
                 conv_channels: Sequence[int] = (64, 128, 256), conv_kernels: Sequence[int] = (4, 3, 2),
                 conv_dropout: Sequence[float] = (0.2, 0.2, 0.5), fc_units: Sequence[int] = (2048, 2048),
                 fc_dropout: float = 0.5, smax: float = 400.0, embedding_init: str = "normal",
                 embedding_init_scale: float = 2.0) -> None:
        AlexNet.__init__(self, input_shape, head_sizes, conv_channels, conv_kernels, conv_dropout, fc_units,
                         fc_dropout)
        self.smax = smax
        units = [*conv_channels, *fc_units]
        self.embeddings = make_embeddings(len(head_sizes), units, embedding_init, embedding_init_scale)

    def gated_modules(self) -> list[nn.Module]:
        return [*self.convs, *self.fcs]

    def layer_shapes(self) -> list[LayerShape]:
        shapes = [LayerShape(f"conv{index + 1}", tuple(conv.weight.shape), gated_input=index > 0)
                  for index, conv in enumerate(self.convs)]
        spatial = self.spatial_side**2  # positions per channel after flatten
        shapes += [LayerShape(f"fc{index + 1}", tuple(fc.weight.shape), input_repeat=spatial if index == 0 else 1)
                   for index, fc in enumerate(self.fcs)]
        return shapes

    def gated_features(self, x: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
        h = x  # (B, 3, 32, 32)
        n_convs = len(self.convs)
        for conv, dropout, mask in zip(self.convs, self.conv_dropouts, masks[:n_convs]):
            h = functional.max_pool2d(dropout(torch.relu(conv(h))), 2) * mask.view(1, -1, 1, 1)  # (B, C_l, S_l, S_l)
        h = h.flatten(1)  # (B, C * S * S), channel-major
        for fc, mask in zip(self.fcs, masks[n_convs:]):
            h = self.fc_dropout(torch.relu(fc(h))) * mask  # (B, F_l)
        return h


def build_hat_network(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int], smax: float,
                      embedding_init: str = "normal", embedding_init_scale: float = 2.0) -> GatedNet:
    """The HAT-gated version of the body `spec` describes, one head and one set of embeddings per task."""
    if spec.kind == "mlp":
        return HatMLP(prod(input_shape), spec.hidden, head_sizes, spec.input_dropout, spec.dropout, smax,
                      embedding_init, embedding_init_scale)
    return HatAlexNet(input_shape, head_sizes, spec.conv_channels, spec.conv_kernels, spec.conv_dropout,
                      spec.fc_units, spec.fc_dropout, smax, embedding_init, embedding_init_scale)
