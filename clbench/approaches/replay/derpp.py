"""DER++: dark experience replay (Buzzega, Boschini, Porrello, Abati & Calderara 2020, NeurIPS).

The memory keeps each sample with the logits the network gave it when it was stored (reservoir sampling of
every step's batch, after the step). The loss of a step is the current batch's cross-entropy, plus alpha times
the mean squared error between the network's logits on a memory batch and the stored ones, plus beta times the
cross-entropy of a second, independently drawn memory batch with its labels (Mammoth `models/derpp.py`,
`observe`). The logits are those of every head side by side (every class of the sequence, as Mammoth's single
output layer); in the class scenario the cross-entropies are over the classes of `training.class_loss`.

The loss its paper used: in the class-incremental settings, the cross-entropies over every output of the single
head, the classes of future tasks included (Mammoth `models/derpp.py`: `self.loss(outputs, labels)` on the whole
output; the DER paper's numbers come from that code), so the stored logits carry low scores for classes not seen
yet and the logit matching keeps them low: `training.class_loss: all`, as `benchmarks/seq-mnist.yaml` sets it. With
clbench's default (`seen`) DER++ loses about six points of class-IL accuracy on seq-MNIST.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn import functional

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.approaches.replay.functions import logit_matching_loss
from clbench.data.batches import Batch
from clbench.spec.fields import field


@dataclass(frozen=True)
class DERPPHyperparameters(ReplayHyperparameters):
    """DER++'s weights (defaults: Mammoth `utils/best_args.py`, seq-cifar10, buffer 200)."""

    alpha: float = field(0.1, doc="weight of the logit matching (MSE) term (Mammoth best_args: seq-mnist 0.2 at "
                                  "buffer 200, 1.0 at 500; seq-cifar10 0.1 at 200, 0.2 at 500)", minimum=0.0)
    beta: float = field(0.5, doc="weight of the replayed labels' cross-entropy (Mammoth best_args: seq-mnist 1.0 "
                                 "at buffer 200, 0.5 at 500; seq-cifar10 0.5 at 200 and 500)", minimum=0.0)


class DERPlusPlus(ReplayApproach):
    """Cross-entropy, plus matching stored logits and replayed labels; the batch stored with its logits.

    The authors' code: aimagelab/mammoth@e75a491 `models/derpp.py` (Mammoth is the DER authors' library).
    """

    name = "derpp"
    summary = "dark experience replay++ (Buzzega et al. 2020)"
    hyperparameters_class = DERPPHyperparameters
    hparams: DERPPHyperparameters

    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        """Loss (with two draws from the memory), step, store the batch with its logits from before the step
        (Mammoth `models/derpp.py` `observe`: `add_data` after `opt.step()`)."""
        with self.autocast():
            loss, logits = self.objective(batch, step.stage)
        self.backward_and_step(loss, step, optimizer)
        self.store(batch, logits)
        return loss.detach()

    def objective(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the step's loss, the batch's logits over every class, detached): the batch's cross-entropy, then two
        memory batches drawn for the logit matching and the replayed labels (drawn before the batch is stored)."""
        every_output = self.every_output_map()
        features = self.multihead.features(batch.inputs)
        every = every_output(features)  # (B, every class): stored after the step
        if self.loss_over_every_output:  # class_loss all: the loss is over these same logits
            loss = functional.cross_entropy(every, self.class_targets(batch))
        else:
            loss = self.scenario_cross_entropy(features, batch, stage)[0]
        first = self.replayed()
        if first is None:
            return loss, every.detach()
        batch_1, memory_1 = first
        assert memory_1.logits is not None
        current = every_output(self.multihead.features(batch_1.inputs))
        loss = loss + self.hparams.alpha * logit_matching_loss(current, memory_1.logits)
        second = self.replayed()
        assert second is not None
        batch_2 = second[0]
        features_2 = self.multihead.features(batch_2.inputs)
        if self.loss_over_every_output:
            labels = functional.cross_entropy(every_output(features_2), self.class_targets(batch_2))
        else:
            labels = self.scenario_cross_entropy(features_2, batch_2, stage)[0]
        return loss + self.hparams.beta * labels, every.detach()

    def every_output_map(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """features -> every head's logits side by side, for one step's three forward passes: with class_loss
        all one linear map whose weights are put side by side once per step (the same values as `all_heads`),
        else `seen_logits` over every task."""
        if not self.loss_over_every_output:
            return lambda features: self.seen_logits(features, len(self.context.head_sizes))
        weight, bias = self.multihead.stacked_heads()
        return lambda features: functional.linear(features, weight, bias)
