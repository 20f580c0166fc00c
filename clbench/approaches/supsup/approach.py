"""SupSup: Supermasks in Superposition (Wortsman, Ramanujan, Liu, Kembhavi, Rastegari, Yosinski & Farhadi,
NeurIPS 2020; RAIVNLab/supsup@6a31878).

The network's weights are fixed at random (the signed Kaiming constant) and never trained; task t learns only its
own scores, one per edge, whose supermask (`threshold`: score >= 0, or edge-popup's `top-k` of |score|) picks the
subnetwork that solves it, the gradient going straight through the mask to the scores (`functions`, `network`).
Training task t touches no other task's scores, so every earlier task's outputs are exactly what they were after it
was learned: no forgetting by construction, at one bit per edge per task of memory.

Evaluations (`data.scenario` task or class: the task id is given in training, the authors' GG and GN scenarios):

- task-aware (their GG): task u's logits are the network under task u's masks (`predict`).
- task-agnostic (their GNu, one-shot): for each test sample alone, the masks of the candidate tasks 0..n-1 (the
  n tasks whose classes are the candidates, `evaluate_task`'s `n_candidates`) are superposed with weights
  alpha_k = 1/n, the gradient of the output's entropy with respect to alpha is taken, and the task with the most
  negative gradient is inferred (`functions.infer_tasks`; `adaptors.py:76-113`, `adaptors.py:368-373`); the
  sample is classified by the inferred task's masks. `predict_classes` returns, over every candidate class, the
  inferred task's logits in its classes and `OTHER_TASKS_LOGIT` in every other task's (the task-agnostic
  cross-entropy therefore charges a wrongly inferred sample about 1e4: read that evaluation's accuracy). The
  authors infer once per test batch from its first image (`args.data_to_repeat` 1, `adaptors.py:370`); here each
  sample is inferred from itself, so no prediction depends on its batch. The entropy is taken over all C outputs
  of the shared output layer (`output_size`), as the authors' (100 in `mnist.ipynb`, 500 in `supsup_h.py:19`, 10
  of them labelled): the unlabelled outputs, pushed down by every task's training loss, are what the inference
  reads (on the authors' own trained notebook model, restricting the entropy to the 10 labelled outputs dropped
  the inferred task's accuracy from 100% to 82% of 500 test images).
- The domain scenario is refused: there the task id is given neither in training nor at test time, and one mask per
  task over fixed weights cannot be trained without it (the authors' NNs scenario, which adds masks as it detects
  new tasks, is not implemented).

Bodies: the MLP only (`network.kind` alexnet and resnet18 are refused: the authors' masked convolutions with
per-task batch norm are not written), with the spec's dropout in training (the authors' has none); no biases,
whatever `network.bias` says (`network`).

Monitoring: `supsup_masks` after each task: per task u <= t and layer (plus `total`), the edges in task u's mask,
the layer's edges and their fraction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from clbench.approaches import losses
from clbench.approaches.base import Approach
from clbench.approaches.datatypes import (
    TASK_AGNOSTIC,
    TASK_AWARE,
    ApproachContext,
    Evaluation,
    Hyperparameters,
    StepInfo,
)
from clbench.approaches.domains import FLOAT_BYTES, BenchmarkFacts, DomainProblem, memory_problem
from clbench.approaches.supsup.functions import MASK_RULES
from clbench.approaches.supsup.network import SupSupMLP
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.spec.fields import field

OTHER_TASKS_LOGIT = -1.0e4
"""`predict_classes`' value for the classes of the tasks not inferred (finite, so the cross-entropy is finite)."""

INFERENCE_CHUNK = 512
"""Samples per one-shot inference pass (its activations are n_candidates times a forward pass's)."""


@dataclass(frozen=True)
class SupSupHyperparameters(Hyperparameters):
    """SupSup's hyper-parameters (RAIVNLab/supsup@6a31878; the permuted-MNIST values of `mnist.ipynb` and
    `experiments/GNu/MNISTPerm/FC-250-tasks/supsup_h.py`)."""

    clip_grad_norm: float = field(0.0, doc="gradient-norm clipping (0: none, as the authors' trainers/default.py)",
                                  minimum=0.0, special={0.0: "no clipping"})
    mask: str = field("threshold", doc="supermask rule: threshold (score >= 0: mnist.ipynb cell 3, the GNu "
                                       "MNISTPerm runs' FastMultitaskMaskConv) or top-k (edge-popup's, "
                                       "models/module_util.py:48-66)", choices=MASK_RULES)
    density: float = field(0.5, doc="top-k: fraction of each layer's edges kept (the authors' `sparsity`, "
                                    "args.py:93, default 0.5); unused by threshold", above=0.0, maximum=1.0)
    output_size: int = field(100, doc="outputs of the shared masked output layer (at least the widest task's "
                                      "classes), all in the training loss and the inference's entropy (mnist.ipynb "
                                      "cell 6: 100; supsup_h.py:19: 500)", minimum=2)


