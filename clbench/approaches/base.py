"""The `Approach` base class: it owns the per-task training loop; approaches override small hooks.

The loop is the paper's protocol (Experiments: Training) with the reference implementation's details:
plain SGD; each epoch one shuffled pass (last partial batch kept), then the validation loss (including the
approach's penalty) steps the lr schedule and early stopping (`PlateauSchedule`; the optimiser is rebuilt when the
lr changes); an improvement snapshots the weights, and after the loop the best snapshot is restored. Without early
stopping the same loop runs `FixedEpochs` (the online protocol with `max_epochs: 1`): `task_schedule` picks.

One training step (`training_step(batch, step, optimizer)`, once per batch), in this order by default:
`loss(batch, step)` (under `autocast`), then `backward_and_step`: the gradients zeroed, backward,
`before_step(step)` (gradient conditioning: A-GEM's projection, HAT's and PackNet's gradient masks; SI reads the
gradient), clipping to `clip_grad_norm`, the optimiser step; then `after_step(step)` (HAT's clamping, SI's path
integral). A method whose step is more than a loss overrides `training_step` whole and keeps its step in one
method, reusing `backward_and_step` or not: ER and DER++ draw from the memory, compute the loss, step, then store
the batch (Mammoth's `observe`); a gradient projection, per-step masks or a second network with its own optimiser
fit there.

Hooks (all optional): `build_network`, `begin_task`, `training_data`, `trainable_parameters`, `task_schedule`,
`training_step` (or its pieces: `loss`, `penalty`, `before_step`, `after_step`), `epoch_state` /
`restore_epoch_state` (state kept and restored with the best weights), `end_task`, `predict`, `predict_classes`,
`extra_state` / `load_extra_state` (what a checkpoint needs besides the network), `monitoring` (tables stored
with the run), `log_scalars` (scalars for the training logs), `train_mode` (the network's mode in a training
epoch), `make_optimizer`. Not a hook: `step_hook`, set by the run engine, is called after each optimiser step
(`clbench.run.curve`, the continual evaluation of `training.eval_every`).

Augmentation (`data.augment`): each training batch's uint8 images are randomly cropped and flipped before they are
normalised (`training_batch`, `augment_images`; `clbench.data.augment`), drawn from the run's `augment` stream, which
checkpoints keep; `Batch.images` stays the stored images. Validation, test and the approaches' own passes over a
task's data (a Fisher estimate, MAS's importance, iCaRL's exemplar features) see the images as stored.

Beside this file: the loop's plain data (`datatypes`), the schedules (`schedule`), the scenarios' losses and
heads (`scenario_losses`: the methods `Approach` inherits, over the functions of `losses`), the evaluations
(`evaluation`: task-aware, task-agnostic), parameter helpers (`parameters`) and the scenario refusals
(`refusals`). The other two refusals are hooks here, each asked where what it needs is known: `network_problem`
(`unsupported_networks`; by `resolve` and the constructor) and `protocol_problem` (by `resolve`, for the method
resolved).

Two protocol switches change numerics and are off by default (`training.compile`, `training.amp`, part of the
config hash): `clbench.nets.compile_network` compiles the network's body with torch.compile; `Approach.autocast`
runs the training loss and evaluation under bfloat16 autocast (backward and the optimiser step stay in float32).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from functools import partial
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches import losses
from clbench.approaches.datatypes import (
    NOT_VALIDATED,
    TASK_AWARE,
    ApproachContext,
    EpochLog,
    Evaluation,
    Hyperparameters,
    ProgressCallback,
    StepHook,
    StepInfo,
    TaskLog,
)
from clbench.approaches.domains import BenchmarkFacts, DomainProblem
from clbench.approaches.evaluation import Measure, aware_and_agnostic, mean_over_batches
from clbench.approaches.flops import FlopLedger, reference_step_flops
from clbench.approaches.optim import StepOptimizer, clip_grad_norm, protocol_optimizer
from clbench.approaches.parameters import tensor_bytes
from clbench.approaches.refusals import early_stopping_problem, scenario_network_problem, unsupported_network_problem
from clbench.approaches.scenario_losses import ScenarioLosses
from clbench.approaches.schedule import FixedEpochs, PlateauSchedule, TaskSchedule
from clbench.data.augment import random_crop_and_flip
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.errors import SpecError
from clbench.nets import MultiHeadNet, build_network, compile_network
from clbench.spec import DataSpec, NetworkSpec, TrainingSpec


class Approach(ScenarioLosses):
    """A continual-learning approach over a multi-head network; subclasses override hooks, not the loop."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    hyperparameters_class: ClassVar[type[Hyperparameters]] = Hyperparameters
    is_reference: ClassVar[bool] = False  # joint and random: the forgetting ratio's references
    # Raised when the algorithm changes, so that runs of the old code get another config hash and are never
    # skipped as finished or averaged with the new ones; 0 (the default) leaves the config, and the hashes of
    # stored results, as they were.
    revision: ClassVar[int] = 0
    # "module:Class" of a torch-free clbench.report.monitoring.MonitoringReporter (`clbench report --monitoring`)
    monitoring_reporter: ClassVar[str | None] = None
    # The prediction needs the task id beyond picking a head (masks, paths, columns): no task-agnostic evaluation,
    # and the task head's loss in the class scenario too.
    needs_task_id: ClassVar[bool] = False
    # Why the approach cannot run in the domain scenario (one shared head, no task id), in a sentence; "" if it can.
    # `needs_task_id` approaches are refused there too (`scenario_refusal`).
    refuses_domain: ClassVar[str] = ""
    # Why the approach cannot run in the class scenario (no task id at test time), in a sentence; "" if it can.
    refuses_class: ClassVar[str] = ""
    # The approach can predict a task it has not learned yet (stage 0 and the rows above the diagonal); PathNet
    # cannot (an unlearned task has no path).
    predicts_unlearned_tasks: ClassVar[bool] = True
    # `network.kind` values the approach refuses, each with the reason in one line (e.g. HAT on resnet18)
    unsupported_networks: ClassVar[dict[str, str]] = {}
    # Why the approach refuses `network.bias: false` (its own network keeps biases), or "" if it honours it
    refuses_bias_free: ClassVar[str] = ""
    # `training.KEY`s the approach never reads (its own optimiser and schedule), and why, in a clause: its resolved
    # protocol holds them at the shipped benchmark's values, else their defaults (`clbench.approaches.resolution`),
    # so a `--set` of one is said once (`protocol_notes`) and makes no new configuration.
    ignores_training: ClassVar[tuple[str, ...]] = ()
    ignores_training_reason: ClassVar[str] = ""
    # Hyper-parameters its class inherits but the approach never reads (iCaRL, LUCIR, BiC: `replay_batch_size`, as
    # their exemplars join the task's data). As with `ignores_training`, an option that sets one is said once
    # (`protocol_notes`) and makes no new configuration: the resolved value is the spec's own (without the options)
    # or the default (`clbench.approaches.resolution`).
    ignores_hyperparameters: ClassVar[tuple[str, ...]] = ()
    ignores_hyperparameters_reason: ClassVar[str] = ""

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        problem = self.network_problem(context.network, hyperparameters)
        if problem is not None:
            raise SpecError(problem)
        self.context = context
        self.hparams = hyperparameters
        self.device = context.device
        self.network: nn.Module = self.build_network().to(self.device)
        cls = type(self)
        trains_with_base_loss = (cls.loss is Approach.loss and cls.training_step is Approach.training_step
                                 and cls.learn_task is Approach.learn_task)
        problem = scenario_network_problem(type(self), context.scenario, self.network, trains_with_base_loss)
        if problem is not None:
            raise SpecError(problem)
        self.offsets = torch.tensor(context.class_offsets, dtype=torch.long, device=self.device)  # (T,)
        if context.training.compile:
            compile_network(self.network)
        self.batch_generator = context.generator("batch-order")
        self.augment_generator = context.generator("augment") if context.augment else None
        self.step_hook: StepHook | None = None  # called after every optimiser step (the run's continual evaluation)
        self.flops = FlopLedger()  # the FLOPs of the run's work, counted by the engine's regions (`flops`)

    @classmethod
    def network_problem(cls, network: NetworkSpec, hyperparameters: Hyperparameters | None = None) -> str | None:
        """Why the approach (with these hyper-parameters, when given) cannot run on this body
        (`unsupported_networks`, `refuses_bias_free`), or None if it can."""
        return unsupported_network_problem(cls.name, cls.unsupported_networks, network.kind,
                                           cls.refuses_bias_free if not network.bias else "")

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """Why these hyper-parameters cannot run against each other or the benchmark (`facts`: classes per task,
        input size, training images), or None: checked with each field's declared domain before any work
        (`clbench.approaches.domains`). A method with such constraints overrides it (the default: none)."""
        return None

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        """Why this approach cannot run under `training` (its resolved protocol) and `data` (None if it can):
        checked for every approach before any run starts (`clbench.approaches.resolve`). The base loop's early
        stopping needs a validation split."""
        return early_stopping_problem(training, data)

    # ------------------------------------------------------------------ hooks
    def build_network(self) -> nn.Module:
        """The network (default: the spec's body with one head per task; heads tied in the domain scenario)."""
        network = build_network(self.context.network, self.context.input_shape, self.context.head_sizes)
        if self.context.scenario == "domain":
            network.tie_heads()
        return network

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Called before training task `stage` (0-based)."""

    def training_data(self, stage: int, tasks: TaskSequence) -> tuple[LabelledData, LabelledData]:
        """(train, validation) data of a stage (default: the current task's)."""
        return tasks[stage].train, tasks[stage].valid

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """What the optimiser updates at this stage (default: every parameter that requires a gradient)."""
        return [p for p in self.network.parameters() if p.requires_grad]

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        """Training loss of a batch (mean): the scenario's cross-entropy plus the approach's penalty."""
        if self.class_scenario:
            features = self.multihead.features(batch.inputs)
            return self.class_cross_entropy(features, batch, step.stage)[0] + self.penalty(step.stage)
        logits = self.network(batch.inputs, batch.task)
        return functional.cross_entropy(logits, batch.targets) + self.penalty(step.stage)

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed loss, number correct) on a validation batch; the loss includes the penalty."""
        if self.class_scenario:
            features = self.multihead.features(batch.inputs)
            loss, correct = self.class_cross_entropy(features, batch, stage, reduction="sum")
        else:
            loss, correct = losses.head_cross_entropy(self.predict(batch.inputs, batch.task), batch.targets, "sum")
        return loss + self.penalty(stage) * batch.targets.shape[0], correct

    def penalty(self, stage: int) -> torch.Tensor | float:
        """The approach's regulariser, added to the training and validation loss (default 0)."""
        return 0.0

    def before_step(self, step: StepInfo) -> None:
        """After backward, before clipping and the optimiser step (gradient conditioning)."""

    def after_step(self, step: StepInfo) -> None:
        """After the optimiser step (e.g. clamping)."""

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """Called after task `stage` is trained and its best weights restored."""

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        """Logits of task `task` for evaluation (the network is in eval mode)."""
        return self.network(inputs, task)

    def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
        """Logits over the classes of tasks 0..n_tasks-1 without the task id, for task-agnostic evaluation:
        (B, sum of their classes), task t's classes at `class_offsets[t]` (default: the heads, concatenated)."""
        return self.seen_logits(self.multihead.features(inputs), n_tasks)

    def predicts_without_task_id(self) -> bool:
        """Whether task-agnostic rows are stored: not for `needs_task_id`, nor for a network without heads, nor
        for an approach that overrides `predict` but not `predict_classes` (its task-aware logits would not be the
        ones `predict_classes` concatenates), nor in the domain scenario (they would repeat the task-aware rows: the
        task's own head is the one head)."""
        cls = type(self)
        if cls.needs_task_id or self.domain_scenario:
            return False
        if cls.predict_classes is not Approach.predict_classes:
            return True
        return isinstance(self.network, MultiHeadNet) and cls.predict is Approach.predict

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """Named tables of rows to store with the run after task `stage` (e.g. HAT's masks and capacity).

        Each table `name` is written as `<name>.parquet` in the run folder, with the run's identity columns
        and a `stage` column (1-based) added by the engine. Default: nothing.
        """
        return {}

    def log_scalars(self, stage: int) -> dict[str, float]:
        """The approach's own scalars after an epoch of task `stage`, for the training logs (`clbench train --log`:
        tagged `approach/<name>`); called only when a logger is on, so it must not change any state or draw from a
        random stream. Default: none."""
        return {}

    def epoch_state(self) -> Any:
        """Approach state that belongs with the weights of an epoch (SI's path integral, default None).

        The loop keeps a copy with every best-validation snapshot of the weights and hands it back to
        `restore_epoch_state` with the best weights, so that such state ends the task at the epoch it kept.
        """
        return None

    def restore_epoch_state(self, state: Any) -> None:
        """Restore what `epoch_state` returned at the best epoch (called with the best weights' restore)."""

    def extra_state(self) -> dict[str, Any]:
        """Approach state besides the network that a checkpoint must keep (masks, Fisher, old models...)."""
        return {}

    def memory_usage(self) -> tuple[int, int]:
        """(samples kept, bytes kept besides the network) after a task: what the approach stores to remember
        earlier tasks, reported so that methods can be compared at equal memory.

        Default: no samples, and the bytes of every tensor in `extra_state()` (EWC's Fisher and anchor, HAT's
        masks, PackNet's owners, LwF's previous network, a replay buffer) except random generators' states.
        A replay approach returns its buffer's sample count.
        """
        return 0, tensor_bytes(self.extra_state())

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what `extra_state` returned."""

    # ------------------------------------------------------------------ the loop
    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        """Train task `stage` epoch by epoch under `task_schedule` (the paper's protocol: the lr schedule, early
        stopping and the best-validation weights restored; or a fixed number of epochs, the last weights kept)."""
        start = time.perf_counter()
        self.begin_task(stage, tasks)
        train, valid = self.training_data(stage, tasks)
        schedule = self.task_schedule()
        optimizer = self.make_optimizer(stage, schedule.lr)
        best = (self.snapshot(), self.epoch_state()) if schedule.restores_best else None
        best_epoch, epochs, batches = 0, 0, 0
        for epoch in range(self.training_protocol.max_epochs):
            lr = schedule.lr
            train_loss, n_batches = self.train_epoch(stage, epoch, train, optimizer)
            validated = len(valid) > 0 or schedule.restores_best  # early stopping needs the split
            evaluation = self.evaluate_validation(valid, stage) if validated else NOT_VALIDATED
            improved, lr_changed = schedule.step(evaluation.loss)
            epochs, batches = epoch + 1, batches + n_batches
            if improved:
                best, best_epoch = (self.snapshot(), self.epoch_state()), epoch + 1
            if progress is not None:
                progress(EpochLog(stage, epoch + 1, lr, train_loss, evaluation.loss, evaluation.accuracy, improved))
            if schedule.stopped:
                break
            if lr_changed:
                optimizer = self.make_optimizer(stage, schedule.lr)
        if best is not None:
            self.restore(best[0])
            self.restore_epoch_state(best[1])
        self.end_task(stage, tasks)
        return TaskLog(stage, epochs, best_epoch if schedule.restores_best else epochs, schedule.best_loss,
                       schedule.lr, time.perf_counter() - start, batches)

    def task_schedule(self) -> TaskSchedule:
        """How the epochs of a task run: `PlateauSchedule` (the paper's lr schedule and early stopping) or, with
        `training.early_stopping: false`, `FixedEpochs` (`max_epochs` epochs at the protocol's lr; with
        `max_epochs: 1` the online protocol's single pass, ceil(n / batch) optimiser steps)."""
        training = self.training_protocol
        return PlateauSchedule(training) if training.early_stopping else FixedEpochs(training)

    @property
    def training_protocol(self) -> TrainingSpec:
        return self.context.training

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bfloat16 autocast on the approach's device when `training.amp` is bf16, else a no-op."""
        if self.context.training.amp == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def make_optimizer(self, stage: int, lr: float) -> StepOptimizer:
        """The protocol's optimiser over `trainable_parameters` (`protocol_optimizer`): by default the paper's plain
        SGD, `PlainSGD` (torch.optim.SGD's step without importing torch._dynamo); `training.optimizer`, `momentum`
        and `weight_decay` choose another. An approach may return any `torch.optim` optimiser instead."""
        training = self.training_protocol
        return protocol_optimizer(self.trainable_parameters(stage), lr, training.optimizer, training.momentum,
                                  training.weight_decay)

    def train_mode(self, stage: int) -> None:
        """Put the network in training mode for an epoch of task `stage` (dropout on, batch norm on batch
        statistics, updating its running ones); SGD-F keeps a frozen body's batch norm in eval mode."""
        self.network.train()

    def augment_images(self, images: torch.Tensor) -> torch.Tensor:
        """A training batch's uint8 images (B, C, H, W) as the network sees them: randomly cropped and flipped from
        the run's `augment` stream when `data.augment` is on (`clbench.data.augment`), else as they are."""
        if self.augment_generator is None:
            return images
        return random_crop_and_flip(images, self.augment_generator)

    def training_batch(self, data: LabelledData, indices: torch.Tensor | slice) -> Batch:
        """The batch of a training step: augmented when `data.augment` is on, its `images` the stored ones; else
        gathered from the split's kept inputs (`LabelledData.batch`)."""
        if self.augment_generator is not None:
            return data.batch(indices, self.augment_images)
        return data.batch(indices, training=True)

    def train_epoch(self, stage: int, epoch: int, data: LabelledData,
                    optimizer: StepOptimizer) -> tuple[float, int]:
        """One shuffled pass over `data`, a `training_step` per batch (FLOPs sampled, `self.flops`; with
        `training.realtime` only the batches the real-time stream lets it train); returns (mean loss, batches)."""
        self.train_mode(stage)
        order = torch.randperm(len(data), generator=self.batch_generator).to(data.images.device)
        chunks = order.split(self.training_protocol.batch_size)
        total = torch.zeros((), device=self.device)
        self.flops.start_pass(self.training_protocol.realtime)
        with self.flops.uncounted():  # but the steps, sampled: a counter opened and closed around every step was
            for index, indices in enumerate(chunks):  # 60% of an sgd run on seq-mnist (8 s -> 13 s)
                if not self.flops.trains(index):
                    continue  # the real-time stream (`training.realtime`): busy when this batch arrived
                step = StepInfo(stage, epoch, index, len(chunks))
                batch = self.training_batch(data, indices)
                total += self.flops.training_step(partial(self.training_step, batch, step, optimizer), index,
                                                  len(indices),
                                                  partial(reference_step_flops, Approach, self.context, batch, stage))
                if self.step_hook is not None:
                    self.step_hook(step)
        trained = self.flops.end_pass(len(chunks))
        return float(total) / max(1, trained), trained

    def training_step(self, batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> torch.Tensor:
        """One optimiser step on a training batch; returns its loss, detached (the epoch's mean is of these).

        The default: `loss` (under `autocast`), then `backward_and_step` (zero the gradients, backward,
        `before_step`, clipping, the optimiser step), then `after_step`. A method whose step is more than a loss
        overrides this whole (replay: draw, join, loss, step, store; Mammoth's `observe`), reusing those pieces.
        """
        with self.autocast():
            loss = self.loss(batch, step)
        self.backward_and_step(loss, step, optimizer)
        self.after_step(step)
        return loss.detach()

    def backward_and_step(self, loss: torch.Tensor, step: StepInfo, optimizer: StepOptimizer) -> None:
        """Zero the gradients, backward `loss`, `before_step` (gradient conditioning), clip the gradients' norm to
        `clip_grad_norm` (0: no clipping, Mammoth's protocols) and take the optimiser step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.before_step(step)
        if self.hparams.clip_grad_norm > 0:
            parameters = [p for group in optimizer.param_groups for p in group["params"]]
            clip_grad_norm(parameters, self.hparams.clip_grad_norm)
        optimizer.step()

    def evaluate_validation(self, data: LabelledData, stage: int) -> Evaluation:
        """Validation loss (with penalty) and accuracy, without autograd."""
        return self.sum_over_batches(data, lambda batch: self.validation_loss(batch, stage))

    def evaluate(self, data: LabelledData, task: int) -> Evaluation:
        """Test cross-entropy and accuracy of task `task`'s head on `data`, without autograd."""
        return self.sum_over_batches(data, lambda batch: self.test_loss(batch, task))

    def evaluate_task(self, data: LabelledData, task: int, n_candidates: int) -> dict[str, Evaluation]:
        """Task `task`'s test loss and accuracy in each evaluation this approach has, by name.

        `task-aware`: the task's own head (`evaluate`). `task-agnostic` (when `predicts_without_task_id`): the
        argmax over the classes of tasks 0..n_candidates-1 (`predict_classes`), against the global class index.
        Both come from one forward pass per batch.
        """
        if not self.predicts_without_task_id():
            return {TASK_AWARE: self.evaluate(data, task)}
        self.network.eval()
        start, width = self.context.class_offsets[task], self.context.head_sizes[task]
        return aware_and_agnostic(data, lambda inputs: self.predict_classes(inputs, n_candidates), start, width,
                                  self.training_protocol.eval_batch_size, self.device, self.autocast)

    def test_loss(self, batch: Batch, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed cross-entropy, number correct) of task `task`'s head on a test batch."""
        return losses.head_cross_entropy(self.predict(batch.inputs, task), batch.targets, "sum")

    def sum_over_batches(self, data: LabelledData, measure: Measure) -> Evaluation:
        """Mean loss and accuracy of `measure` over `data` in large batches (eval mode, inference mode)."""
        self.network.eval()
        return mean_over_batches(data, measure, self.training_protocol.eval_batch_size, self.device, self.autocast)

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, torch.Tensor]:
        """A copy of the network's weights."""
        return {key: value.detach().clone() for key, value in self.network.state_dict().items()}

    def restore(self, snapshot: dict[str, torch.Tensor]) -> None:
        self.network.load_state_dict(snapshot)

    def state(self) -> dict[str, Any]:
        """Everything a checkpoint needs to continue or evaluate: network (batch norm's running statistics
        included), approach state, batch RNG, and the augmentation RNG when `data.augment` is on."""
        state = {"network": self.snapshot(), "extra": self.extra_state(),
                 "batch_generator": self.batch_generator.get_state()}
        if self.augment_generator is not None:
            state["augment_generator"] = self.augment_generator.get_state()
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        self.network.load_state_dict(state["network"])
        self.load_extra_state(state.get("extra", {}))
        if "batch_generator" in state:
            self.batch_generator.set_state(state["batch_generator"])
        if self.augment_generator is not None and "augment_generator" in state:
            self.augment_generator.set_state(state["augment_generator"])
