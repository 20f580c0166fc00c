"""PackNet: adding multiple tasks to a single network by iterative pruning (Mallya & Lazebnik, CVPR 2018).

Task t (1-based) trains the free weights (those no earlier task owns; the weights of earlier tasks are frozen
by zeroing their gradients, and still used by the forward pass) with the paper's protocol. Then, per layer, the
`prune_fraction` of the free weights with the smallest magnitude is pruned (set to zero, left free for later
tasks) and the rest become task t's; these kept weights are retrained alone for at most `retrain_epochs` with
the protocol's early stopping at `retrain_lr`, then frozen. The last task is not pruned: it takes every free
weight and is not retrained. Task u is evaluated with its own binary mask: the weights of tasks 1..u (the
weights of later tasks are zeroed), so its outputs do not change after it is learned.

Prunable: every weight tensor of the shared body (conv kernels, fc matrices). Biases are trained on the first
task only and frozen afterwards (PackNet shares biases after task 1). Heads are per task and unmasked, trained at
their own task only.

Bodies: the MLP and the AlexNet-like net. `network.kind` resnet18 is refused (`unsupported_networks`): a task's
mask keeps its outputs fixed only if everything else it uses is frozen, and batch norm's running statistics are
shared by every task and re-estimated while later tasks train (with their weights in place); per-task batch norm
is not implemented.

Monitoring: `packnet_capacity` after each task: per task u <= t (task 0: the weights still free) and layer
(plus `total`), the weights it owns, the layer's weights and their fraction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, ProgressCallback, StepInfo, TaskLog
from clbench.approaches.packnet import pruning
from clbench.approaches.parameters import named_body_parameters
from clbench.data.batches import TaskSequence
from clbench.spec import TrainingSpec
from clbench.spec.fields import field


@dataclass(frozen=True)
class PackNetHyperparameters(Hyperparameters):
    """PackNet's hyper-parameters (Mallya & Lazebnik 2018: prune 50% or 75% of the free weights per task)."""

    clip_grad_norm: float = field(10000.0, doc="gradient-norm clipping (clbench: 10000, as the reference's sgd)",
                                  minimum=0.0, special={0.0: "no clipping"})
    prune_fraction: float = field(0.5, doc="fraction of each layer's free weights pruned after a task "
                                           "(Mallya & Lazebnik: 0.5 or 0.75; 0 leaves later tasks no weight, 1 "
                                           "the task none)", above=0.0, below=1.0)
    retrain_epochs: int = field(10, doc="epochs at most of retraining the kept weights after pruning, with the "
                                        "protocol's early stopping (Mallya & Lazebnik: 10; 0: no retraining)",
                                minimum=0)
    retrain_lr: float = field(0.005, doc="initial lr of the retraining (clbench: a tenth of the protocol's 0.05, "
                                         "as Mallya & Lazebnik's 1e-4 after 1e-3)", above=0.0)


def layer_name(parameter_name: str) -> str:
    """'layers.0.weight' -> 'layers.0'."""
    return parameter_name.rsplit(".", 1)[0]


