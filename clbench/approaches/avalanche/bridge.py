"""What touches Avalanche: the networks it trains, the experiences made from clbench's tasks, the plugin that runs
clbench's protocol inside its loop, and the strategy's state for checkpoints. Imported only when an `av-*` method is
built (`adapter.AvalancheApproach.build_network`): the registry and `clbench list` never import Avalanche.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import random
import types
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dill
import numpy as np
import torch
from avalanche.benchmarks.scenarios.dataset_scenario import DatasetExperience, benchmark_from_datasets
from avalanche.benchmarks.scenarios.supervised import with_classes_timeline
from avalanche.benchmarks.scenarios.task_aware import with_task_labels
from avalanche.benchmarks.utils.classification_dataset import _make_taskaware_tensor_classification_dataset
from avalanche.core import SupervisedPlugin
from avalanche.models import MultiTaskModule
from avalanche.models.base_model import BaseModel
from avalanche.training.plugins import EvaluationPlugin
from torch import nn

from clbench.approaches.datatypes import EpochLog, ProgressCallback, StepHook, StepInfo
from clbench.approaches.flops import FlopLedger
from clbench.approaches.optim import clip_grad_norm
from clbench.approaches.schedule import TaskSchedule
from clbench.data.batches import TaskSequence
from clbench.nets import MultiHeadNet
from clbench.seeding import derive_seed

# ---------------------------------------------------------------------------------------------- networks


class TaskHeads(MultiTaskModule):
    """The task scenario: clbench's network as Avalanche's multi-head module (`forward_single_task`: the task's
    head); a batch of mixed tasks goes through each task's head, padded with zeros to the widest (Avalanche's
    `MultiTaskModule.forward`)."""

    def __init__(self, network: MultiHeadNet) -> None:
        super().__init__()
        self.network = network
        self.max_class_label = max(head.out_features for head in network.heads)

    def forward_single_task(self, x: torch.Tensor, task_label: int) -> torch.Tensor:
        return self.network(x, int(task_label))  # (B, classes of the task)


class EveryClass(nn.Module):
    """The class scenario (every head, concatenated: one output per class, as Avalanche's single-head models) and
    the domain scenario (the one shared head)."""

    def __init__(self, network: MultiHeadNet, domain: bool) -> None:
        super().__init__()
        self.network = network
        self.domain = domain

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.network.features(x)  # (B, F)
        return self.network.heads[0](features) if self.domain else self.network.all_heads(features)


class SharedHeadWithFeatures(EveryClass, BaseModel):
    """The domain scenario's network (the one shared head) as Avalanche's `BaseModel`, whose `get_features` is the
    body's output: what LFL reads (`training/plugins/lfl.py`: `get_features`, and `get_last_fc_layer`, the last
    `nn.Linear` of `named_modules`: the shared head, registered after the body)."""

    def __init__(self, network: MultiHeadNet) -> None:
        super().__init__(network, domain=True)

    def get_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.network.features(x)  # (B, F)


class Features(nn.Module):
    """The body alone (a strategy that takes a feature extractor: iCaRL, ER-AML)."""

    def __init__(self, network: MultiHeadNet) -> None:
        super().__init__()
        self.network = network

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network.features(x)  # (B, F)


class AllHeads(nn.Module):
    """Every head on the body's features, concatenated (a strategy that takes a classifier: iCaRL)."""

    def __init__(self, network: MultiHeadNet) -> None:
        super().__init__()
        self.heads = network.heads

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(features) for head in self.heads], dim=1)  # (B, every class)


def avalanche_model(network: MultiHeadNet, scenario: str) -> nn.Module:
    """The network as the strategy trains it in `scenario`."""
    return TaskHeads(network) if scenario == "task" else EveryClass(network, scenario == "domain")


def quiet_evaluator() -> EvaluationPlugin:
    """Avalanche's evaluator without metrics or loggers: clbench evaluates (no progress bars, nothing printed)."""
    return EvaluationPlugin(loggers=[])


# ---------------------------------------------------------------------------------------------- data


