"""HAT: hard attention to the task (Serra, Suris, Miron & Karatzoglou, ICML 2018).

Per training batch of task t:

1. s is annealed within the epoch (Eq. 3), from 1/smax at the first batch to smax at the last; the forward
   pass gates every conv / hidden fc layer with a^t_l = sigmoid(s e^t_l) (Eq. 1).
2. loss = cross-entropy on task t's head + c R(A^t, A^{<t}) (Eqs. 4-5), R weighted by the unused capacity.
3. After backward, if earlier tasks exist: each weight's gradient is multiplied by 1 - min(a_out, a_in) of the
   cumulative attention a^{<t} (Eq. 2; bias: 1 - a_out; first layer: a_out only; the fc after the conv
   stack: each channel's attention repeated over its flattened positions). Heads are not masked.
4. The embedding gradient is compensated (Sec. 2.5): g *= smax/s (cosh(clamp(s e, +-50)) + 1)/(cosh(e) + 1).
5. Gradient-norm clipping and the SGD step (base class); then e^t is clamped to [-6, 6].

Only task t's embeddings are optimised: those of other tasks never change. Validation (early stopping,
including c R) and evaluation use s = smax. After a task, with its best weights restored, a^t at s = smax is
stored and a^{<=t} = max(a^t, a^{<t}); both are checkpointed by `extra_state`.

Monitoring tables (after every task): `hat_masks` (the attention of every gated unit for the task just
trained), `hat_capacity` (fraction of weights used per layer and in total, for the cumulative mask and for
the task's own mask; a weight is used when min(a_out, a_in) > `threshold`; counted over the gated layers'
weight tensors: no biases, no heads), `hat_reuse` (from the second task on: for every pair of tasks
i < j seen so far, the fraction of task i's weights that task j also uses).

Compression experiment (paper end of Sec. 4.3, appendix table "Network Compression"): HAT on one isolated
task with c = 1.5 and embeddings initialised U(0, 2) (`embedding_init_scale` defaults to 2). One data set of
mixture-8 at a time, e.g. MNIST:

    clbench train mixture8 -m hat,sgd --set hat.c=1.5 --set hat.embedding_init=uniform --set "data.datasets=[mnist]"

"Compressed A^1" is hat's stage-1 test accuracy, "raw A^1" sgd's, and the size kept is the stage-1
`hat_capacity` row with mask ``cumulative`` and layer ``total`` (column `fraction`: weights kept / body
weights, heads excluded). Stage 1 of any full run is the same experiment for the first task of its sequence.

Bodies: the MLP and the AlexNet-like net, whose units the paper gates. `network.kind` resnet18 is refused
(`unsupported_networks`): its residual connections and batch norm (a scale, a shift and running statistics shared
by every task, which no unit mask protects) are outside the paper's definition, and no gated ResNet is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.hat import functions as hat_functions
from clbench.approaches.hat.network import EMBEDDING_INITS, GatedNet, build_hat_network
from clbench.data.batches import Batch, TaskSequence
from clbench.spec.fields import field


@dataclass(frozen=True)
class HatHyperparameters(Hyperparameters):
    """HAT's hyper-parameters (paper Sec. 4.2: smax 400 and c 0.75 unless stated otherwise)."""

    clip_grad_norm: float = field(10000.0, doc="gradient-norm clipping (reference hat: 10000)",
                                  minimum=0.0, special={0.0: "no clipping"})
    smax: float = field(400.0, doc="stability s_max of the annealed gate (Eq. 3; paper 400, grid 25..800)",
                        minimum=1.0)
    c: float = field(0.75, doc="compressibility c of the attention regulariser (Eq. 4; paper 0.75, grid "
                               "0.1..4; compression experiment 1.5)", minimum=0.0)
    embedding_init: str = field("normal", doc="task-embedding init: normal N(0,1) (paper) or uniform "
                                              "U(0, embedding_init_scale) (compression experiment)",
                                choices=EMBEDDING_INITS)
    embedding_init_scale: float = field(2.0, doc="k of the uniform init U(0, k) (compression experiment: 2; "
                                                 "appendix: k in [1, 6]); unused for normal", minimum=0.0)
    threshold: float = field(0.5, doc="monitoring only: an attention value above this counts as used when "
                                      "masks are binarised (capacity, reuse)", minimum=0.0, maximum=1.0)


