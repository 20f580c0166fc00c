"""The paper's optimiser, plain SGD, without `torch.optim`.

`torch.optim.Optimizer` imports `torch._dynamo` when the first optimiser is built (about 2 s of every run's start-up
on 2 CPU cores), although the paper's protocol compiles nothing: plain SGD without momentum or weight decay (HAT
paper, Section 4, Training). `PlainSGD` takes the same step as `torch.optim.SGD(params, lr)` and offers what the
training loop uses of an optimiser (`param_groups`, `zero_grad`, `step`), so an approach may still return any
`torch.optim` optimiser from `make_optimizer`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    CPU torch's multi-tensor add is the same `add_` tensor by tensor (`torch.optim.SGD`'s single-tensor path
    there), in one call from Python.
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
            torch._foreach_add_(with_grad, [p.grad for p in with_grad], alpha=-group["lr"])


def clip_grad_norm(parameters: Sequence[torch.nn.Parameter], max_norm: float) -> None:
    """`torch.nn.utils.clip_grad_norm_(parameters, max_norm)` bit for bit, with less Python around it.

    The same operations on the gradients of one device and dtype (torch's multi-tensor path): the 2-norm of the
    per-tensor 2-norms, the coefficient `max_norm / (norm + 1e-6)` clamped at 1, every gradient multiplied by it.
    On the CPU a coefficient of 1 skips the multiplication (g * 1.0 == g exactly, and reading the coefficient
    costs no device synchronisation there); on other devices the gradients are always multiplied, so that no step
    waits for the device. Gradients of several devices or dtypes, or of tensor subclasses, go to torch's function.
    """
    gradients = [p.grad for p in parameters if p.grad is not None]
    if not gradients:
        return
    first = gradients[0]
    if any(type(g) is not torch.Tensor or g.device != first.device or g.dtype != first.dtype or g.is_sparse
           for g in gradients):
        torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        return
    with torch.no_grad():
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(gradients, 2.0)), 2.0)
        coefficient = torch.clamp(float(max_norm) / (norm + 1e-6), max=1.0)
        if first.device.type == "cpu" and coefficient.item() == 1.0:
            return
        torch._foreach_mul_(gradients, coefficient)


def protocol_optimizer(parameters: Iterable[torch.nn.Parameter], lr: float, optimizer: str = "sgd",
                       momentum: float = 0.0, weight_decay: float = 0.0) -> StepOptimizer:
    """The optimiser a protocol names (`training.optimizer`, `momentum`, `weight_decay`) at learning rate `lr`.

    sgd without momentum or weight decay is the paper's plain SGD (`PlainSGD`, HAT paper Section 4, Training);
    with either, `torch.optim.SGD(momentum, weight_decay)`; adam, `torch.optim.Adam(lr, weight_decay)` at torch's
    betas (0.9, 0.999) and eps 1e-8 (WSN's authors train with Adam: ihaeyong/WSN).
    """
    if optimizer == "adam":
        return torch.optim.Adam(parameters, lr=lr, weight_decay=weight_decay)
    if optimizer != "sgd":
        raise ValueError(f"unknown optimizer {optimizer!r}: sgd or adam")
    if momentum == 0.0 and weight_decay == 0.0:
        return PlainSGD(parameters, lr=lr)
    return torch.optim.SGD(parameters, lr=lr, momentum=momentum, weight_decay=weight_decay)
