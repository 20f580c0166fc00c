"""The multi-head network interface every approach builds on."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class MultiHeadNet(nn.Module):
    """A shared body (`features`) and one linear head per task; the task id is known at test time."""

    feature_size: int
    heads: nn.ModuleList

    @staticmethod
    def make_heads(feature_size: int, head_sizes: Sequence[int]) -> nn.ModuleList:
        return nn.ModuleList(nn.Linear(feature_size, n) for n in head_sizes)

    def features(self, x: torch.Tensor) -> torch.Tensor:  # (B, ...) -> (B, F)
        raise NotImplementedError

    def forward(self, x: torch.Tensor, task: int, seen: bool = False) -> torch.Tensor:
        """Logits of task `task`'s head: (B, n_classes[task]); with `seen`, the heads of tasks 0..task
        concatenated, the class scenario's output over every class seen so far: (B, sum of their classes)."""
        features = self.features(x)
        if seen:
            return torch.cat([self.heads[u](features) for u in range(task + 1)], dim=1)
        return self.heads[task](features)

    def all_heads(self, features: torch.Tensor) -> torch.Tensor:
        """Every head on `features` as one linear map (the heads' weights and biases side by side): (B, every class).
        The same values as concatenating each head's output, up to float rounding (one matrix product)."""
        weight = torch.cat([head.weight for head in self.heads])  # (every class, F)
        bias = torch.cat([head.bias for head in self.heads])  # (every class,)
        return nn.functional.linear(features, weight, bias)

    def class_offset(self, task: int) -> int:
        """Where task `task`'s classes start in the output over every class (`forward(..., seen=True)`)."""
        return sum(head.out_features for head in self.heads[:task])

    def compile_body(self) -> None:
        """torch.compile the body (`features`) in place; the task only picks the head, outside the graph."""
        self.features = torch.compile(self.features)  # type: ignore[method-assign]

    def body_parameters(self) -> list[nn.Parameter]:
        """Every parameter except the heads'."""
        head_ids = {id(p) for p in self.heads.parameters()}
        return [p for p in self.parameters() if id(p) not in head_ids]

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases (the paper: Xavier uniform initialisation)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)


def parameter_count(module: nn.Module) -> int:
    """Number of parameters (trainable or not)."""
    return sum(p.numel() for p in module.parameters())
