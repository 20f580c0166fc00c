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
        self.last: cl.Batch | None = None

    def begin_task(self, stage: int, tasks: cl.TaskSequence) -> None:
        self.transform = tasks[stage].train.transform  # normalises replayed images as the task data

    def loss(self, batch: cl.Batch, step: cl.StepInfo) -> torch.Tensor:
        mixed = batch
        if len(self.buffer):
            memory = self.buffer.sample(self.hparams.replay_batch_size, self.generator)
            old = cl.LabelledData(memory.images, memory.labels, memory.task_ids, self.transform, -1)
            mixed = cl.joined(batch, old.batch(slice(None)))
        self.last = batch
        return self.scenario_cross_entropy(self.multihead.features(mixed.inputs), mixed, step.stage)[0]

    def after_step(self, step: cl.StepInfo) -> None:
        assert self.last is not None
        task_ids = torch.full_like(self.last.targets, self.last.task)
        self.buffer.add_reservoir(self.last.images, self.last.targets, task_ids, self.generator)

    def memory_usage(self) -> tuple[int, int]:
        return len(self.buffer), self.buffer.nbytes

    def extra_state(self) -> dict[str, Any]:
        return {"buffer": self.buffer.state_dict(), "generator": self.generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.buffer.load_state_dict(state["buffer"])
        self.generator.set_state(state["generator"])
