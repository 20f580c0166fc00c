"""BiC: distillation, exemplars, and a two-parameter bias layer per task fitted on held-out exemplars.

Memory (Sec. 4, Fig. 2; FACIL `src/approach/bic.py` `train_loop`, stage 0): `buffer_size` samples in all, m =
floor(buffer_size / classes seen) per class, of which v = ceil(val_fraction x m) are held out for the bias fit and
m - v are training exemplars (`functions.held_out_per_class`). Before task t trains, each earlier class keeps the
first v of its held-out samples, and the first v samples of each new class in the task's training data are held out
and removed from it (FACIL: `cls_ind[:num_val_ex_cls]`). Task t trains on the rest of its data and the training
exemplars, by the base loop (its lr schedule, early stopping and epochs).

Loss (Eq. 1-3; FACIL `criterion`): (1 - lambda) x the cross-entropy + lambda x the distillation of the old classes
(`functions.bic_distillation`, temperature T, the outputs of the network as it was after the previous task as
targets), lambda = old classes / classes seen (`lamb` -1; a fixed `lamb` gives cross-entropy + lamb x distillation,
FACIL's `--lamb`). Both networks' outputs go through the bias layers of the earlier tasks, fixed (FACIL
`bias_forward` on `outputs` and `targets_old`). The cross-entropy is the scenario's: over the classes seen in the
class scenario, on each sample's own head in the task scenario.

After task t >= 1 (FACIL stage 2): with the network frozen, task t's alpha and beta are fitted on the held-out
samples of every class seen (`functions.fit_bias`; SGD's lr decayed as the authors' code does, alpha kept positive so
that no head is reordered); earlier tasks' pairs stay fixed, task 0 has none (1, 0). Then
the training exemplars (FACIL stage 3): earlier classes keep the first m - v of their order, the new ones are chosen
by herding (iCaRL's Algorithm 4, `replay.functions.herding_order`) or at random among the task's training samples
not held out. Prediction: the bias-corrected logits, over the classes seen (task-agnostic) or of the task's head.

In the task scenario no softmax spans two tasks, so the bias layers (which only rescale a head's logits against the
other heads') are not fitted there: alpha 1 and beta 0, the rest as above.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from clbench.approaches import losses
from clbench.approaches.bic.functions import (
    bias_correct,
    bic_distillation,
    fit_bias,
    held_out_per_class,
    loss_weights,
)
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.domains import BenchmarkFacts, DomainProblem
from clbench.approaches.previous_model import PreviousModel
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.approaches.replay.buffer import ReplayBuffer
from clbench.approaches.replay.functions import herding_order
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.errors import SpecError
from clbench.spec.fields import field

SELECTIONS = ("herding", "random")
LAMB_SCHEDULES = ("paper", "mammoth")
BIAS_OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class BiCHyperparameters(ReplayHyperparameters):
    """BiC's hyper-parameters (FACIL `src/approach/bic.py` `extra_parser` and `train_loop`)."""

    temperature: float = field(2.0, doc="T of the distillation (Sec. 6.2: 2; FACIL --T 2; Mammoth --temp 2)",
                               above=0.0)
    lamb: float = field(-1.0, doc="-1: lambda = old / seen classes, loss (1-lambda) CE + lambda distillation (Sec. 3; "
                                  "FACIL --lamb -1); else CE + lamb x distillation", minimum=0.0,
                        special={-1.0: "lambda = old / seen classes"})
    val_fraction: float = field(0.1, doc="share of each class's exemplars held out for the bias fit (Sec. 6.1: 9:1; "
                                         "FACIL --val-exemplar-percentage 0.1)", minimum=0.0, below=1.0)
    bias_epochs: int = field(200, doc="epochs of the bias fit (FACIL --num-bias-epochs 200; Mammoth --bic_epochs "
                                      "250)", minimum=0)
    bias_optimizer: str = field("sgd", doc="sgd (FACIL: SGD with momentum) or adam (Mammoth models/bic.py: Adam)",
                                choices=BIAS_OPTIMIZERS)
    bias_lr: float = field(0.0, doc="lr of the bias fit; 0: training.lr (FACIL: self.lr; Mammoth's Adam: 0.001)",
                           minimum=0.0, special={0.0: "training.lr"})
    bias_momentum: float = field(0.9, doc="momentum of the bias fit's SGD (FACIL train_loop: 'momentum is always "
                                          "0.9')", minimum=0.0, maximum=1.0)
    beta_l2: float = field(0.1, doc="weight of beta^2 / 2 in the bias fit's loss (FACIL: 0.1, from the authors' "
                                    "code; Mammoth: none)", minimum=0.0)
    selection: str = field("herding", doc="new classes' training exemplars: herding (FACIL scripts' "
                                          "--exemplar-selection herding) or random", choices=SELECTIONS)
    lamb_schedule: str = field("paper", doc="with lamb -1: paper, lambda = old / seen classes (Sec. 3, FACIL); "
                                            "mammoth, lambda = 1 / (t + 1) and the distillation times T^2 (Mammoth "
                                            "models/bic.py, which departs from the paper there)",
                               choices=LAMB_SCHEDULES, added=True)
    reselect_old: bool = field(False, doc="earlier classes' training exemplars after each task: false, the first "
                                          "m - v of their order (iCaRL's Algorithm 5); true, chosen again among "
                                          "those stored by `selection` with the current network (FACIL stage 3: "
                                          "its selector runs over the task's data and the exemplars together)",
                               added=True)

    def __post_init__(self) -> None:
        if self.lamb_schedule != "paper" and self.lamb >= 0:
            raise SpecError(f"`approaches.bic.lamb_schedule` is {self.lamb_schedule!r} with `approaches.bic.lamb` "
                            f"{self.lamb!r}: the schedule chooses lambda only when lamb is -1; set bic.lamb=-1, or "
                            "leave lamb_schedule at 'paper'")