class PackNet(Approach):
    """Per-task weight subsets by magnitude pruning; earlier tasks' weights frozen and masked out for them.

    The authors' code: arunmallya/packnet `src/prune.py` (`SparsePruner`: per layer, the given fraction of the current
    task's weights with the smallest magnitude pruned; earlier tasks' weights get no gradient; biases trained only
    where `train_bias` says) and `src/main.py`.
    """

    name = "packnet"
    summary = "iterative pruning, one weight subset per task (Mallya & Lazebnik 2018)"
    needs_task_id = True  # its prediction uses the task's weight mask: task-aware evaluation only
    unsupported_networks = {"resnet18": "batch norm's running statistics are shared by every task and re-estimated "
                                        "while later tasks train, so an earlier task's weight mask no longer keeps "
                                        "its outputs fixed; per-task batch norm is not implemented"}
    monitoring_reporter = "clbench.approaches.packnet.report:PackNetReporter"
    hyperparameters_class = PackNetHyperparameters
    hparams: PackNetHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        body = dict(named_body_parameters(self.multihead))
        self.weights = {name: p for name, p in body.items() if p.dim() > 1}
        self.biases = [p for p in body.values() if p.dim() <= 1]
        self.owners = {name: pruning.free_owner(p) for name, p in self.weights.items()}
        self.retraining: int | None = None  # the task (1-based) being retrained; None while training
        self.gradient_masks: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ the two phases of a task
    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        """Train the free weights (the base loop; `end_task` prunes), then retrain the kept ones."""
        self.set_phase(None)
        log = super().learn_task(stage, tasks, progress)
        if stage == len(self.context.head_sizes) - 1 or self.hparams.retrain_epochs == 0:
            return log
        offset = log.epochs
        shifted = None if progress is None else (lambda epoch: progress(replace(epoch, epoch=epoch.epoch + offset)))
        self.set_phase(stage + 1)
        try:
            retrain = super().learn_task(stage, tasks, shifted)
        finally:
            self.set_phase(None)
        return TaskLog(stage, log.epochs + retrain.epochs, log.best_epoch, retrain.best_valid_loss,
                       retrain.final_lr, log.seconds + retrain.seconds, log.batches + retrain.batches)

    def set_phase(self, retraining: int | None) -> None:
        self.retraining = retraining
        self.gradient_masks = {name: pruning.trainable_mask(owner, retraining).to(self.weights[name].dtype)
                               for name, owner in self.owners.items()}

    @property
    def training_protocol(self) -> TrainingSpec:
        if self.retraining is None:
            return self.context.training
        return replace(self.context.training, max_epochs=self.hparams.retrain_epochs, lr=self.hparams.retrain_lr)

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """Task 1: everything; later: the body's weights (gradient-masked) and the task's head (no biases)."""
        if stage == 0:
            return [*self.weights.values(), *self.biases, *self.multihead.heads[0].parameters()]
        return [*self.weights.values(), *self.multihead.heads[stage].parameters()]

    def before_step(self, step: StepInfo) -> None:
        """Zero the gradients of the weights this phase must not change (earlier tasks', pruned ones)."""
        pairs = [(p.grad, self.gradient_masks[name]) for name, p in self.weights.items() if p.grad is not None]
        if pairs:
            grads, masks = zip(*pairs)
            torch._foreach_mul_(list(grads), list(masks))

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """After training (not after retraining): prune and assign the kept weights, or take all (last task)."""
        if self.retraining is not None:
            return
        task = stage + 1
        with torch.no_grad():
            for name, weight in self.weights.items():
                if stage == len(self.context.head_sizes) - 1:
                    self.owners[name] = pruning.claim_free_weights(self.owners[name], task)
                    continue
                owner, pruned = pruning.prune_free_weights(weight, self.owners[name], self.hparams.prune_fraction,
                                                           task)
                self.owners[name] = owner
                weight.masked_fill_(pruned, 0.0)

    # ------------------------------------------------------------------ evaluation
    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        """Logits with task `task`'s mask: the weights of later tasks are zero."""
        from torch.func import functional_call

        masked = {name: torch.where(pruning.evaluation_mask(self.owners[name], task + 1), weight, 0.0)
                  for name, weight in self.weights.items()}
        return functional_call(self.network, masked, (inputs, task))

    # ------------------------------------------------------------------ state and monitoring
    def extra_state(self) -> dict[str, Any]:
        return {"owners": {name: owner.clone() for name, owner in self.owners.items()}}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        owners = state.get("owners") or {}
        for name in self.owners:
            if name in owners:
                self.owners[name] = owners[name].to(self.device)

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`packnet_capacity`: weights owned per task (0: free) and layer after task `stage`."""
        rows = []
        for task in range(stage + 2):
            usage = pruning.usage(self.owners, task)
            totals = (sum(used for used, _ in usage.values()), sum(total for _, total in usage.values()))
            for name, (used, total) in [*((layer_name(key), value) for key, value in usage.items()),
                                        ("total", totals)]:
                rows.append({"task": task, "layer": name, "used": used, "weights": total,
                             "fraction": np.float32(used / total) if total else np.float32(0.0)})
        return {"packnet_capacity": rows}
