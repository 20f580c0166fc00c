"""LUCIR: learning a unified classifier incrementally via rebalancing (Hou, Pan, Loy, Wang & Lin 2019, CVPR).

The heads are cosine-normalised with one learnable scale sigma shared by every head (`cosine.CosineHead`, Eq. 4).
Task t trains on its data and the memory's exemplars (FACIL `train_loop`, Mammoth `icarl_replay`), with the loss of
Eq. 9: the cross-entropy of the scaled cosine logits (in the run's scenario, as every clbench method), plus from task
2 on

- lambda x the less-forget constraint (Eq. 6, `functions.less_forget_loss`): 1 - cos between the body's features
  and those of the network after the previous task, on every sample of the batch; lambda = lamb_base x
  sqrt(old classes / new classes) (Eq. 7, `adaptive: true`) or lamb_base;
- lamb_mr x the margin ranking loss (Eq. 8, `functions.margin_ranking_loss`) on the batch's samples of old classes
  (the exemplars): each one's unscaled score of its class against its K highest scores among the new task's classes.

Only the body, the new task's head and sigma train (FACIL `_get_optimizer` and `pre_train_process` with the
less-forget constraint, Mammoth's optimiser: the earlier heads are fixed; the later ones are untrained until their
task). With `imprint` (the default), a new task's head starts from its classes' mean normalised features, scaled to
the earlier heads' mean weight norm (Mammoth `imprint_weights`, after the authors' code). After the task the memory
keeps buffer_size // (classes seen) exemplars per class: the first of each earlier class's herding order and, for the
new classes, the first by herding (iCaRL's Algorithm 4, `replay.functions.herding_order`; Mammoth `fill_buffer(...,
use_herding=True)`); with `finetune_epochs` > 0 the new head and sigma are then finetuned on that class-balanced
memory (Mammoth `fit_buffer`, the paper's class-balanced finetuning), with the body frozen in eval mode.

Where this departs from the peers (each a stated choice):
- the body's last ReLU stays (FACIL removes it only in its ResNet's last block and warns otherwise, Mammoth never);
- the margin ranking's new classes are the current task's (the paper, FACIL); Mammoth's single head also ranks the
  later tasks' untrained columns;
- lambda is Eq. 7 during task t (FACIL); Mammoth sets it at the end of task t-1 to lamb_base x sqrt(t-1), one task
  late (0 during the second task);
- the memory keeps floor(buffer_size / classes seen) per class (Mammoth); FACIL's ceil lets it exceed buffer_size, and
  FACIL re-runs herding on the earlier classes' exemplars after each task where this keeps their herding order's head.
The domain scenario is refused: with one shared head every class is an earlier task's from task 2 on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.domains import BenchmarkFacts, DomainProblem
from clbench.approaches.lucir.cosine import CosineHead, cosine_heads
from clbench.approaches.lucir.functions import (
    adaptive_weight,
    cosine_scores,
    imprinted_weights,
    less_forget_loss,
    margin_ranking_loss,
)
from clbench.approaches.previous_model import PreviousModel
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.approaches.replay.functions import herding_order
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class LUCIRHyperparameters(ReplayHyperparameters):
    """LUCIR's hyper-parameters (FACIL src/approach/lucir.py `extra_parser`, Mammoth models/lucir.py `get_parser`)."""

    lamb_base: float = field(5.0, doc="lambda_base of Eq. 7, the less-forget weight (paper Sec. 4.1: 5 for CIFAR-100; "
                                      "FACIL --lamb 5, Mammoth --lamda_base 5)", minimum=0.0)
    lamb_mr: float = field(1.0, doc="weight of the margin ranking loss (FACIL --lamb-mr 1, Mammoth --lamda_mr 1)",
                           minimum=0.0)
    margin: float = field(0.5, doc="m of Eq. 8 (paper Sec. 4.1: 0.5; FACIL --dist 0.5, Mammoth --mr_margin 0.5)",
                          minimum=0.0)
    k: int = field(2, doc="K hard negatives of Eq. 8 (paper Sec. 4.1: 2; FACIL --K 2, Mammoth --k_mr 2)", minimum=1)
    adaptive: bool = field(True, doc="lambda = lamb_base x sqrt(old/new classes), Eq. 7 (FACIL: on unless "
                                     "--remove-adapt-lamda); false: lamb_base")
    imprint: bool = field(True, doc="a new head starts from its classes' mean features (Mammoth --imprint_weights 1; "
                                    "FACIL: none)")
    finetune_epochs: int = field(0, doc="epochs of class-balanced finetuning of the new head on the memory after each "
                                        "task (Mammoth --fitting_epochs 20; FACIL: none, 0)", minimum=0)
    finetune_lr: float = field(0.01, doc="lr of that finetuning (Mammoth --lr_finetune 0.01)", above=0.0)
    finetune_milestone: int = field(0, doc="finetuning steps after which its lr is divided by 10 (Mammoth: 10, its "
                                           "MultiStepLR([10]) stepped every batch); 0: never", minimum=0,
                                    special={0: "never"})


