"""ER-ACE: experience replay with the asymmetric cross-entropy (Caccia, Aljundi, Asadi, Tuytelaars, Pineau &
Belilovsky 2022, ICLR, "New insights on reducing abrupt representation change in online continual learning";
Mammoth `models/er_ace.py`, aimagelab/mammoth@e75a491).

One step: the incoming batch's cross-entropy over its logits with the classes of earlier tasks that are not in the
batch masked (filled with -1e9, so they take no probability and get no gradient), plus the cross-entropy of a
batch replayed from the memory over every class of the loss (nothing masked); then the optimiser step; then the
incoming batch offered to the memory by reservoir sampling (Mammoth `observe`, lines 57-91: `add_data` after
`opt.step()`). The incoming batch no longer pushes the old classes' logits down, which is what moves their
representations abruptly when a new task starts (the paper's argument, as its title says).

The mask, exactly as Mammoth's `observe` builds it (lines 59-71): a class is kept when it is in the batch
(`present = labels.unique()`) or when its index is at least the largest class index seen in any incoming batch so
far (`seen_so_far.max()`, the batch's own included): the earlier tasks' classes absent from the batch are masked;
the current task's classes not yet met and the future classes stay (with `training.class_loss: seen` the future
classes are not among the logits anyway). Not "the current task's classes": a current-task class met before but
absent from this batch is masked too, as in Mammoth (with batches of 10 over 2 classes, rare). The classes seen
are tracked over every incoming batch from the first task on (replayed labels do not count), and checkpointed;
task t's classes come after every earlier task's in the output, so the largest seen is always the current task's.
During the first task nothing is masked and nothing is replayed (though the memory fills), unless `task_free`
(Mammoth's `--task_free`, line 44 and lines 70, 77).

Mammoth's ER-ACE replaces the network's classifier by a cosine one by default (`--use_custom_classifier`, default
True, line 45: "the custom classifier used in the original work"; `CustomLinear`, lines 15-33): no bias, logits =
10 x the cosine between the features and each class's weight vector. Here `cosine_classifier` (default True) makes
each task's head a `CosineHead` of the same formula; the heads side by side are that one classifier (each row is
normalised on its own).

Scenarios: the class scenario is the method's. In the task scenario each sample's loss is on its own task's head,
so the incoming batch's loss is already over its task's classes only: there ER-ACE is ER (each sample on its own
head), written as Mammoth's sum of the two means, replaying from the second task on, with the cosine heads. The
domain scenario is refused (every task has the same classes: there is no old class to mask; Mammoth's
`COMPATIBILITY` is class-il and task-il).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.data.batches import Batch
from clbench.spec.fields import field

MASKED_LOGIT = -1e9  # Mammoth `models/er_ace.py` line 71: `logits.masked_fill(mask == 0, -1e9)`


def ace_kept_classes(present: torch.Tensor, seen: torch.Tensor, n_logits: int) -> torch.Tensor:
    """Which of `n_logits` classes the incoming batch's loss keeps: (n_logits,) bool.

    `present`: the batch's class indices (B,); `seen`: (n_classes,) bool, the classes of every incoming batch so far,
    this one's included. Kept: the present classes, and every class from the largest seen index on (Mammoth
    `models/er_ace.py` lines 63-68: `mask[:, present] = 1`, `mask[:, seen_so_far.max():] = 1`).
    """
    indices = torch.arange(n_logits, device=present.device)  # (K,)
    largest_seen = torch.where(seen, torch.arange(seen.shape[0], device=seen.device), -1).max()
    kept = indices >= largest_seen  # (K,)
    return kept.index_fill(0, present, True)


def asymmetric_logits(logits: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The logits (B, K) with the classes not `kept` (K,) filled with `MASKED_LOGIT`: no probability, no gradient."""
    return logits.masked_fill(~kept, MASKED_LOGIT)


class CosineHead(nn.Linear):
    """A bias-free head whose logits are `scale` x the cosine between the features and each class's weights (Mammoth
    `models/er_ace.py` `CustomLinear`, lines 15-33: x / (|x| + 1e-5) and W / (|W_row| + 1e-5), scale 10)."""

    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__(in_features, out_features, bias=False)
        self.scale = scale

    def forward(self, features: torch.Tensor) -> torch.Tensor:  # (B, F) -> (B, out_features)
        unit = features / (features.norm(dim=1, keepdim=True) + 1e-5)
        weight = self.weight / (self.weight.norm(dim=1, keepdim=True) + 1e-5)
        return self.scale * unit @ weight.t()