def experiences(tasks: TaskSequence, scenario: str, class_offsets: tuple[int, ...],
                head_sizes: tuple[int, ...]) -> tuple[list[Any], list[torch.Tensor]]:
    """One Avalanche training experience per task, from the task's training split as clbench normalised it (on the
    CPU: Avalanche's loader moves each batch to the device). Targets: the global class in the class scenario, the
    class within the task otherwise; task labels: the task's index in the task scenario, 0 otherwise (Avalanche's
    class- and domain-incremental benchmarks). Each experience's `benchmark` says the classes per task in their order
(what iCaRL reads of Avalanche's class-incremental benchmarks). Returns the experiences and each one's inputs."""
    datasets, tensors = [], []
    for index in range(len(tasks)):
        train = tasks[index].train
        inputs = train.batch(slice(None)).inputs.detach().cpu()  # (N, C, H, W) normalised
        targets = train.labels.detach().cpu().long() + (class_offsets[index] if scenario == "class" else 0)
        label = index if scenario == "task" else 0
        tensors.append(inputs)
        datasets.append(_make_taskaware_tensor_classification_dataset(
            inputs, targets, targets=targets.tolist(), task_labels=label))
    stream = list(with_task_labels(with_classes_timeline(benchmark_from_datasets(train=datasets))).train_stream)
    order = ClassOrder(list(head_sizes), list(range(sum(head_sizes))))
    for experience in stream:
        experience.benchmark = order
    return stream, tensors


class ReassignableExperience(DatasetExperience):
    """An experience whose `dataset` a plugin may reassign, as the experiences of Avalanche's own generators allow
    (benchmarks/scenarios/deprecated/__init__.py:53-55); `benchmark_from_datasets`'s are read-only
    (dataset_scenario.py:78-83)."""

    @property
    def dataset(self) -> Any:
        return self._dataset

    @dataset.setter
    def dataset(self, data: Any) -> None:
        self._dataset = data


def reassignable(experience: Any) -> ReassignableExperience:
    """A copy of `experience` for one `train` call whose `dataset` BiC may replace by its training share
    (plugins/bic.py:173, before_train_dataset_adaptation); the stream's experience keeps the task's whole training
    set, which the next tasks and the checkpoint's shared objects refer to."""
    copied = ReassignableExperience.__new__(ReassignableExperience)
    copied.__dict__.update(experience.__dict__)
    return copied


@dataclass(frozen=True)
class ClassOrder:
    """What an experience's `benchmark` tells a strategy: the classes of each task, in order."""

    n_classes_per_exp: list[int]
    classes_order: list[int]


def seed_global_generators(seed: int, stage: int) -> None:
    """Seed the generators Avalanche draws from (its loader's shuffle, its buffers' samples: torch's, numpy's and
    Python's global ones) from the run seed and the task, so that a run resumed after a task draws what an
    uninterrupted one does."""
    value = derive_seed(seed, f"avalanche-{stage}")
    torch.manual_seed(value)
    np.random.seed(value % 2**32)
    random.seed(value)


# ---------------------------------------------------------------------------------------------- the protocol


AVALANCHE_STEP = "avalanche-step"  # an iteration of Avalanche's training loop (its FLOPs sampled)


@dataclass
class TaskProtocol:
    """clbench's protocol for one task, run by `ClbenchProtocol` inside Avalanche's loop."""

    stage: int
    schedule: TaskSchedule
    max_epochs: int
    validate: Callable[[], tuple[float, float]]  # (validation loss, accuracy); NaN without a validation split
    snapshot: Callable[[], Any]
    restore: Callable[[Any], None]
    progress: ProgressCallback | None = None
    step_hook: StepHook | None = None
    flops: FlopLedger | None = None  # the approach's: each iteration of Avalanche's loop a sampled step
    epoch: int = 0
    iteration: int = 0
    batches: int = 0
    best_epoch: int = 0
    best: Any = None
    losses: list[float] = field(default_factory=list)


