"""Joint (multitask) training: the reference A_J of the forgetting ratio.

At stage t a fresh copy of the initial network is trained on tasks 1..t together (each sample's loss on its
own head; in the class scenario, the cross-entropy over every class of tasks 1..t); row t of its accuracy
matrix is the multitask reference for every approach at stage t.
"""

from __future__ import annotations

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.parameters import tensors_to
from clbench.data.batches import Batch, LabelledData, TaskSequence


class Joint(Approach):
    """Multitask reference: retrains from the initial weights on all tasks seen so far.

    The HAT authors' code for this reference: joansj/hat@6fd0b9d `src/approaches/joint.py`.
    """

    name = "joint"
    summary = "multitask reference A_J: tasks 1..t trained together from scratch at each stage"
    is_reference = True

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.initial_weights = self.snapshot()

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        self.restore(self.initial_weights)

    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        seen = [tasks[u] for u in range(stage + 1)]
        return (LabelledData.concatenate([task.train for task in seen]),
                LabelledData.concatenate([task.valid for task in seen]))

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        return self.scenario_cross_entropy(self.multihead.features(batch.inputs), batch, step.stage)[0]

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.scenario_cross_entropy(self.multihead.features(batch.inputs), batch, stage, reduction="sum")

    def extra_state(self) -> dict[str, object]:
        return {"initial_weights": self.initial_weights}

    def load_extra_state(self, state: dict[str, object]) -> None:
        weights: dict[str, torch.Tensor] = state["initial_weights"]  # type: ignore[assignment]
        self.initial_weights = tensors_to(weights, self.device)
