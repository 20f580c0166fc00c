"""iCaRL: incremental classifier and representation learning (Rebuffi, Kolesnikov, Sperl & Lampert 2017, CVPR).

Training task t uses its data and the exemplars of every earlier class (Algorithm 3, "form combined training
set"). The loss (`loss`) is one of:

- `paper` (the default): one loss, the mean over the batch and the outputs of the binary cross-entropy between
  each output's sigmoid and its target: the one-hot vector of the sample's class, except that the earlier classes'
  targets are the sigmoid outputs of the network as it was after the previous task, for every sample
  (`functions.icarl_loss`). This is what the authors' code trains with (`iCaRL-TheanoLasagne/
  main_cifar_100_theano.py`: a sigmoid output layer, `binary_crossentropy(prediction, target_var).mean()`, the
  old classes' target columns set to the copied network's outputs) and Mammoth (`models/icarl.py` `get_loss`).
  Both give their network an output for every class of the data set from the start, so the classes not seen yet
  are in the mean with target 0; here the outputs are those of `training.class_loss` in the class scenario: the
  classes seen so far (tasks 0..t, `seen`, as the paper's network has one sigmoid output per class observed so
  far), or every class as the authors' code and Mammoth (`all`). At the last task the two are the same loss.
  The paper's loss has no weight between classification and distillation, so `lamb` must stay 1 with it (refused
  otherwise: a sweep over lamb would make runs that differ in name only).
- `facil`: FACIL's variant (`src/approach/icarl.py` `criterion`): the cross-entropy (over every class seen so far
  in the class scenario, on each sample's head in the task scenario) plus lamb times the sum over the earlier
  classes of a binary cross-entropy between the sigmoids of the current and of the previous network
  (`functions.icarl_distillation`; FACIL's own comment there: "The original code does not match with the paper
  equation").

The task scenario (each task's head, task id known) uses the same `paper` loss: sigmoid outputs are one binary
problem each, so the one-hot target over every class seen so far needs no softmax across heads; the previous
network's outputs keep the earlier heads as the class scenario keeps the earlier classes. The validation loss (it
drives the lr schedule and early stopping) is the training objective summed over the batch: per sample the mean
over the outputs (`paper`), or the cross-entropy plus lamb times the batch's mean distillation (`facil`).

After the task the memory keeps m = buffer_size // (classes seen) exemplars per class: the first m of each earlier
class's herding order (Algorithm 5) and the first m by herding of each new class (Algorithm 4), and the class means
of the exemplars' normalised features are computed (with `flip_means`, averaged with those of the exemplars'
left-right mirror images, as the authors' CIFAR code and Mammoth's `compute_class_means`). Prediction is the nearest
mean of exemplars (Algorithm 1): task-aware among the task's classes, task-agnostic among every candidate class;
before a class has exemplars (stage 0, a task not learned yet) the heads' logits are used instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.previous_model import PreviousModel
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters
from clbench.approaches.replay.functions import (
    class_means,
    herding_order,
    icarl_distillation,
    icarl_loss,
    nearest_mean_scores,
)
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.errors import SpecError
from clbench.spec.fields import field

LOSSES = ("paper", "facil")


@dataclass(frozen=True)
class ICaRLHyperparameters(ReplayHyperparameters):
    """iCaRL's hyper-parameters."""

    lamb: float = field(1.0, doc="loss facil: the weight of its distillation term (FACIL's --lamb default 1); the "
                                 "paper's loss has no weight, so 1 there", minimum=0.0)
    loss: str = field("paper", doc="paper: one sigmoid BCE, old classes' targets the previous network's sigmoids "
                                   "(authors' code, Mammoth); facil: cross-entropy + lamb x BCE distillation (FACIL)",
                      choices=LOSSES)
    flip_means: bool = field(False, doc="class means also average the features of the exemplars flipped left-right "
                                        "(the authors' CIFAR code main_cifar_100_theano.py, whose training "
                                        "augmentation flips; Mammoth models/icarl.py on every data set); off: the "
                                        "authors' ImageNet code main_resnet_tf.py and FACIL")

    def __post_init__(self) -> None:
        if self.loss == "paper" and self.lamb != 1.0:
            raise SpecError(f"`approaches.icarl.lamb` is {self.lamb!r} with `approaches.icarl.loss` 'paper': the "
                            "paper's loss has no distillation weight; leave lamb at 1, or set icarl.loss=facil for "
                            "FACIL's cross-entropy + lamb x distillation")