class Hat(Approach):
    """Hard attention to the task: learned per-task unit masks that condition later tasks' gradients.

    The authors' code: joansj/hat@6fd0b9d `src/approaches/hat.py`, `src/networks/mlp_hat.py`,
    `src/networks/alexnet_hat.py`.
    """

    name = "hat"
    monitoring_reporter = "clbench.approaches.hat.report:HatReporter"
    summary = "hard attention to the task (Serra et al. 2018)"
    needs_task_id = True  # its prediction uses the task's attention masks: task-aware evaluation only
    refuses_bias_free = ("HAT's gated MLP masks and compensates its biases as the reference's (joansj/hat "
                         "src/networks/mlp_hat.py, get_view_for: fc*.bias)")
    unsupported_networks = {"resnet18": "HAT's masks gate the units of the MLP and the AlexNet-like net (Serra et "
                                        "al. 2018, Sec. 2.2); a ResNet's batch norm (scale, shift, running statistics "
                                        "shared by every task) and residual connections are not masked, and no gated "
                                        "ResNet is implemented"}
    hyperparameters_class = HatHyperparameters
    hparams: HatHyperparameters
    network: GatedNet

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.layer_shapes = self.network.layer_shapes()
        self.cumulative: list[torch.Tensor] | None = None  # a^{<=t} per gated layer, (N_l,) each
        self.task_masks: list[list[torch.Tensor]] = []  # a^t at s = smax per finished task
        self.multipliers: list[tuple[torch.Tensor, torch.Tensor]] = []  # (weight, bias) gradient factors
        self.schedule: torch.Tensor | None = None  # s per batch of the current epoch, (B,)
        self.step_scale: torch.Tensor | None = None  # s of the step in progress (0-dim)
        self.unit_counts = self.network.unit_counts()
        self.regulariser_weights = self.make_regulariser_weights()  # Eq. 5's terms of a^{<t}, once per task

    # ------------------------------------------------------------------ network and parameters
    def build_network(self) -> nn.Module:
        hparams = self.hparams
        assert isinstance(hparams, HatHyperparameters)
        return build_hat_network(self.context.network, self.context.input_shape, self.context.head_sizes,
                                 hparams.smax, hparams.embedding_init, hparams.embedding_init_scale)

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """Everything but the embeddings of the other tasks (which must not move)."""
        others = {id(p) for task, layers in enumerate(self.network.embeddings) if task != stage
                  for p in layers}
        return [p for p in self.network.parameters() if p.requires_grad and id(p) not in others]

    # ------------------------------------------------------------------ losses
    def scale(self, step: StepInfo) -> torch.Tensor:
        """s of a training step (Eq. 3) as a 0-dim tensor on the device (one schedule per epoch length)."""
        if self.schedule is None or self.schedule.shape[0] != step.n_batches:
            self.schedule = hat_functions.annealing_schedule(step.n_batches, self.hparams.smax, self.device)
        return self.schedule[step.batch]

    def make_regulariser_weights(self) -> hat_functions.RegulariserWeights:
        return hat_functions.regulariser_weights(self.cumulative, self.unit_counts, self.device)

    def regulariser(self, masks: list[torch.Tensor]) -> torch.Tensor:
        """c R(A^t, A^{<t}) (Eqs. 4-5)."""
        return self.hparams.c * hat_functions.weighted_attention(masks, self.regulariser_weights)

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        logits, masks = self.training_forward(batch, step)
        return functional.cross_entropy(logits, batch.targets) + self.regulariser(masks)

    def training_forward(self, batch: Batch, step: StepInfo) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(logits, masks a^t) of a training batch at the step's annealed s (Eqs. 1, 3); s is kept for the
        compensation in `before_step`. AdaHAT also keeps the masks (its network sparsity)."""
        self.step_scale = self.scale(step)
        return self.network.forward_with_masks(batch.inputs, batch.task, self.step_scale)

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed CE + c R at s = smax (R does not depend on the batch: it counts once per sample)."""
        logits, masks = self.network.forward_with_masks(batch.inputs, batch.task, self.hparams.smax)
        loss = functional.cross_entropy(logits, batch.targets, reduction="sum")
        loss = loss + self.regulariser(masks) * batch.targets.shape[0]
        return loss, (logits.argmax(1) == batch.targets).sum()

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        return self.network(inputs, task, self.hparams.smax)

    # ------------------------------------------------------------------ gradient conditioning
    def before_step(self, step: StepInfo) -> None:
        """Mask the body's gradients by the cumulative attention; compensate the embedding gradients.

        All of it is one multi-tensor multiply (`torch._foreach_mul_`) rather than one call per tensor.
        """
        pairs = [*self.gradient_masks(step.stage), *self.embedding_compensation(step.stage)]
        if pairs:
            grads, factors = zip(*pairs)
            torch._foreach_mul_(list(grads), list(factors))

    def gradient_masks(self, stage: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(gradient, factor) of every gated weight (1 - min(a_out, a_in), Eq. 2) and bias (1 - a_out);
        none at the first task."""
        if stage == 0:
            return []
        return [(parameter.grad, factor)
                for module, factors in zip(self.network.gated_modules(), self.multipliers)
                for parameter, factor in zip((module.weight, module.bias), factors)
                if parameter is not None and parameter.grad is not None]

    def embedding_compensation(self, stage: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(gradient, compensation factor) of each of the task's embeddings (Sec. 2.5)."""
        embeddings = self.network.embedding_parameters(stage)
        if any(embedding.grad is None for embedding in embeddings):
            return []
        assert self.step_scale is not None
        with torch.no_grad():
            factor = hat_functions.compensation_factor(torch.cat(embeddings), self.step_scale, self.hparams.smax)
        return list(zip([embedding.grad for embedding in embeddings], factor.split(self.unit_counts)))

    def after_step(self, step: StepInfo) -> None:
        """Keep the task's embeddings within [-6, 6] (two multi-tensor calls)."""
        embeddings = self.network.embedding_parameters(step.stage)
        with torch.no_grad():
            torch._foreach_clamp_min_(embeddings, -hat_functions.EMBEDDING_CLAMP)
            torch._foreach_clamp_max_(embeddings, hat_functions.EMBEDDING_CLAMP)

    # ------------------------------------------------------------------ after a task
    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """a^t at s = smax from the restored best weights; a^{<=t} = max(a^t, a^{<t}); new gradient masks."""
        with torch.no_grad():
            masks = [mask.detach().clone() for mask in self.network.masks(stage, self.hparams.smax)]
        if len(self.task_masks) != stage:
            raise RuntimeError(f"HAT finished task {stage} but holds masks of {len(self.task_masks)} tasks")
        self.task_masks.append(masks)
        self.cumulative = hat_functions.cumulative_masks(masks, self.cumulative)
        self.update_multipliers()
        self.regulariser_weights = self.make_regulariser_weights()

    def update_multipliers(self) -> None:
        """Gradient factors (weight: 1 - min(a_out, a_in); bias: 1 - a_out) from the cumulative masks."""
        if self.cumulative is None:
            self.multipliers = []
            return
        self.multipliers = hat_functions.gradient_multipliers(self.cumulative, self.layer_shapes)

    # ------------------------------------------------------------------ state
    def extra_state(self) -> dict[str, Any]:
        return {"cumulative_masks": [] if self.cumulative is None else [m.clone() for m in self.cumulative],
                "task_masks": [[m.clone() for m in masks] for masks in self.task_masks]}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        cumulative = state.get("cumulative_masks") or []
        self.cumulative = [m.to(self.device) for m in cumulative] if cumulative else None
        self.task_masks = [[m.to(self.device) for m in masks] for masks in state.get("task_masks", [])]
        self.update_multipliers()
        self.regulariser_weights = self.make_regulariser_weights()

    # ------------------------------------------------------------------ monitoring
    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`hat_masks`, `hat_capacity` and `hat_reuse` after task `stage` (see the module docstring)."""
        if len(self.task_masks) <= stage:
            return {}
        tables = {"hat_masks": self.mask_rows(stage), "hat_capacity": self.capacity_rows(stage)}
        if stage > 0:  # no pair of tasks yet at the first stage (an empty table would lose its column types)
            tables["hat_reuse"] = self.reuse_rows(stage)
        return tables

    def log_scalars(self, stage: int) -> dict[str, float]:
        """The fraction of the body's weights used (min(a_out, a_in) > threshold) by the task's own mask a^t at
        s = smax as it is now (`task_capacity`; 1 - its compression) and by the cumulative a^{<=t} with it
        (`capacity_used`): Sec. 4.3's network capacity, per epoch. Reads the embeddings, changes nothing."""
        with torch.no_grad():
            task_masks = [mask.detach() for mask in self.network.masks(stage, self.hparams.smax)]
            cumulative = hat_functions.cumulative_masks(task_masks, self.cumulative)
        threshold, total = self.hparams.threshold, sum(shape.n_weights for shape in self.layer_shapes)
        scalars = {}
        for name, masks in (("task_capacity", task_masks), ("capacity_used", cumulative)):
            used = sum(used for used, _ in hat_functions.capacity_usage(masks, self.layer_shapes, threshold))
            scalars[name] = used / total if total else 0.0
        return scalars

    def mask_rows(self, stage: int) -> list[dict[str, Any]]:
        """One row per gated unit: the attention a^t (float32) of the task just trained."""
        rows = []
        for shape, mask in zip(self.layer_shapes, self.task_masks[stage]):
            values = mask.detach().float().cpu().numpy()
            rows += [{"task": stage + 1, "layer": shape.name, "unit": unit, "attention": value}
                     for unit, value in enumerate(values)]
        return rows

    def capacity_rows(self, stage: int) -> list[dict[str, Any]]:
        """Per layer and in total: weights used by the cumulative mask a^{<=t} and by the task's own a^t."""
        rows = []
        threshold = self.hparams.threshold
        cumulative: list[torch.Tensor] | None = None  # a^{<=stage}, rebuilt from the tasks' own masks
        for masks in self.task_masks[:stage + 1]:
            cumulative = hat_functions.cumulative_masks(masks, cumulative)
        assert cumulative is not None
        for scope, masks in (("cumulative", cumulative), ("task", self.task_masks[stage])):
            usage = hat_functions.capacity_usage(masks, self.layer_shapes, threshold)
            names = [shape.name for shape in self.layer_shapes]
            totals = (sum(used for used, _ in usage), sum(total for _, total in usage))
            for name, (used, total) in [*zip(names, usage), ("total", totals)]:
                rows.append({"mask": scope, "layer": name, "used": used, "weights": total,
                             "fraction": np.float32(used / total) if total else np.float32(0.0)})
        return rows

    def reuse_rows(self, stage: int) -> list[dict[str, Any]]:
        """For every pair of tasks i < j <= stage (1-based in the table): task i's weights that j also uses."""
        rows = []
        for earlier in range(stage + 1):
            for later in range(earlier + 1, stage + 1):
                shared, used = hat_functions.weight_reuse(self.task_masks[earlier], self.task_masks[later],
                                                          self.layer_shapes, self.hparams.threshold)
                rows.append({"task": earlier + 1, "later_task": later + 1, "shared": shared, "used": used,
                             "fraction": np.float32(shared / used) if used else np.float32(0.0)})
        return rows