class SupSup(Approach):
    """One supermask per task over fixed random weights; the task inferred by the masks' output entropy.

    The authors' code: RAIVNLab/supsup@6a31878 `mnist.ipynb` (the GG/GNs MNIST example), `models/modules.py` (the
    masked layers), `models/module_util.py` (the supermask rules) and `adaptors.py` (one-shot task inference).
    """

    name = "supsup"
    summary = "supermasks in superposition over fixed random weights (Wortsman et al. 2020)"
    refuses_domain = ("one supermask per task over fixed weights is trained with its task's id, which the domain "
                      "scenario does not give (the authors' NNs scenario is not implemented)")
    unsupported_networks = {
        "alexnet": "SupSup's masked layers are written for the MLP only (the authors' masked convolutions and "
                   "per-task batch norm are not)",
        "resnet18": "SupSup's masked layers are written for the MLP only (the authors' masked convolutions and "
                    "per-task batch norm are not)"}
    monitoring_reporter = "clbench.approaches.supsup.report:SupSupReporter"
    hyperparameters_class = SupSupHyperparameters
    hparams: SupSupHyperparameters
    network: SupSupMLP

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """output_size at least the widest task's classes (each task's classes are its first outputs), and the
        layers' fixed weights and every task's scores (4 bytes each, the task's scores twice more for their gradient
        and RMSprop's state) within this machine's memory."""
        assert isinstance(hyperparameters, SupSupHyperparameters)
        outputs, widest = hyperparameters.output_size, max(facts.head_sizes)
        if outputs < widest:
            return DomainProblem("output_size", f"a task of this benchmark has {widest} classes, each task's classes "
                                                f"are outputs of the shared output layer: use at least {widest}")
        sizes = [facts.input_size, *facts.network.hidden, outputs]
        edges = sum(inputs * out for inputs, out in zip(sizes, sizes[1:]))
        copies = 1 + len(facts.head_sizes) + 2
        return memory_problem("output_size", float(edges) * copies * FLOAT_BYTES,
                              f"{len(sizes) - 1} masked layers of {outputs:,} outputs with a score per edge and task")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.learned = 0  # tasks whose masks are final

    # ------------------------------------------------------------------ network and training
    def build_network(self) -> nn.Module:
        network = self.context.network
        return SupSupMLP(math.prod(self.context.input_shape), network.hidden, self.context.head_sizes,
                         self.hparams.mask, self.hparams.density, network.input_dropout, network.dropout,
                         self.hparams.output_size)

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """Task `stage`'s scores only: the weights are fixed and every other task's scores stay as they are."""
        return self.network.task_scores(stage)

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        """Cross-entropy over every output under the task's masks, its classes the first ones (every scenario: the
        task id is given in training; the authors' loss over all `output_size` outputs)."""
        return functional.cross_entropy(self.network(batch.inputs, step.stage), batch.targets)

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        return losses.head_cross_entropy(self.network(batch.inputs, stage), batch.targets, "sum")

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.learned = stage + 1

    # ------------------------------------------------------------------ evaluation
    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        """Task `task`'s logits under its masks (the authors' GG): its classes' outputs."""
        return self.network(inputs, task)[:, :self.context.head_sizes[task]]

    def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """(B, sum of the classes of tasks 0..n_tasks-1): each sample's inferred task's logits in its classes,
        `OTHER_TASKS_LOGIT` elsewhere (the one-shot inference of the module docstring)."""
        offsets, sizes = self.context.class_offsets, self.context.head_sizes
        inferred = torch.cat([self.network.infer_tasks(chunk, n_tasks)
                              for chunk in inputs.split(INFERENCE_CHUNK)])  # (B,)
        out = torch.full((inputs.shape[0], offsets[n_tasks - 1] + sizes[n_tasks - 1]), OTHER_TASKS_LOGIT,
                         device=inputs.device, dtype=inputs.dtype)
        for task in inferred.unique().tolist():
            rows = (inferred == task).nonzero().squeeze(1)
            out[rows, offsets[task]:offsets[task] + sizes[task]] = self.predict(inputs[rows], task).to(out.dtype)
        return out

    def evaluate_task(self, data: LabelledData, task: int, n_candidates: int) -> dict[str, Evaluation]:
        """Task-aware from `predict` (the task's own masks); task-agnostic from `predict_classes` (inferred)."""
        aware = self.evaluate(data, task)
        if not self.predicts_without_task_id():
            return {TASK_AWARE: aware}
        start = self.context.class_offsets[task]

        def agnostic(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
            logits = self.predict_classes(batch.inputs, n_candidates).float()
            return losses.head_cross_entropy(logits, batch.targets + start, "sum")

        return {TASK_AWARE: aware, TASK_AGNOSTIC: self.sum_over_batches(data, agnostic)}

    # ------------------------------------------------------------------ state, memory and monitoring
    def extra_state(self) -> dict[str, Any]:
        return {"learned": self.learned}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.learned = int(state.get("learned", 0))

    def memory_usage(self) -> tuple[int, int]:
        """(0, the learned tasks' supermasks at one bit per edge): what SupSup keeps per task."""
        edges = sum(out * inp for out, inp in self.network.shapes)
        return 0, self.learned * math.ceil(edges / 8)

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`supsup_masks`: per task u <= stage and layer (and `total`), the edges in task u's mask."""
        rows = []
        for task in range(stage + 1):
            masks = self.network.masks(task)
            counts = [(f"layer{index}", int(mask.sum()), mask.numel()) for index, mask in enumerate(masks)]
            counts.append(("total", sum(used for _, used, _ in counts), sum(total for _, _, total in counts)))
            rows += [{"task": task + 1, "layer": layer, "used": used, "weights": total,
                      "fraction": np.float32(used / total)} for layer, used, total in counts]
        return {"supsup_masks": rows}
