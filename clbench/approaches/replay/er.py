"""ER: experience replay with a reservoir memory (Chaudhry et al. 2019, "On tiny episodic memories in continual
learning"; Mammoth `models/er.py`).

Each step's batch is joined by `replay_batch_size` samples drawn from the memory, and the loss is the mean
cross-entropy over the joined batch (each sample on its own head in the task scenario, over every class seen so
far in the class scenario). After the optimiser step the step's batch is offered to the memory by reservoir
sampling, as Mammoth's `observe` does. The validation loss (early stopping) is the current task's.

The loss its paper used: the cross-entropy over the task's own classes, every other output masked to -inf (the
authors' code, facebookresearch/agem@4542149 `model/model.py`: `output_mask`, `task_pruned_logits`), i.e. the task
scenario's loss; Mammoth's ER (the DER paper's baseline) over every output of its single head, i.e. the class
scenario with `training.class_loss: all` (`benchmarks/seq-mnist.yaml`). clbench's class scenario defaults to the
classes seen so far (`training.class_loss: seen`).
"""

from __future__ import annotations

import torch

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.replay.approach import ReplayApproach, joined
from clbench.data.batches import Batch


class ExperienceReplay(ReplayApproach):
    """The current batch and a batch from the memory in one cross-entropy; the batch stored after the step.

    The authors' code: facebookresearch/agem@4542149 `model/model.py` (Chaudhry et al.'s); Mammoth's
    (aimagelab/mammoth@e75a491): `models/er.py`.
    """

    name = "er"
    summary = "experience replay with a reservoir memory (Chaudhry et al. 2019)"

    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        """Draw, join, loss, step, store (Mammoth `models/er.py` `observe`)."""
        with self.autocast():
            replay = self.replayed()  # memory samples, drawn before the batch is stored (None while it is empty)
            mixed = batch if replay is None else joined(batch, replay[0])
            loss = self.scenario_cross_entropy(self.multihead.features(mixed.inputs), mixed, step.stage)[0]
        self.backward_and_step(loss, step, optimizer)
        self.store(batch)  # once the optimiser has stepped (Mammoth: `add_data` after `opt.step()`)
        return loss.detach()