class LUCIR(ReplayApproach):
    """Cosine heads, less-forget constraint, margin ranking on the memory, herding exemplars.

    The peers' versions: FACIL (mmasana/FACIL@e09d2c8) `src/approach/lucir.py`, Mammoth (aimagelab/mammoth@e75a491)
    `models/lucir.py`; the authors' code: hshustc/CVPR19_Incremental_Learning@bd2bfa0
    `utils_incremental/incremental_train_and_eval_MR_LF.py` (the loss: `CosineEmbeddingLoss` of the features times
    lamda, the cross-entropy, `MarginRankingLoss(margin=dist)` of the old classes' samples over the top-K of the
    new classes' scores before the scale, times lw_mr).
    """

    name = "lucir"
    summary = "unified classifier via rebalancing: cosine heads, less-forget, margin ranking (Hou et al. 2019)"
    hyperparameters_class = LUCIRHyperparameters
    per_class_memory = True
    ignores_hyperparameters = ("replay_batch_size",)  # `training_data` joins the exemplars to the task's data
    ignores_hyperparameters_reason = ("LUCIR joins its exemplars to the task's training data (`training_data`) "
                                      "and draws no memory batch per step")
    hparams: LUCIRHyperparameters
    # Mammoth models/lucir.py: COMPATIBILITY = ['class-il', 'task-il']
    refuses_domain = ("LUCIR is a class-incremental method (Mammoth models/lucir.py COMPATIBILITY: class-il, "
                      "task-il): with one shared head every class is an earlier task's from task 2 on, so there are no "
                      "new classes to rank against; use er, agem or derpp")

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """The memory's (`ReplayApproach`), then k: the margin ranking takes the k hardest of a task's new classes,
        so k must not exceed the classes of any task after the first."""
        problem = super().hyperparameter_problem(hyperparameters, facts)
        assert isinstance(hyperparameters, LUCIRHyperparameters)
        smallest = min(facts.head_sizes[1:], default=hyperparameters.k)
        if problem is None and hyperparameters.k > smallest:
            return DomainProblem("k", f"a task after the first has {smallest} classes, and the margin ranking needs k "
                                      f"of a task's new classes: use k <= {smallest}")
        return problem

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.previous = PreviousModel(self.build_network, self.device, self.name)

    def build_network(self) -> nn.Module:
        """The spec's body with one cosine head per task, one sigma shared (`cosine.cosine_heads`)."""
        network = super().build_network()
        network.heads = cosine_heads(network.feature_size, self.context.head_sizes)
        return network

    # ------------------------------------------------------------------ heads
    def head(self, task: int) -> CosineHead:
        head = self.multihead.heads[task]
        assert isinstance(head, CosineHead)
        return head

    def scores(self, features: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """Unscaled cosine scores of the classes of tasks 0..n_tasks-1: (B, their classes)."""
        weights = torch.cat([self.head(task).weight for task in range(n_tasks)])  # (C, F)
        return cosine_scores(features, weights)

    def seen_logits(self, features: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """sigma x the cosine scores of tasks 0..n_tasks-1 (what the cross-entropy and the prediction use)."""
        return self.head(0).sigma * self.scores(features, n_tasks)

    def trainable_parameters(self, stage: int) -> list[nn.Parameter]:
        """The body, the task's head and sigma (the earlier heads fixed: FACIL `_get_optimizer`, Mammoth's
        optimiser)."""
        head = self.head(stage)
        return [*self.multihead.body_parameters(), head.weight, head.sigma]

    # ------------------------------------------------------------------ training
    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        super().begin_task(stage, tasks)
        if stage > 0 and self.hparams.imprint:
            self.imprint(stage, tasks[stage].train)

    def imprint(self, stage: int, train: LabelledData) -> None:
        """The task's head from its classes' mean normalised features, at the earlier heads' mean weight norm."""
        with torch.no_grad():
            norm = float(torch.cat([self.head(task).weight for task in range(stage)]).norm(dim=1).mean())
            features = self.features_of(train)
            self.head(stage).weight.copy_(imprinted_weights(features, train.labels, self.context.head_sizes[stage],
                                                            norm))

    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        train, valid = tasks[stage].train, tasks[stage].valid
        if len(self.buffer) == 0:
            return train, valid
        return LabelledData.concatenate([train, self.memory_data()]), valid

    def memory_data(self) -> LabelledData:
        """The memory's samples as one mixed-task split."""
        stored = self.buffer.contents()
        assert self.transform is not None, "begin_task sets the input transform"
        return LabelledData(stored.images, stored.labels, stored.task_ids, self.transform, -1)

    def less_forget_weight(self, stage: int) -> float:
        """lambda of task `stage` (Eq. 7, or lamb_base without `adaptive`)."""
        if not self.hparams.adaptive:
            return self.hparams.lamb_base
        return adaptive_weight(self.hparams.lamb_base, self.context.class_offsets[stage],
                               self.context.head_sizes[stage])

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        """Eq. 9: cross-entropy, plus lambda x less-forget and lamb_mr x margin ranking from task 2 on."""
        features = self.multihead.features(batch.inputs)  # (B, F)
        loss = self.scenario_cross_entropy(features, batch, step.stage)[0]
        if step.stage == 0:
            return loss
        old_features = self.previous.features(batch.inputs, step.stage)  # (B, F)
        loss = loss + self.less_forget_weight(step.stage) * less_forget_loss(features, old_features)
        return loss + self.hparams.lamb_mr * self.ranking(features, batch, step.stage)

    def ranking(self, features: torch.Tensor, batch: Batch, stage: int) -> torch.Tensor:
        """The margin ranking loss of Eq. 8 over the classes of tasks 0..stage (the new ones: task `stage`'s)."""
        return margin_ranking_loss(self.scores(features, stage + 1), self.class_targets(batch),
                                   self.context.class_offsets[stage], self.hparams.k, self.hparams.margin)

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.select_exemplars(stage, tasks[stage].train)
        self.finetune(stage)
        self.previous.remember(self.network)

    # ------------------------------------------------------------------ exemplars
    def select_exemplars(self, stage: int, train: LabelledData) -> None:
        """buffer_size // (classes seen) per class: the head of each earlier class's order, herding for new ones."""
        offsets, sizes = self.context.class_offsets, self.context.head_sizes
        per_class = self.hparams.buffer_size // (offsets[stage] + sizes[stage])
        features = self.features_of(train)
        self.keep_exemplars(stage, per_class, train, lambda members: herding_order(features[members], per_class))

    def finetune(self, stage: int) -> None:
        """Class-balanced finetuning: `finetune_epochs` shuffled passes over the memory training the task's head and
        sigma by plain SGD on the cross-entropy plus lamb_mr x the margin ranking (the less-forget term has no
        gradient there: the body is frozen), the body in eval mode (Mammoth `fit_buffer`)."""
        epochs = self.hparams.finetune_epochs
        if epochs == 0 or len(self.buffer) == 0:
            return
        head = self.head(stage)
        optimizer = torch.optim.SGD([head.weight, head.sigma], lr=self.hparams.finetune_lr)
        data = self.memory_data()
        self.network.eval()
        steps = 0
        with self.flops.uncounted():  # but each step, sampled (counted whole, the fine-tuning doubled a run)
            for _ in range(epochs):
                order = torch.randperm(len(data), generator=self.batch_generator).to(data.images.device)
                for indices in order.split(self.training_protocol.batch_size):
                    batch = data.batch(indices, self.augment_images if self.augment_generator is not None else None)
                    with self.flops.sampled("lucir-finetune", len(indices)):
                        self.finetune_step(batch, stage, optimizer)
                    steps += 1
                    if steps == self.hparams.finetune_milestone:
                        for group in optimizer.param_groups:
                            group["lr"] *= 0.1

    def finetune_step(self, batch: Batch, stage: int, optimizer: torch.optim.Optimizer) -> None:
        """One fine-tuning step: the head and sigma by the cross-entropy plus lamb_mr x the margin ranking."""
        with torch.no_grad():
            features = self.multihead.features(batch.inputs)  # (B, F)
        loss = self.scenario_cross_entropy(features, batch, stage)[0]
        if stage > 0:
            loss = loss + self.hparams.lamb_mr * self.ranking(features, batch, stage)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    # ------------------------------------------------------------------ state
    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), **self.previous.state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        self.previous.load_state(state)
