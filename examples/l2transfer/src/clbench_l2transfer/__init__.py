"""L2-transfer, a clbench plugin written only against `clbench.api`.

Training loss of task t > 1: cross-entropy on the task's head + lamb * sum_i (theta_i - theta_prev_i)^2 over
the shared body (heads excluded), theta_prev = the weights after the previous task (the anchor). The HAT
paper's baselines include it (split MNIST: 85.8%); the reference's lambda default is 0.01 (its imm-mode
uses the same L2-transfer term while training).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

import clbench.api as cl

__all__ = ["L2Transfer", "L2TransferHyperparameters", "l2_transfer_penalty"]


@dataclass(frozen=True)
class L2TransferHyperparameters(cl.Hyperparameters):
    """L2-transfer's hyper-parameters."""

    lamb: float = cl.field(0.01, doc="penalty strength lambda (reference L2-transfer default 0.01, grid 10..1e-5)",
                           minimum=0.0)


def l2_transfer_penalty(parameters: cl.ParameterDict, anchor: cl.ParameterDict, lamb: float) -> torch.Tensor:
    """lamb * sum over the anchor's parameters of (theta - theta_prev)^2 (a scalar tensor)."""
    total = sum(((parameters[name] - theta_prev) ** 2).sum() for name, theta_prev in anchor.items())
    return lamb * torch.as_tensor(total)


class L2Transfer(cl.Approach):
    """Fine-tuning held near the previous task's body weights by an L2 penalty."""

    name = "l2transfer"
    summary = "L2 penalty towards the previous task's weights (L2-transfer)"
    hyperparameters_class = L2TransferHyperparameters
    hparams: L2TransferHyperparameters

    def __init__(self, context: cl.ApproachContext, hyperparameters: cl.Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.anchor: cl.ParameterDict = {}  # body parameter name -> weights after the previous task

    def penalty(self, stage: int) -> torch.Tensor | float:
        if not self.anchor:
            return 0.0
        parameters = dict(cl.named_body_parameters(self.multihead))
        return l2_transfer_penalty(parameters, self.anchor, self.hparams.lamb)

    def end_task(self, stage: int, tasks: cl.TaskSequence) -> None:
        self.anchor = cl.detached_parameters(cl.named_body_parameters(self.multihead))

    def extra_state(self) -> dict[str, Any]:
        return {"anchor": self.anchor}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.anchor = cl.tensors_to(state.get("anchor", {}), self.device)
