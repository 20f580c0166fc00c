"""WSN: Winning SubNetworks (Kang et al., ICML 2022), as in the authors' code (ihaeyong/WSN@f066982,
main_wsn_pmnist.py and networks/subnet.py).

Every weight (and bias) of the body has a learnable score; in training, a layer's mask is the top-c fraction of its
|scores| (`functions.top_c_mask`, straight-through: the scores learn from the gradient of weight * mask), and the
layer computes with weight * mask (`masking.SubnetMask`). Weights and scores train together; the weights any
earlier task's mask holds are frozen: their gradients are zeroed before each step (main_wsn_pmnist.py:53-75), so
a new task may reuse them as they are. After a task, its mask is the last one computed in training (the authors'
`get_masks` reads the mask of the last training step, main_wsn_pmnist.py:210, networks/mlp.py:80), stored
bit-packed (`functions.pack_mask`; the authors also compress them, which this does not), and added to the union of
the used weights (main_wsn_pmnist.py:224-226). Task u is evaluated with its own stored mask (main_wsn_pmnist.py:
254); the weights in it never change again, so its outputs do not either. Validation of the task being learned uses
the last training mask (subnet.py:125-129, mode "valid"); a task not learned yet, the top-c of the current scores.

Heads: one per task, unmasked, trained at their own task only (networks/mlp.py:27-30,60). Bodies: the MLP
(`network.bias: false` for the authors' bias-free one; with biases, each bias has its own scores and mask, as their
SubnetLinear with bias=True, subnet.py:54-57,117-122) and the AlexNet-like net (masked conv layers). `network.kind`
resnet18 is refused: batch norm's running statistics are shared and re-estimated by later tasks. Weight decay is
refused: it would move the frozen weights.

Memory: the stored masks, ceil(n / 8) bytes per masked tensor and task. Monitoring: `wsn_capacity` after each task,
per layer (and `total`): the task's mask, the weights it reuses, and those used by any task so far.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.wsn import functions
from clbench.approaches.wsn.masking import SubnetMask, mask_layers, original
from clbench.data.batches import TaskSequence
from clbench.spec import DataSpec, TrainingSpec
from clbench.spec.fields import field

Masks = dict[str, torch.Tensor]
"""Tensor name in the body ('layers.0.weight') -> mask (bool, or packed uint8 bytes)."""


@dataclass(frozen=True)
class WSNHyperparameters(Hyperparameters):
    """WSN's hyper-parameters (Kang et al. 2022; ihaeyong/WSN@f066982)."""

    clip_grad_norm: float = field(0.0, doc="gradient-norm clipping (authors: none, main_wsn_pmnist.py:48-77)",
                                  minimum=0.0, special={0.0: "no clipping"})
    c: float = field(0.5, doc="fraction of each layer's weights in a task's mask, the paper's c (authors' "
                              "--sparsity, main_wsn_pmnist.py:326: 0.5 by default; line 333 ranks on 1 - c)",
                     above=0.0, maximum=1.0)