class ClbenchProtocol(SupervisedPlugin):
    """clbench's loop around the strategy's epochs: the lr at each task's start, gradient clipping, the step hook
    (`training.eval_every`), and after each epoch the validation loss that steps the lr schedule and early stopping;
    the best weights are restored at the end of the last epoch, before the strategy's end-of-experience work (a
    Fisher, a buffer's logits, an old model are taken from them), and early stopping ends the loop through
    Avalanche's own `stop_training` (as its `EarlyStoppingPlugin` does)."""

    def __init__(self, clip: float) -> None:
        super().__init__()
        self.clip = clip
        self.task: TaskProtocol | None = None
        self.step = contextlib.ExitStack()  # the iteration's sampled FLOPs, open between the iteration hooks

    def before_training_exp(self, strategy: Any, **kwargs: Any) -> None:
        assert self.task is not None
        self.set_lr(strategy, self.task.schedule.lr)
        if self.task.schedule.restores_best:
            self.task.best = self.task.snapshot()

    def before_training_epoch(self, strategy: Any, **kwargs: Any) -> None:
        assert self.task is not None
        self.task.iteration, self.task.losses = 0, []

    def before_training_iteration(self, strategy: Any, **kwargs: Any) -> None:
        """The iteration's FLOPs sampled as clbench's own steps are (`FlopLedger.sampled`, left in
        `after_training_iteration`): counting all of Avalanche's loop took 2.3 times as long."""
        task = self.task
        assert task is not None
        if task.flops is not None:
            self.step = contextlib.ExitStack()
            self.step.enter_context(task.flops.sampled(AVALANCHE_STEP, len(strategy.mb_y)))

    def before_update(self, strategy: Any, **kwargs: Any) -> None:
        if self.clip > 0:
            clip_grad_norm([p for group in strategy.optimizer.param_groups for p in group["params"]], self.clip)

    def after_training_iteration(self, strategy: Any, **kwargs: Any) -> None:
        task = self.task
        assert task is not None
        task.losses.append(float(strategy.loss.detach()))
        self.step.close()
        n_batches = len(strategy.dataloader) if hasattr(strategy.dataloader, "__len__") else 0
        if task.step_hook is not None:
            with task.flops.uncounted() if task.flops is not None else contextlib.nullcontext():
                task.step_hook(StepInfo(task.stage, task.epoch, task.iteration, n_batches))
        task.iteration += 1

    def after_training_epoch(self, strategy: Any, **kwargs: Any) -> None:
        task = self.task
        assert task is not None
        lr = task.schedule.lr
        valid_loss, valid_accuracy = task.validate()
        improved, lr_changed = task.schedule.step(valid_loss)
        task.epoch += 1
        task.batches += task.iteration
        if improved:
            task.best, task.best_epoch = task.snapshot(), task.epoch
        if task.progress is not None:
            train_loss = float(np.mean(task.losses)) if task.losses else float("nan")
            task.progress(EpochLog(task.stage, task.epoch, lr, train_loss, valid_loss, valid_accuracy, improved))
        last = task.schedule.stopped or task.epoch >= task.max_epochs
        if last and task.best is not None:
            task.restore(task.best)
        if task.schedule.stopped:
            strategy.stop_training()
        elif lr_changed:
            self.set_lr(strategy, task.schedule.lr)
            strategy.optimizer.state = defaultdict(dict)  # clbench rebuilds its optimiser when the lr changes

    @staticmethod
    def set_lr(strategy: Any, lr: float) -> None:
        for group in strategy.optimizer.param_groups:
            group["lr"] = lr


# ---------------------------------------------------------------------------------------------- state


