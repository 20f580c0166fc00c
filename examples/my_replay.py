"""Experience replay written against `clbench.api` alone: a plugin in about 40 lines.

Run it with `clbench train mnist5 -m examples/my_replay.py:MyReplay --set data.scenario=class`.
"""

from dataclasses import dataclass
from typing import Any

import torch

import clbench.api as cl


@dataclass(frozen=True)
class MyReplayHyperparameters(cl.Hyperparameters):
    buffer_size: int = cl.field(200, doc="samples kept in memory over all tasks", minimum=1)
    replay_batch_size: int = cl.field(64, doc="memory samples joined to each training batch", minimum=1)


class MyReplay(cl.Approach):
    name = "my-replay"
    summary = "experience replay with a reservoir memory, as a plugin"
    hyperparameters_class = MyReplayHyperparameters

    def __init__(self, context: cl.ApproachContext, hyperparameters: cl.Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.buffer = cl.ReplayBuffer(self.hparams.buffer_size, self.device)
        self.generator = context.generator("my-replay")
        self.transform: cl.InputTransform | None = None

    def begin_task(self, stage: int, tasks: cl.TaskSequence) -> None:
        self.transform = tasks[stage].train.transform  # normalises replayed images as the task data

    def training_step(self, batch: cl.Batch, step: cl.StepInfo, optimizer: cl.StepOptimizer) -> torch.Tensor:
        mixed = batch  # draw, join, loss, step, store
        if len(self.buffer):
            memory = self.buffer.sample(self.hparams.replay_batch_size, self.generator)
            old = cl.LabelledData(memory.images, memory.labels, memory.task_ids, self.transform, -1)
            mixed = cl.joined(batch, old.batch(slice(None)))
        with self.autocast():  # bfloat16 under training.amp, else nothing
            loss = self.scenario_cross_entropy(self.multihead.features(mixed.inputs), mixed, step.stage)[0]
        self.backward_and_step(loss, step, optimizer)
        task_ids = torch.full_like(batch.targets, batch.task)
        self.buffer.add_reservoir(batch.images, batch.targets, task_ids, self.generator)
        return loss.detach()

    def memory_usage(self) -> tuple[int, int]:
        return len(self.buffer), self.buffer.nbytes

    def extra_state(self) -> dict[str, Any]:
        return {"buffer": self.buffer.state_dict(), "generator": self.generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.buffer.load_state_dict(state["buffer"])
        self.generator.set_state(state["generator"])
