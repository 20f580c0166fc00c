"""A-GEM: averaged gradient episodic memory (Chaudhry, Ranzato, Rohrbach & Elhoseiny 2019, ICLR).

Each step's gradient g (the current batch's loss) is compared with the reference gradient g_ref of a batch of
`replay_batch_size` memory samples; when they conflict (g . g_ref < 0), g is projected:
g - (g . g_ref / g_ref . g_ref) g_ref (Eq. 11, `functions.agem_project`), over all parameters as one vector
(Mammoth `models/agem.py`). The episodic memory is filled at the end of each task with buffer_size // T random
samples of that task: the paper's per-task episodic memory, which clbench keeps. Mammoth's `end_task` computes that
quota (`samples_per_task`) but does not use it: it offers one training batch of the task (the first batch of its
train loader: labels and non-augmented inputs) to its reservoir buffer.

The loss its paper used: the cross-entropy over the task's own classes, every other output masked to -inf (the
authors' code, facebookresearch/agem@4542149 `model/model.py`: `output_mask`, `task_pruned_logits`), for the batch
and for the reference gradient's memory batch alike: the task scenario's loss. In the class scenario clbench uses
`training.class_loss` (seen so far by default; every output as Mammoth's single head with `all`).
"""

from __future__ import annotations

import torch

from clbench.approaches.datatypes import StepInfo
from clbench.approaches.replay.approach import ReplayApproach
from clbench.approaches.replay.functions import agem_project
from clbench.data.batches import TaskSequence


class AGEM(ReplayApproach):
    """The step's gradient, projected so that the memory's loss does not increase (to first order).

    The authors' code: facebookresearch/agem@4542149 `model/model.py`; Mammoth's (aimagelab/mammoth@e75a491):
    `models/agem.py`.
    """

    name = "agem"
    summary = "averaged gradient episodic memory (Chaudhry et al. 2019)"

    def before_step(self, step: StepInfo) -> None:
        replay = self.replayed()
        if replay is None:
            return
        parameters = [p for p in self.network.parameters() if p.requires_grad]
        gradient = flat_gradient(parameters)  # g: the current batch's loss
        for p in parameters:
            p.grad = None
        batch = replay[0]
        self.scenario_cross_entropy(self.multihead.features(batch.inputs), batch, step.stage)[0].backward()
        projected = agem_project(gradient, flat_gradient(parameters))  # against g_ref: the memory batch's loss
        offset = 0
        for p in parameters:
            p.grad = projected[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        quota = self.hparams.buffer_size // len(tasks)
        train = tasks[stage].train
        chosen = torch.randperm(len(train), generator=self.replay_generator)[:quota].to(train.images.device)
        batch = train.batch(chosen)
        self.store(batch)  # fewer than capacity in all: reservoir sampling only appends


def flat_gradient(parameters: list[torch.nn.Parameter]) -> torch.Tensor:
    """The parameters' gradients as one vector (zeros where a parameter has none)."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in parameters])