class _Pickler(dill.Pickler):
    """Pickles a strategy with the live objects (network, optimiser, plugin, the tasks' tensors) as references."""

    def __init__(self, file: io.BytesIO, shared: dict[int, str]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_id(self, obj: Any) -> str | None:
        return self.shared.get(id(obj))

    def reducer_override(self, obj: Any) -> Any:
        """A tensor that views part of a larger storage, pickled as a copy of what it views (`_compact`); a
        generator a plugin keeps for the next experience (A-GEM's and MIR's memory loaders), pickled as the call
        that made it: it has not started (each is made at the end of an experience and first drawn from in the
        next), so the call made again after a resume yields what the kept one would have."""
        if isinstance(obj, torch.Tensor):
            return (_same, (_compact(obj),)) if _views_more(obj) else NotImplemented
        if not isinstance(obj, types.GeneratorType):
            return NotImplemented
        if inspect.getgeneratorstate(obj) != inspect.GEN_CREATED:
            raise TypeError(f"a started generator ({obj.gi_code.co_qualname}) cannot be checkpointed")
        code = obj.gi_code
        arguments = [obj.gi_frame.f_locals[name] for name in code.co_varnames[:code.co_argcount]]
        return _generator_again, (obj.gi_frame.f_globals["__name__"], code.co_qualname, arguments)


def _views_more(tensor: torch.Tensor) -> bool:
    """Whether the tensor's storage holds more than the tensor (a sample indexed out of a task's labels, say).

    torch pickles a tensor with its whole storage, once per tensor: a replay buffer of 500 single-label views of a
    task's 12,000 labels was 100 MB of checkpoint per task (issue 59). Unpickled, such views never shared their
    storage with each other or with the live tensors anyway (each came back with its own copy), so a compact copy
    changes nothing but the size."""
    if type(tensor) is not torch.Tensor or tensor.is_sparse or tensor.device.type == "meta":
        return False
    return tensor.untyped_storage().nbytes() > tensor.numel() * tensor.element_size()


def _compact(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)


def _same(value: Any) -> Any:
    return value


def _generator_again(module: str, qualname: str, arguments: list[Any]) -> Any:
    """The generator `module.qualname(*arguments)` makes (see `_Pickler.reducer_override`)."""
    function: Any = importlib.import_module(module)
    for part in qualname.split("."):
        function = getattr(function, part)
    return function(*arguments)


class _Unpickler(dill.Unpickler):
    def __init__(self, file: io.BytesIO, shared: dict[str, Any]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: str) -> Any:
        return self.shared[pid]


def shared_objects(strategy: Any, plugin: ClbenchProtocol, experience_list: list[Any],
                   tensors: list[torch.Tensor]) -> dict[str, Any]:
    """The objects a checkpoint refers to rather than copies, by name: they are rebuilt, as they were, from the
    spec, the seed and the network's own checkpointed weights."""
    shared: dict[str, Any] = {"strategy": strategy, "model": strategy.model, "optimizer": strategy.optimizer,
                              "plugin": plugin, "evaluator": strategy.evaluator}
    for name, tensor in [*strategy.model.named_parameters(), *strategy.model.named_buffers()]:
        shared[f"model.{name}"] = tensor  # e.g. the template's `optimized_param_id`: the live parameters
    for name, module in strategy.model.named_modules():
        shared[f"module.{name}"] = module  # a plugin's reference to a part of the network (iCaRL's classifier)
    for index, experience in enumerate(experience_list):
        shared[f"experience-{index}"] = experience
        shared[f"dataset-{index}"] = experience.dataset
        shared[f"inputs-{index}"] = tensors[index]
        for part, inner in enumerate(dataset_parts(experience.dataset)):  # what a buffer's subsets refer to
            shared[f"part-{index}-{part}"] = inner
    return shared


def dataset_parts(dataset: Any) -> list[Any]:
    """The datasets inside an Avalanche dataset, down to the one that holds the task's tensors, and those tensors."""
    parts: list[Any] = []
    stack = [dataset]
    while stack:
        current = stack.pop()
        parts.append(current)
        stack.extend(getattr(current, "_datasets", None) or [])
        parts.extend(getattr(current, "tensors", None) or [])
    return parts


def dump_strategy(strategy: Any, shared: dict[str, Any]) -> bytes:
    """The strategy's state (buffers, importances, old models...) as bytes, the shared objects by reference."""
    buffer = io.BytesIO()
    _Pickler(buffer, {id(obj): name for name, obj in shared.items()}).dump(strategy.__dict__)
    return buffer.getvalue()


def dump_model(model: nn.Module) -> bytes:
    """The network the strategy trains, by value: a strategy may change its structure (CoPE's normalised head, BiC's
    bias layers), which a network rebuilt from the spec would not have."""
    return dill.dumps(model)


def load_model(data: bytes) -> nn.Module:
    return dill.loads(data)


def load_strategy(strategy: Any, data: bytes, shared: dict[str, Any]) -> None:
    """Restore what `dump_strategy` wrote into `strategy`, the shared objects being the live ones."""
    strategy.__dict__.update(_Unpickler(io.BytesIO(data), shared).load())


def replay_samples(strategy: Any) -> int:
    """Samples the strategy keeps from earlier tasks: its storage policy's buffer (Replay, GDumb, DER, ER-ACE...),
    else 0."""
    for owner in (strategy, *strategy.plugins):
        policy = getattr(owner, "storage_policy", None)
        buffer = getattr(policy, "buffer", None)
        if buffer is not None:
            return len(buffer)
    return 0