@dataclass(frozen=True)
class ERACEHyperparameters(ReplayHyperparameters):
    """ER-ACE's switches (defaults: Mammoth `models/er_ace.py` `get_parser`, lines 42-47)."""

    task_free: bool = field(False, doc="mask and replay from the first task on, not from the second (Mammoth "
                                       "er_ace.py --task_free, default False; config/er_ace.yaml seq-cifar10: 1)")
    cosine_classifier: bool = field(True, doc="cosine heads without bias, logits = cosine_scale x cos (Mammoth "
                                              "er_ace.py --use_custom_classifier, default True)")
    cosine_scale: float = field(10.0, doc="the cosine heads' scale (Mammoth er_ace.py CustomLinear.scale_factor = "
                                          "10)", above=0.0)


class ERACE(ReplayApproach):
    """The incoming batch's cross-entropy with absent earlier classes masked, plus a replayed batch's over all.

    The authors' code as Mammoth has it: aimagelab/mammoth@e75a491 `models/er_ace.py` (`ErACE.observe`).
    """

    name = "er-ace"
    summary = "experience replay with the asymmetric cross-entropy (Caccia et al. 2022)"
    hyperparameters_class = ERACEHyperparameters
    hparams: ERACEHyperparameters
    refuses_domain = ("its mask keeps the incoming batch off the earlier tasks' classes, and in the domain scenario "
                      "every task has the same classes (Mammoth's er_ace.py: class-il and task-il only)")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        n_classes = sum(context.head_sizes)
        self.seen_classes = torch.zeros(n_classes, dtype=torch.bool, device=self.device)  # Mammoth's seen_so_far

    def build_network(self) -> nn.Module:
        """The spec's network; with `cosine_classifier`, each task's head a `CosineHead` (PyTorch's default
        initialisation, as Mammoth's `CustomLinear` built after the backbone's own initialisation)."""
        network = super().build_network()
        if self.hparams.cosine_classifier:
            network.heads = nn.ModuleList(CosineHead(network.feature_size, n, self.hparams.cosine_scale)
                                          for n in self.context.head_sizes)
        return network

    def seen_logits(self, features: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """The heads of tasks 0..n_tasks-1 side by side; cosine heads one by one (their weights side by side are not
        one linear map)."""
        if not self.hparams.cosine_classifier:
            return super().seen_logits(features, n_tasks)
        return torch.cat([self.multihead.heads[task](features) for task in range(n_tasks)], dim=1)

    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        """Loss, step, store (Mammoth `models/er_ace.py` `observe`)."""
        with self.autocast():
            loss = self.objective(batch, step.stage)
        self.backward_and_step(loss, step, optimizer)
        self.store(batch)  # once the optimiser has stepped (Mammoth line 88: `add_data` after `opt.step()`)
        return loss.detach()

    def objective(self, batch: Batch, stage: int) -> torch.Tensor:
        """The incoming batch's loss (masked from the second task on, or always with `task_free`), plus the loss of
        a replayed batch over every class of the loss (from the second task on, or always with `task_free`)."""
        active = stage > 0 or self.hparams.task_free
        loss = self.incoming_loss(batch, stage, active)
        replay = self.replayed() if active else None
        if replay is not None:
            replayed = replay[0]
            loss = loss + self.scenario_cross_entropy(self.multihead.features(replayed.inputs), replayed, stage)[0]
        return loss

    def incoming_loss(self, batch: Batch, stage: int, masked: bool) -> torch.Tensor:
        """The incoming batch's cross-entropy: in the class scenario over the loss's classes with the classes
        `ace_kept_classes` drops masked (when `masked`); in the task scenario on its task's head."""
        features = self.multihead.features(batch.inputs)
        if not self.class_scenario:
            return self.scenario_cross_entropy(features, batch, stage)[0]
        targets = self.class_targets(batch)  # (B,)
        self.seen_classes[targets] = True
        logits = self.seen_logits(features, self.loss_tasks(stage))  # (B, K)
        if masked:
            logits = asymmetric_logits(logits, ace_kept_classes(targets, self.seen_classes, logits.shape[1]))
        return functional.cross_entropy(logits, targets)

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "seen_classes": self.seen_classes}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        if "seen_classes" in state:
            self.seen_classes = state["seen_classes"].to(self.device)