class ICaRL(ReplayApproach):
    """Exemplars by herding, distillation of earlier classes, nearest-mean-of-exemplars prediction.

    The authors' code: srebuffi/iCaRL `iCaRL-TheanoLasagne/main_cifar_100_theano.py`; the peers' versions: Mammoth
    (aimagelab/mammoth@e75a491) `models/icarl.py`, FACIL (mmasana/FACIL@e09d2c8) `src/approach/icarl.py`.
    """

    name = "icarl"
    summary = "incremental classifier and representation learning (Rebuffi et al. 2017)"
    # 1: the authors' loss by default (FACIL's is `loss: facil`) and the distillation targets from the previous
    # network's own heads; revision 0 ran FACIL's loss on the current heads over the previous network's features
    revision = 1
    hyperparameters_class = ICaRLHyperparameters
    per_class_memory = True
    ignores_hyperparameters = ("replay_batch_size",)  # `training_data` joins the exemplars to the task's data
    ignores_hyperparameters_reason = ("iCaRL joins its exemplars to the task's training data (`training_data`) "
                                      "and draws no memory batch per step")
    hparams: ICaRLHyperparameters
    # Mammoth lists iCaRL for class-il and task-il only (aimagelab/mammoth@e75a491 models/icarl.py: COMPATIBILITY =
    # ['class-il', 'task-il']; ER, A-GEM and DER++ add 'domain-il'): with one shared head every class is an earlier
    # task's from task 2 on, so the authors' loss would take every target from the previous network and learn no
    # new label, and its exemplar sets and class means are per class of the sequence.
    refuses_domain = ("iCaRL is a class-incremental method (Mammoth models/icarl.py COMPATIBILITY: class-il, "
                      "task-il): with one shared head every class is an earlier task's from task 2 on, so its loss "
                      "would distil every output and learn no new label; use er, agem or derpp")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.previous = PreviousModel(self.build_network, self.device, self.name)
        self.means: torch.Tensor | None = None  # (classes of the sequence, F); NaN rows: no exemplars yet

    # ------------------------------------------------------------------ training
    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        train, valid = tasks[stage].train, tasks[stage].valid
        if len(self.buffer) == 0:
            return train, valid
        stored = self.buffer.contents()
        exemplars = LabelledData(stored.images, stored.labels, stored.task_ids, train.transform, -1)
        return LabelledData.concatenate([train, exemplars]), valid

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        return self.objective(batch, step.stage)[0]

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The training objective on the heads (not the nearest mean: as FACIL, the means are not used while a
        task trains), summed over the batch."""
        loss, correct = self.objective(batch, stage, reduction="sum")
        return loss, correct

    def objective(self, batch: Batch, stage: int, reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
        """(the `loss` chosen, mean or summed over the batch; number correct on the heads)."""
        features = self.multihead.features(batch.inputs)
        old = self.previous_logits(batch.inputs, stage) if stage > 0 and self.previous.available else None
        if self.hparams.loss == "facil":
            loss, correct = self.scenario_cross_entropy(features, batch, stage, reduction)
            if old is None:
                return loss, correct
            distillation = icarl_distillation(self.seen_logits(features, stage), old)  # a mean over the batch
            scale = batch.targets.shape[0] if reduction == "sum" else 1
            return loss + self.hparams.lamb * distillation * scale, correct
        seen = self.seen_logits(features, self.loss_tasks(stage))  # (B, classes of tasks <= stage, or every class)
        per_sample = icarl_loss(seen, self.class_targets(batch), seen[:, :0] if old is None else old)  # (B,)
        loss = per_sample.mean() if reduction == "mean" else per_sample.sum()
        return loss, self.correct_on_heads(seen, batch, stage)

    def previous_logits(self, inputs: torch.Tensor, stage: int) -> torch.Tensor:
        """The previous network's logits of the classes of tasks < stage (its body and its heads), without
        autograd: (B, their classes)."""
        return torch.cat(self.previous.logits(inputs, range(stage), stage), dim=1)

    def correct_on_heads(self, seen: torch.Tensor, batch: Batch, stage: int) -> torch.Tensor:
        """Number correct from the logits of every class seen (B, C): the argmax over all of them in the class
        scenario, over each sample's own head in the task scenario."""
        targets = self.class_targets(batch)  # (B,) indices into the classes seen
        if not self.class_scenario:
            sizes = torch.tensor(self.context.head_sizes[:stage + 1], device=seen.device)
            column_task = torch.repeat_interleave(torch.arange(stage + 1, device=seen.device), sizes)  # (C,)
            own = column_task.unsqueeze(0) == self.task_ids(batch).unsqueeze(1)  # (B, C)
            seen = seen.masked_fill(~own, float("-inf"))
        return (seen.argmax(1) == targets).sum()

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.select_exemplars(stage, tasks)
        self.previous.remember(self.network)

    # ------------------------------------------------------------------ exemplars
    def select_exemplars(self, stage: int, tasks: TaskSequence) -> None:
        """m per class seen: earlier classes keep the head of their herding order, new ones are chosen by herding;
        then the class means of the exemplars."""
        offsets, sizes = self.context.class_offsets, self.context.head_sizes
        per_class = self.hparams.buffer_size // (offsets[stage] + sizes[stage])
        train = tasks[stage].train
        features = self.features_of(train)
        self.keep_exemplars(stage, per_class, train, lambda members: herding_order(features[members], per_class))
        self.update_means()

    def update_means(self) -> None:
        """The normalised mean of each class's exemplars' normalised features (NaN for classes without); with
        `flip_means`, averaged with the mean of the exemplars' flipped images' features."""
        stored = self.buffer.contents()
        assert self.transform is not None
        data = LabelledData(stored.images, stored.labels, stored.task_ids, self.transform, -1)
        global_labels = stored.labels + self.offsets.index_select(0, stored.task_ids)
        flipped = None
        if self.hparams.flip_means:
            mirrored = LabelledData(stored.images.flip(3), stored.labels, stored.task_ids, self.transform, -1)
            flipped = self.features_of(mirrored)  # images (N, C, H, W): dimension 3 is the width
        self.means = class_means(self.features_of(data), global_labels, sum(self.context.head_sizes), flipped)

    # ------------------------------------------------------------------ prediction
    def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """Nearest mean of exemplars over the classes of tasks 0..n_tasks-1 (the heads' logits while one of
        them has no exemplars)."""
        width = sum(self.context.head_sizes[:n_tasks])
        features = self.multihead.features(inputs)
        if self.means is None or torch.isnan(self.means[:width]).any():
            return self.seen_logits(features, n_tasks)
        return nearest_mean_scores(features, self.means[:width])

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        start = self.context.class_offsets[task]
        return self.predict_classes(inputs, task + 1)[:, start:start + self.context.head_sizes[task]]

    # ------------------------------------------------------------------ state
    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), **self.previous.state(),
                **({"means": self.means} if self.means is not None else {})}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        self.previous.load_state(state)
        self.means = state["means"].to(self.device) if "means" in state else None
