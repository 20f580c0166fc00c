"""Multi-layer perceptrons for the MNIST benchmarks (split MNIST, permuted MNIST), one head per task."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from clbench.nets.common import MultiHeadNet


class MLP(MultiHeadNet):
    """input -> [Linear -> ReLU -> Dropout] x L -> one Linear head per task (`bias`: False, no biases anywhere)."""

    def __init__(self, input_size: int, hidden: Sequence[int], head_sizes: Sequence[int],
                 input_dropout: float = 0.0, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        sizes = [input_size, *hidden]
        self.input_dropout = nn.Dropout(input_dropout)
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(sizes[:-1], sizes[1:]))
        self.dropout = nn.Dropout(dropout)
        self.feature_size = sizes[-1]
        self.heads = self.make_heads(self.feature_size, head_sizes, bias)
        self.reset_parameters()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        # dropout with p = 0 returns its input and draws nothing: skipped, with its call
        h = x.flatten(1) if self.input_dropout.p == 0 else self.input_dropout(x.flatten(1))  # (B, D)
        for layer in self.layers:
            h = torch.relu(layer(h))  # (B, H_l)
            if self.dropout.p:
                h = self.dropout(h)
        return h


class NormedHead(nn.Module):
    """A task's linear head followed by a BatchNorm1d over its outputs (`BatchNormMLP`)."""

    def __init__(self, feature_size: int, n_classes: int, bias: bool, eps: float) -> None:
        super().__init__()
        self.linear = nn.Linear(feature_size, n_classes, bias=bias)
        self.norm = nn.BatchNorm1d(n_classes, eps=eps)

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(features))  # (B, n_classes)


class BatchNormMLP(MLP):
    """input -> [Linear -> BatchNorm1d -> ReLU -> Dropout] x L -> one Linear -> BatchNorm1d head per task: the GDumb
    authors' MNIST MLP (drimpossible/GDumb@4f412d7 `src/models/mnist/mlp.py`, `src/models/layers.py` `FCBlock` and
    `FinalBlock` with `--bn`, their default). A BatchNorm1d normalises each output on its own, so the heads' norms side
    by side are one norm over the output of every class. The heads are not one linear map (`stacked_heads` refuses)."""

    def __init__(self, input_size: int, hidden: Sequence[int], head_sizes: Sequence[int],
                 input_dropout: float = 0.0, dropout: float = 0.0, bias: bool = True, eps: float = 1e-5) -> None:
        super().__init__(input_size, hidden, head_sizes, input_dropout, dropout, bias)
        self.norms = nn.ModuleList(nn.BatchNorm1d(size, eps=eps) for size in hidden)
        self.heads = nn.ModuleList(NormedHead(self.feature_size, n, bias, eps) for n in head_sizes)
        self.reset_parameters()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1) if self.input_dropout.p == 0 else self.input_dropout(x.flatten(1))  # (B, D)
        for layer, norm in zip(self.layers, self.norms, strict=True):
            h = torch.relu(norm(layer(h)))  # (B, H_l)
            if self.dropout.p:
                h = self.dropout(h)
        return h

    def all_heads(self, features: torch.Tensor) -> torch.Tensor:
        """Every head (linear map, then its norm) on `features`, side by side: (B, every class)."""
        return torch.cat([head(features) for head in self.heads], dim=1)

    def stacked_heads(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise TypeError("the heads of a BatchNormMLP are a linear map followed by a batch norm, not one linear map")