class BiC(ReplayApproach):
    """Bias correction: distillation over exemplars, then one (alpha, beta) per task fitted on held-out exemplars.

    The authors' code: wuyuebupt/LargeScaleIncrementalLearning; the peers' versions read here: FACIL
    (mmasana/FACIL@e09d2c8) `bic.py` (src/approach/bic.py), Mammoth (aimagelab/mammoth@e75a491) models/bic.py.
    """

    name = "bic"
    summary = "bias correction (Wu et al. 2019)"
    hyperparameters_class = BiCHyperparameters
    per_class_memory = True
    ignores_hyperparameters = ("replay_batch_size",)  # `training_data` joins the exemplars to the task's data
    ignores_hyperparameters_reason = ("BiC joins its exemplars to the task's training data (`training_data`) "
                                      "and draws no memory batch per step")
    memories = 2  # the exemplars and the held-out samples of the bias fit
    hparams: BiCHyperparameters
    # 1: the bias fit's SGD lr decayed as the authors' code does and alpha held positive (`functions.fit_bias`;
    # revision 0's constant lr could stop with alpha < 0, inverting a head: issue 58)
    revision = 1
    # Mammoth lists BiC for class-il and task-il only (models/bic.py: COMPATIBILITY = ['class-il', 'task-il'])
    refuses_domain = ("BiC corrects the new classes' logits against the old classes' (Mammoth models/bic.py "
                      "COMPATIBILITY: class-il, task-il): with one shared head no output is only a new task's; use "
                      "er, agem or derpp")

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """The memory's (`ReplayApproach`), then its split: after the last task each class keeps m = buffer_size //
        classes exemplars, of which v = ceil(val_fraction x m) held out; m - v must leave a training exemplar, and the
        first task's v must leave training images of each of its classes."""
        problem = super().hyperparameter_problem(hyperparameters, facts)
        if problem is not None:
            return problem
        assert isinstance(hyperparameters, BiCHyperparameters)
        size, fraction = hyperparameters.buffer_size, hyperparameters.val_fraction
        per_class, held = held_out_per_class(size, facts.n_classes, fraction)
        if held >= per_class:
            return DomainProblem("val_fraction", f"with buffer_size {size} over {facts.n_classes} classes each class "
                                                 f"keeps {per_class} exemplars and {held} are held out, so none is "
                                                 "left to train on; use a smaller val_fraction or a larger buffer")
        first_held = held_out_per_class(size, facts.head_sizes[0], fraction)[1]
        images = facts.fewest_training_samples
        if images is not None and first_held >= images / max(facts.head_sizes):
            return DomainProblem("val_fraction", f"the first task holds out {first_held} training images of each of "
                                                 f"its classes (buffer_size {size}), and a task has about "
                                                 f"{images // max(facts.head_sizes)} per class: none would be left "
                                                 "to train on; use a smaller val_fraction or buffer_size")
        return None

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.previous = PreviousModel(self.build_network, self.device, self.name)
        self.held_out = ReplayBuffer(self.hparams.buffer_size, self.device)  # the bias fit's samples
        n_tasks = len(context.head_sizes)
        self.alpha = torch.ones(n_tasks, device=self.device)  # (T,) one bias layer per task
        self.beta = torch.zeros(n_tasks, device=self.device)  # (T,)
        sizes = torch.tensor(context.head_sizes, device=self.device)
        self.column_task = torch.repeat_interleave(torch.arange(n_tasks, device=self.device), sizes)  # (C,)

    # ------------------------------------------------------------------ the memory's split
    def split(self, stage: int) -> tuple[int, int]:
        """(exemplars per class, of which held out) for the classes of tasks 0..stage."""
        seen = self.context.class_offsets[stage] + self.context.head_sizes[stage]
        return held_out_per_class(self.hparams.buffer_size, seen, self.hparams.val_fraction)

    def global_labels(self, labels: torch.Tensor, task_ids: torch.Tensor) -> torch.Tensor:
        """Class within its task -> index among every class of the sequence: (N,)."""
        return labels + self.offsets.index_select(0, task_ids)

    def first_of_each_class(self, labels: torch.Tensor, classes: range, count: int) -> torch.Tensor:
        """Indices of the first `count` samples of each class in `classes`, class by class: (n,)."""
        parts = [torch.nonzero(labels == label).squeeze(1)[:count] for label in classes]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long, device=labels.device)

    def held_out_of_task(self, stage: int, train: LabelledData) -> torch.Tensor:
        """Indices of the task's training samples held out: the first v of each of its classes."""
        return self.first_of_each_class(train.labels, range(self.context.head_sizes[stage]), self.split(stage)[1])

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Shrink the earlier classes' held-out samples to v each, hold out the first v of each new class."""
        super().begin_task(stage, tasks)
        _, held = self.split(stage)
        kept = self.held_out.contents()
        old = self.first_of_each_class(self.global_labels(kept.labels, kept.task_ids),
                                       range(self.context.class_offsets[stage]), held)
        train = tasks[stage].train
        new = self.held_out_of_task(stage, train)
        self.held_out.set_contents(
            torch.cat([kept.images.index_select(0, old.to(kept.images.device)), train.images.index_select(0, new)]),
            torch.cat([kept.labels.index_select(0, old), train.labels.index_select(0, new)]),
            torch.cat([kept.task_ids.index_select(0, old), torch.full_like(new, stage)]))

    def task_training_samples(self, stage: int, train: LabelledData) -> LabelledData:
        """The task's training data without its held-out samples."""
        remaining = torch.ones(len(train), dtype=torch.bool, device=train.labels.device)
        remaining[self.held_out_of_task(stage, train)] = False
        index = torch.nonzero(remaining).squeeze(1)
        return LabelledData(train.images.index_select(0, index), train.labels.index_select(0, index),
                            train.task_ids.index_select(0, index), train.transform, train.task, train.cache)

    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        train = self.task_training_samples(stage, tasks[stage].train)
        if len(self.buffer) == 0:
            return train, tasks[stage].valid
        stored = self.buffer.contents()
        exemplars = LabelledData(stored.images, stored.labels, stored.task_ids, train.transform, -1)
        return LabelledData.concatenate([train, exemplars]), tasks[stage].valid

    # ------------------------------------------------------------------ the loss
    def corrected(self, logits: torch.Tensor) -> torch.Tensor:
        """Logits of the first C classes (B, C) through their tasks' bias layers."""
        return bias_correct(logits, self.column_task[:logits.shape[1]], self.alpha, self.beta)

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        return self.objective(batch, step.stage)[0]

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The training objective summed over the batch (FACIL `eval`: `criterion` on the corrected outputs)."""
        return self.objective(batch, stage, reduction="sum")

    def objective(self, batch: Batch, stage: int, reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """((1 - lambda) CE + lambda distillation, or CE + lamb distillation; number correct), the CE and the
        distillation means (or sums) over the batch."""
        features = self.multihead.features(batch.inputs)
        if self.class_scenario:
            logits = self.corrected(self.seen_logits(features, self.loss_tasks(stage)))  # (B, classes in the loss)
            cross_entropy, correct = losses.head_cross_entropy(logits, self.class_targets(batch), reduction)
        else:
            logits = self.seen_logits(features, stage + 1)
            cross_entropy, correct = self.scenario_cross_entropy(features, batch, stage, reduction)
        if stage == 0:
            return cross_entropy, correct
        old_classes = self.context.class_offsets[stage]
        old = self.corrected(torch.cat(self.previous.logits(batch.inputs, range(stage), stage), dim=1))
        distillation = bic_distillation(logits[:, :old_classes], old, self.hparams.temperature)
        if reduction == "sum":
            distillation = distillation * batch.targets.shape[0]
        if self.hparams.lamb >= 0:
            return cross_entropy + self.hparams.lamb * distillation, correct
        ce_weight, weight = loss_weights(self.hparams.lamb_schedule, stage, old_classes,
                                         old_classes + self.context.head_sizes[stage], self.hparams.temperature)
        return ce_weight * cross_entropy + weight * distillation, correct

    # ------------------------------------------------------------------ after the task
    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.previous.remember(self.network)
        if stage > 0 and self.class_scenario and len(self.held_out) > 0:
            self.fit_bias_layer(stage)
        self.select_exemplars(stage, tasks[stage].train)

    def fit_bias_layer(self, stage: int) -> None:
        """Task `stage`'s (alpha, beta) fitted on the held-out samples, the network frozen (FACIL stage 2)."""
        stored = self.held_out.contents()
        assert self.transform is not None, "begin_task sets the input transform"
        held = LabelledData(stored.images, stored.labels, stored.task_ids, self.transform, -1)
        width = self.context.class_offsets[stage] + self.context.head_sizes[stage]
        self.network.eval()
        with torch.no_grad():
            logits = torch.cat([self.seen_logits(self.multihead.features(held.batch(chunk).inputs), stage + 1)
                                for chunk in held.batches(self.training_protocol.eval_batch_size)])  # (N, width)
        hp = self.hparams
        with self.flops.uncounted():  # but each step, sampled (counted whole, the bias stage made bic 1.7x slower)
            alpha, beta = fit_bias(logits, self.global_labels(stored.labels, stored.task_ids),
                                   self.column_task[:width], self.alpha, self.beta, stage, epochs=hp.bias_epochs,
                                   batch_size=self.training_protocol.batch_size, optimizer=hp.bias_optimizer,
                                   lr=hp.bias_lr or self.training_protocol.lr, momentum=hp.bias_momentum,
                                   beta_l2=hp.beta_l2, generator=self.replay_generator,
                                   each_step=partial(self.flops.sampled, "bic-bias"))
        self.alpha[stage], self.beta[stage] = alpha, beta

    def select_exemplars(self, stage: int, train: LabelledData) -> None:
        """m - v training exemplars per class seen: of each earlier class's, the first (or, `reselect_old`, those
        `selection` picks among them), and of each new class those it picks among the task's training samples not
        held out."""
        per_class, held = self.split(stage)
        count = per_class - held
        stored = self.buffer.contents()
        old_labels = self.global_labels(stored.labels, stored.task_ids)
        old_classes = range(self.context.class_offsets[stage])
        if self.hparams.reselect_old and len(stored.labels) > 0:
            exemplars = LabelledData(stored.images, stored.labels, stored.task_ids, self.transform, -1)
            old = self.chosen(old_labels, old_classes, count, exemplars)
        else:
            old = self.first_of_each_class(old_labels, old_classes, count)
        candidates = self.task_training_samples(stage, train)
        new = self.chosen(candidates.labels, range(self.context.head_sizes[stage]), count, candidates)
        old_images = stored.images.index_select(0, old.to(stored.images.device))
        self.buffer.set_contents(
            torch.cat([old_images, candidates.images.index_select(0, new)]),
            torch.cat([stored.labels.index_select(0, old), candidates.labels.index_select(0, new)]),
            torch.cat([stored.task_ids.index_select(0, old), torch.full_like(new, stage)]))

    def chosen(self, labels: torch.Tensor, classes: range, count: int, data: LabelledData) -> torch.Tensor:
        """Indices into `data` of `count` samples of each class in `classes`, class by class, in selection order:
        herding on the current network's features, or a random order (`selection`)."""
        features = self.features_of(data) if self.hparams.selection == "herding" else None
        parts = []
        for label in classes:
            members = torch.nonzero(labels == label).squeeze(1)
            if features is not None:
                order = herding_order(features[members], count).to(members.device)
            else:
                order = torch.randperm(len(members), generator=self.replay_generator)[:count].to(members.device)
            parts.append(members[order])
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long, device=labels.device)

    # ------------------------------------------------------------------ prediction
    def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """The bias-corrected logits of the classes of tasks 0..n_tasks-1: (B, their classes)."""
        return self.corrected(self.seen_logits(self.multihead.features(inputs), n_tasks))

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        start = self.context.class_offsets[task]
        return self.predict_classes(inputs, task + 1)[:, start:start + self.context.head_sizes[task]]

    # ------------------------------------------------------------------ state
    def memory_usage(self) -> tuple[int, int]:
        """Training exemplars and held-out samples (both in `buffer_size`); bytes of the whole approach state."""
        return len(self.buffer) + len(self.held_out), super().memory_usage()[1]

    def log_scalars(self, stage: int) -> dict[str, float]:
        return {**super().log_scalars(stage), "held_out_samples": float(len(self.held_out)),
                "bias_alpha": float(self.alpha[stage]), "bias_beta": float(self.beta[stage])}

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), **self.previous.state(), "held_out": self.held_out.state_dict(),
                "bias_alpha": self.alpha, "bias_beta": self.beta}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        self.previous.load_state(state)
        if "held_out" in state:
            self.held_out.load_state_dict(state["held_out"])
        if "bias_alpha" in state:
            self.alpha = state["bias_alpha"].to(self.device).clone()
            self.beta = state["bias_beta"].to(self.device).clone()
