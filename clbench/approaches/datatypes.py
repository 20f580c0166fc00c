"""The plain data of the training loop: what an approach is built from (`Hyperparameters`, `ApproachContext`), where
a step is (`StepInfo`), and what the loop reports (`EpochLog`, `TaskLog`, `Evaluation` under `TASK_AWARE` /
`TASK_AGNOSTIC`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import torch

from clbench.seeding import torch_generator
from clbench.spec import NetworkSpec, TrainingSpec
from clbench.spec.fields import field


@dataclass(frozen=True)
class Hyperparameters:
    """Hyper-parameters every approach has."""

    clip_grad_norm: float = field(10000.0, doc="gradient-norm clipping (reference: 10000 for sgd, sgd-f, joint, "
                                               "hat, pnn, imm-mean; 100 ewc, lwf; 200 lfl; 1000 imm-mode, pathnet); "
                                               "0: no clipping (Mammoth)",
                                  minimum=0.0, special={0.0: "no clipping"})


@dataclass(frozen=True)
class ApproachContext:
    """What an approach is built from: the spec's network and protocol, the task heads, device and seed."""

    network: NetworkSpec
    training: TrainingSpec
    input_shape: tuple[int, ...]
    head_sizes: tuple[int, ...]
    device: torch.device
    seed: int
    scenario: str = "task"  # `data.scenario`: task, class or domain (see `clbench.approaches.losses`)
    augment: bool = False  # `data.augment`: random crop and flip of training and replayed batches

    def generator(self, purpose: str) -> torch.Generator:
        """A CPU generator of the seeding contract for one purpose."""
        return torch_generator(self.seed, purpose)

    @property
    def class_offsets(self) -> tuple[int, ...]:
        """Where each task's classes start in the output over every class: (0, n_1, n_1 + n_2, ...); in the domain
        scenario every task's classes are the one shared head's outputs: (0, 0, ...)."""
        if self.scenario == "domain":
            return (0,) * len(self.head_sizes)
        return tuple(sum(self.head_sizes[:task]) for task in range(len(self.head_sizes)))


@dataclass(frozen=True)
class StepInfo:
    """Where a training step is: the epoch and the batch index b (0-based) out of B batches in the epoch."""

    stage: int
    epoch: int
    batch: int
    n_batches: int


@dataclass(frozen=True)
class EpochLog:
    """One epoch of one task, as reported to the progress callback."""

    stage: int
    epoch: int
    lr: float
    train_loss: float
    valid_loss: float
    valid_accuracy: float
    improved: bool


@dataclass(frozen=True)
class TaskLog:
    """How training a task went: epochs run, best validation values, time."""

    stage: int
    epochs: int
    best_epoch: int
    best_valid_loss: float
    final_lr: float
    seconds: float
    batches: int
    compute: dict[str, Any] = dataclass_field(default_factory=dict)  # the stage's FLOPs columns (`flops.stage_columns`)


@dataclass(frozen=True)
class Evaluation:
    """Mean loss and accuracy of a model on one split."""

    loss: float
    accuracy: float
    n: int


NOT_VALIDATED = Evaluation(float("nan"), float("nan"), 0)
"""An epoch's validation without a validation split (`training.early_stopping: false`): nothing measured."""

TASK_AWARE = "task-aware"
TASK_AGNOSTIC = "task-agnostic"


ProgressCallback = Callable[[EpochLog], None]
StepHook = Callable[[StepInfo], None]
"""Called by `Approach.train_epoch` after each optimiser step (`clbench.run.curve`: the continual evaluation)."""
