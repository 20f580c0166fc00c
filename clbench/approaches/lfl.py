"""LFL: less-forgetting learning (Jung et al. 2016).

Training task t > 1: cross-entropy on the current head + lamb * sum over the batch of
1/2 ||h(x) - h_prev(x)||^2, h the penultimate activations (the body's output) of the current network and
h_prev those of the network frozen after task t-1 (eval mode, no dropout, as the reference). The penalty is
summed over the batch, not averaged, as the reference (its lamb 0.05 assumes batches of 64); the validation
loss includes it with the same scale: lamb * batch_size * mean per-sample penalty. 0 on the first task.

Penultimate layer: the reference's LFL network has no dropout after its last fully-connected layer, so both
the heads and the penalty see undropped activations. clbench does the same: LFL takes the body's output
before its final dropout (`penultimate`), for the heads and the penalty, in training as in evaluation
(where dropout is inactive anyway); earlier dropout layers act as usual. A body without a fully-connected layer
(resnet18: global average pooling, no dropout) gives its output, which is then the penultimate layer itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from clbench.approaches.datatypes import Hyperparameters, StepInfo
from clbench.approaches.previous_model import ApproachWithPreviousModel
from clbench.approaches.regularizers import lfl_penalty
from clbench.data.batches import Batch
from clbench.nets import MultiHeadNet
from clbench.spec.fields import field


def last_body_linear(network: MultiHeadNet) -> nn.Linear | None:
    """The body's last fully-connected layer (the MLP and AlexNet end with Linear -> ReLU -> Dropout); None if the
    body has none (resnet18 ends with global average pooling)."""
    head_ids = {id(module) for module in network.heads.modules()}
    layers = [m for m in network.modules() if isinstance(m, nn.Linear) and id(m) not in head_ids]
    return layers[-1] if layers else None


def penultimate(network: MultiHeadNet, inputs: torch.Tensor) -> torch.Tensor:
    """The body's output before its final dropout: ReLU of the last body layer's output, (B, F); a body without a
    fully-connected layer: its output (resnet18's pooled features, which no dropout follows)."""
    last = last_body_linear(network)
    if last is None:
        return network.features(inputs)  # (B, F)
    captured: list[torch.Tensor] = []
    handle = last.register_forward_hook(lambda module, args, output: captured.append(output))
    try:
        features = network.features(inputs)  # (B, F), after the final dropout
    finally:
        handle.remove()
    activations = torch.relu(captured[-1])  # (B, F)
    if activations.shape != features.shape:
        raise TypeError(f"{type(network).__name__}: LFL needs a body ending with Linear -> ReLU -> Dropout")
    return activations


@dataclass(frozen=True)
class LFLHyperparameters(Hyperparameters):
    """LFL's hyper-parameters (reference defaults, grid-searched on seed 0)."""

    clip_grad_norm: float = field(200.0, doc="gradient-norm clipping (reference lfl: 200)",
                                  minimum=0.0, special={0.0: "no clipping"})
    lamb: float = field(0.05, doc="weight of the penultimate-activation L2 penalty (Jung et al. 2016; "
                                  "reference 0.05, grid 0.1, 0.05, 0.01, 5e-3, 1e-3, 5e-4, 1e-4, 5e-5)",
                        minimum=0.0)


class LFL(ApproachWithPreviousModel):
    """Cross-entropy on the new task plus an L2 pull of the penultimate activations towards the previous model.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/lfl.py`,
    `src/networks/alexnet_lfl.py`.
    """

    name = "lfl"
    summary = "less-forgetting learning (Jung et al. 2016)"
    hyperparameters_class = LFLHyperparameters
    hparams: LFLHyperparameters

    def activation_penalty(self, inputs: torch.Tensor, activations: torch.Tensor, stage: int) -> torch.Tensor:
        """Per-sample 1/2 ||h - h_prev||^2: (B,); zeros on the first task."""
        if stage == 0:
            return torch.zeros(activations.shape[0], device=activations.device, dtype=activations.dtype)
        previous = self.previous.features(inputs, stage)  # (B, F): eval mode, equal to its penultimate
        return lfl_penalty(activations, previous)

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        activations = penultimate(self.multihead, batch.inputs)  # (B, F)
        cross_entropy = self.scenario_cross_entropy(activations, batch, step.stage)[0]
        return cross_entropy + self.hparams.lamb * self.activation_penalty(batch.inputs, activations,
                                                                           step.stage).sum()

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        activations = self.multihead.features(batch.inputs)  # (B, F): eval mode, no dropout
        loss, correct = self.scenario_cross_entropy(activations, batch, stage, reduction="sum")
        scale = self.hparams.lamb * self.training_protocol.batch_size
        loss = loss + scale * self.activation_penalty(batch.inputs, activations, stage).sum()
        return loss, correct