class WSN(Approach):
    """Per-task top-c masks of learned scores; the weights of earlier tasks' masks frozen and reused.

    The authors' code: ihaeyong/WSN@f066982 `main_wsn_pmnist.py` (training, freezing, the stored masks) and
    `networks/subnet.py` (the top-c mask and its straight-through gradient).
    """

    name = "wsn"
    summary = "winning subnetworks: learned top-c weight masks per task, used weights frozen (Kang et al. 2022)"
    needs_task_id = True  # its prediction uses the task's mask: task-aware evaluation only
    unsupported_networks = {"resnet18": "batch norm's running statistics are shared by every task and re-estimated "
                                        "while later tasks train, so an earlier task's mask no longer keeps its "
                                        "outputs fixed; per-task batch norm is not implemented"}
    monitoring_reporter = "clbench.approaches.wsn.report:WSNReporter"
    hyperparameters_class = WSNHyperparameters
    hparams: WSNHyperparameters

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.task_masks: dict[int, Masks] = {}  # task -> its mask per tensor, packed (`functions.pack_mask`)
        self.used = {name: torch.zeros_like(gate.scores, dtype=torch.bool) for name, gate in self.gates.items()}
        self.learning: int | None = None  # the task being trained, between begin_task and end_task

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        if training.weight_decay > 0:
            return ("approach wsn does not run with `training.weight_decay` > 0: weight decay would move the weights "
                    "that earlier tasks' masks froze (the authors use none)")
        return super().protocol_problem(training, data, hyperparameters)

    def build_network(self) -> nn.Module:
        """The spec's body and heads, each Linear/Conv2d tensor of the body masked (`masking.mask_layers`)."""
        network = super().build_network()
        self.gates = mask_layers(network, self.hparams.c)
        if not self.gates:
            raise ValueError("WSN found no Linear or Conv2d layer to mask in the body")
        return network

    # ------------------------------------------------------------------ training
    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        self.learning = stage

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """The body's weights (those of earlier tasks' masks gradient-zeroed), their scores, the task's head."""
        body = [original(self.network, name) for name in self.gates]
        scores = [gate.scores for gate in self.gates.values()]
        return [*body, *scores, *self.multihead.heads[stage].parameters()]

    def train_mode(self, stage: int) -> None:
        """Training mode, masks from the scores' top-c."""
        super().train_mode(stage)
        self.set_masks(None)

    def before_step(self, step: StepInfo) -> None:
        """Zero the gradients of the weights an earlier task's mask holds (main_wsn_pmnist.py:75)."""
        if not self.task_masks:
            return
        for name in self.gates:
            grad = original(self.network, name).grad
            if grad is not None:
                grad.masked_fill_(self.used[name], 0.0)

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """Store the task's mask (the last training step's) and add it to the used weights."""
        masks = {name: last_mask(gate) for name, gate in self.gates.items()}
        self.task_masks[stage] = {name: functions.pack_mask(mask) for name, mask in masks.items()}
        self.used = {name: functions.union(self.used[name], masks[name]) for name in self.gates}
        self.learning = None

    # ------------------------------------------------------------------ evaluation
    def mask_of(self, task: int) -> Masks:
        """Task `task`'s mask per tensor: its stored one; while it is learned, the last training step's (subnet.py
        mode "valid"); a task not learned yet, the top-c of the scores now."""
        if task in self.task_masks:
            return {name: functions.unpack_mask(packed, self.gates[name].scores.shape)
                    for name, packed in self.task_masks[task].items()}
        if task == self.learning:
            return {name: last_mask(gate) for name, gate in self.gates.items()}
        return {name: gate.current_mask() for name, gate in self.gates.items()}

    def set_masks(self, masks: Masks | None) -> None:
        for name, gate in self.gates.items():
            gate.fixed = None if masks is None else masks[name].to(gate.scores.dtype)

    @contextlib.contextmanager
    def masked(self, task: int) -> Iterator[None]:
        """The body computes with task `task`'s mask inside the block, with the scores' top-c after it."""
        self.set_masks(self.mask_of(task))
        try:
            yield
        finally:
            self.set_masks(None)

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        """Logits of task `task` with its mask (main_wsn_pmnist.py:254, mode "test")."""
        with self.masked(task):
            return self.network(inputs, task)

    # ------------------------------------------------------------------ state and monitoring
    def extra_state(self) -> dict[str, Any]:
        return {"task_masks": {task: {name: packed.clone() for name, packed in masks.items()}
                               for task, masks in self.task_masks.items()}}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        stored = state.get("task_masks") or {}
        self.task_masks = {int(task): {name: packed.to(self.device) for name, packed in masks.items()}
                           for task, masks in stored.items()}
        self.used = {name: torch.zeros_like(gate.scores, dtype=torch.bool) for name, gate in self.gates.items()}
        for task in sorted(self.task_masks):
            for name, mask in self.mask_of(task).items():
                self.used[name] = functions.union(self.used[name], mask)

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`wsn_capacity` after task `stage`: per layer and in total, the weights in the task's mask, those of them
        an earlier task used (reused, frozen), those any task so far used, and the layer's size and mask bytes."""
        mask = self.mask_of(stage)
        before = {name: torch.zeros_like(used) for name, used in self.used.items()}
        for task in range(stage):
            for name, earlier in self.mask_of(task).items():
                before[name] |= earlier
        rows = []
        for name in self.gates:
            rows.append(capacity_row(name, mask[name], before[name], self.used[name],
                                     int(self.task_masks[stage][name].numel())))
        rows.append(total_row(rows))
        return {"wsn_capacity": rows}


def last_mask(gate: SubnetMask) -> torch.Tensor:
    """A layer's mask of the last training step (the scores' top-c now if no step ran), as bool."""
    return gate.last.bool() if gate.last is not None else gate.current_mask()


def capacity_row(layer: str, mask: torch.Tensor, used_before: torch.Tensor, used: torch.Tensor,
                 mask_bytes: int) -> dict[str, Any]:
    n = mask.numel()
    return {"layer": layer, "in_mask": int(mask.sum()), "reused": int((mask & used_before).sum()),
            "used": int(used.sum()), "weights": n, "mask_bytes": mask_bytes,
            "fraction": np.float32(int(used.sum()) / n if n else 0.0)}


def total_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total = {key: sum(row[key] for row in rows) for key in ("in_mask", "reused", "used", "weights", "mask_bytes")}
    return {"layer": "total", **total,
            "fraction": np.float32(total["used"] / total["weights"] if total["weights"] else 0.0)}
