"""SupSup's network: an MLP of fixed signed-constant weights whose every layer, the output layer included, has one
score tensor per task; task t's network is the weights times task t's supermasks (the authors' `MultitaskFC` of
`MultitaskMaskLinear` layers, RAIVNLab/supsup@6a31878 `mnist.ipynb` cells 3 and 6).

The layers have no biases (the authors' `bias=False`, `mnist.ipynb` cell 6, `models/builder.py:32-37`), whatever
`network.bias` says; the spec's dropout (on the input, after each hidden ReLU) in training only (the authors' MLP
has none; the one-shot inference runs in evaluation mode). The output layer is one fixed (C, H) weight shared by
every task, C = max(`output_size`, the widest task head), as the authors' masked last layer of `output_size`
outputs (`models/small.py:43`; 100 in `mnist.ipynb` cell 6): `forward` gives all C outputs (the training loss runs
over them, labels 0..n_t - 1) and task t's classes are the first `head_sizes[t]`.

Parameters: `scores.<layer>.<task>`, one (out, in) tensor each, so training task t's scores cannot touch another
task's. Buffers: `weight_<layer>`, the fixed weights, stored with the network and never trained.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.supsup import functions


class SupSupMLP(nn.Module):
    """input -> [masked Linear -> ReLU] x L -> masked Linear (C outputs); task t's masks pick its subnetwork."""

    def __init__(self, input_size: int, hidden: Sequence[int], head_sizes: Sequence[int], rule: str = "threshold",
                 density: float = 0.5, input_dropout: float = 0.0, dropout: float = 0.0,
                 output_size: int = 0) -> None:
        super().__init__()
        self.input_dropout = nn.Dropout(input_dropout)
        self.dropout = nn.Dropout(dropout)
        sizes = [input_size, *hidden, max(output_size, *head_sizes)]
        self.head_sizes = tuple(head_sizes)
        self.rule, self.density = rule, density
        self.shapes = list(zip(sizes[1:], sizes[:-1]))  # (out, in) per layer
        for index, (out_features, in_features) in enumerate(self.shapes):
            self.register_buffer(f"weight_{index}", functions.signed_constant(out_features, in_features))
        self.scores = nn.ModuleList(
            nn.ParameterList(nn.Parameter(functions.initial_scores(out_features, in_features))
                             for _ in head_sizes)
            for out_features, in_features in self.shapes)

    def weights(self) -> list[torch.Tensor]:
        """The fixed weights, one (out, in) per layer."""
        return [getattr(self, f"weight_{index}") for index in range(len(self.shapes))]

    def task_scores(self, task: int) -> list[nn.Parameter]:
        """Task `task`'s scores, one (out, in) per layer: what training task `task` updates."""
        return [layer[task] for layer in self.scores]

    def masks(self, task: int) -> list[torch.Tensor]:
        """Task `task`'s supermasks, one 0/1 (out, in) per layer (no gradient)."""
        return [functions.supermask(scores, self.rule, self.density) for scores in self.task_scores(task)]

    def stacked_masks(self, tasks: Sequence[int]) -> list[torch.Tensor]:
        """Per layer the masks of `tasks` stacked: (K, out, in)."""
        return [functions.stacked_masks([layer[task] for task in tasks], self.rule, self.density)
                for layer in self.scores]

    def forward(self, x: torch.Tensor, task: int) -> torch.Tensor:
        """Every output (B, C) under task `task`'s masks (its classes: the first `head_sizes[task]`); the gradient
        reaches its scores straight through the masks."""
        h = self.input_dropout(x.flatten(1))  # (B, D)
        weights = self.weights()
        for index, (weight, scores) in enumerate(zip(weights, self.task_scores(task))):
            h = functional.linear(h, weight * functions.straight_through_mask(scores, self.rule, self.density))
            if index < len(weights) - 1:
                h = self.dropout(functional.relu(h))  # (B, H_l)
        return h

    def infer_tasks(self, x: torch.Tensor, n_candidates: int) -> torch.Tensor:
        """(B,) each sample's task among 0..n_candidates-1 by one-shot entropy inference over their masks
        superposed (`functions.infer_tasks`); the entropy is over the output layer's C outputs."""
        if n_candidates == 1:
            return torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
        return functions.infer_tasks(x.flatten(1), self.weights(), self.stacked_masks(range(n_candidates)))
