"""The multi-head network interface every approach builds on."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class TiedHeads(nn.ModuleList):
    """One head that every one of `n_tasks` tasks uses: `heads[t]` is that head for each task t, `len(heads)` is
    `n_tasks`, iterating gives it once per task; it is registered (and in `state_dict`, `parameters()`) once, as
    `0`, so nothing aliases it (`torch.func.functional_call` and checkpoints see one tensor per weight)."""

    def __init__(self, head: nn.Module, n_tasks: int) -> None:
        super().__init__()
        self.add_module("0", head)
        self.n_tasks = n_tasks

    def __getitem__(self, index: int | slice) -> nn.Module | list[nn.Module]:  # type: ignore[override]
        head = self._modules["0"]
        if isinstance(index, slice):
            return [head] * len(range(*index.indices(self.n_tasks)))
        if not -self.n_tasks <= index < self.n_tasks:
            raise IndexError(f"task {index} out of range for {self.n_tasks} tasks")
        return head

    def __len__(self) -> int:
        return self.n_tasks

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([self._modules["0"]] * self.n_tasks)


class MultiHeadNet(nn.Module):
    """A shared body (`features`) and one linear head per task; the task id is known at test time."""

    feature_size: int
    heads: nn.ModuleList

    @staticmethod
    def make_heads(feature_size: int, head_sizes: Sequence[int], bias: bool = True) -> nn.ModuleList:
        return nn.ModuleList(nn.Linear(feature_size, n, bias=bias) for n in head_sizes)

    def features(self, x: torch.Tensor) -> torch.Tensor:  # (B, ...) -> (B, F)
        raise NotImplementedError

    def forward(self, x: torch.Tensor, task: int, seen: bool = False) -> torch.Tensor:
        """Logits of task `task`'s head: (B, n_classes[task]); with `seen`, the heads of tasks 0..task
        concatenated, the class scenario's output over every class seen so far: (B, sum of their classes)."""
        features = self.features(x)
        if seen:
            return torch.cat([self.heads[u](features) for u in range(task + 1)], dim=1)
        return self.heads[task](features)

    def tie_heads(self) -> None:
        """Make every task's head the first task's head (`TiedHeads`): the domain scenario's shared output layer.
        `heads[t]` still names task t's head, so code that picks a task's head needs no change; the shared head is
        stored once (`heads.0.*`). The other heads' initial weights are dropped."""
        self.heads = TiedHeads(self.heads[0], len(self.heads))

    def distinct_heads(self, n_tasks: int) -> list[int]:
        """The tasks among 0..n_tasks-1 whose head is no earlier task's head: all of them, or [0] when the heads are
        tied (each distinct head once)."""
        heads = self.heads
        return [task for task in range(n_tasks) if all(heads[task] is not heads[u] for u in range(task))]

    @property
    def heads_tied(self) -> bool:
        """True when every task's head is one module (`tie_heads`)."""
        return isinstance(self.heads, TiedHeads)

    def all_heads(self, features: torch.Tensor) -> torch.Tensor:
        """Every head on `features` as one linear map (the heads' weights and biases side by side): (B, every class).
        The same values as concatenating each head's output, up to float rounding (one matrix product)."""
        return nn.functional.linear(features, *self.stacked_heads())

    def stacked_heads(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(weight (every class, F), bias (every class,) or None for heads without biases): every head's weights
        and biases side by side."""
        heads = list(self.heads)
        bias = None if heads[0].bias is None else torch.cat([head.bias for head in heads])
        return torch.cat([head.weight for head in heads]), bias

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
                if module.bias is not None:
                    nn.init.zeros_(module.bias)


def parameter_count(module: nn.Module) -> int:
    """Number of parameters (trainable or not)."""
    return sum(p.numel() for p in module.parameters())


def compile_network(network: nn.Module) -> None:
    """torch.compile a network's body in place (parameter names and `state_dict` keys do not change).

    A multi-head net compiles what its `compile_body` says: `features` (the task only picks the head, outside
    the graph), or, HAT-gated, `gated_features` (the masks are tensor inputs: neither the task nor the annealed
    s recompiles it); other networks (PNN, PathNet) compile their whole forward, which recompiles per task or
    path.
    """
    if isinstance(network, MultiHeadNet):
        network.compile_body()
    else:
        network.compile()
