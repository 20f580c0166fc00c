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
