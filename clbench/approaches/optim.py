"""The paper's optimiser, plain SGD, without `torch.optim`.

`torch.optim.Optimizer` imports `torch._dynamo` when the first optimiser is built (about 2 s of every run's start-up
on 2 CPU cores), although the paper's protocol compiles nothing: plain SGD without momentum or weight decay (HAT
paper, Section 4, Training). `PlainSGD` takes the same step as `torch.optim.SGD(params, lr)` and offers what the
training loop uses of an optimiser (`param_groups`, `zero_grad`, `step`), so an approach may still return any
`torch.optim` optimiser from `make_optimizer`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import torch


class StepOptimizer(Protocol):
    """What the training loop needs of an optimiser (`torch.optim.Optimizer` has it too)."""

    param_groups: list[dict[str, Any]]

    def zero_grad(self, set_to_none: bool = True) -> None: ...

    def step(self) -> Any: ...


class PlainSGD:
    """p <- p - lr * grad for every parameter with a gradient: `torch.optim.SGD(params, lr)`'s step (no momentum,
    dampening, weight decay or Nesterov), bit for bit.

    One `_foreach_add_` over the parameters, as `torch.optim.SGD` takes it on CUDA (its multi-tensor path); on the
    CPU it adds tensor by tensor, as `torch.optim.SGD`'s single-tensor path does there.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float) -> None:
        if lr <= 0.0:
            raise ValueError(f"learning rate {lr} must be > 0")
        self.param_groups: list[dict[str, Any]] = [{"params": list(params), "lr": float(lr)}]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                if set_to_none:
                    parameter.grad = None
                else:
                    parameter.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            with_grad = [p for p in group["params"] if p.grad is not None]
            if not with_grad:
                continue
            gradients = [p.grad for p in with_grad]
            if with_grad[0].device.type == "cpu":
                for parameter, gradient in zip(with_grad, gradients):
                    parameter.add_(gradient, alpha=-group["lr"])
            else:
                torch._foreach_add_(with_grad, gradients, alpha=-group["lr"])
