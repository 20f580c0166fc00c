"""The public API for writing an approach outside clbench: `import clbench.api` is the one import a plugin needs.

A plugin is a subclass of `Approach` with a unique class attribute `name` (its method name and results folder),
a one-line `summary`, and optionally a frozen dataclass of hyper-parameters (a subclass of `Hyperparameters`,
each field declared with `field(default, doc=..., minimum=...)`, its domain: `minimum`, `maximum`, `above`,
`below`, `choices`, `min_items`, `special`) set as `hyperparameters_class`. Its values come from the spec
(`approaches.<name>.<key>`) or `--set <name>.<key>=...` and are validated against it; what a field cannot say alone
(against another field or the benchmark's `BenchmarkFacts`: classes per task, input size, training images) goes in
the classmethod `hyperparameter_problem(hyperparameters, facts) -> DomainProblem | None`, checked before any work.

The base class owns the loop (epochs, lr schedule, early stopping, best-weights restore, evaluation);
override only the hooks you need, all optional:

- `build_network() -> nn.Module`: the network (default: the spec's body, `self.context.network`, with one
  head per task; a `MultiHeadNet` with `features(x)`, `heads` and `body_parameters()`).
- `begin_task(stage, tasks)`: before training task `stage` (0-based).
- `training_data(stage, tasks) -> (train, valid)`: the `LabelledData` of a stage (default: the task's own).
- `trainable_parameters(stage)`: what the optimiser updates (default: everything that requires a gradient).
- `training_step(batch: Batch, step: StepInfo, optimizer: StepOptimizer) -> Tensor`: one optimiser step on a
  training batch, returning its loss detached. Default: `loss` (under `self.autocast()`), then
  `backward_and_step(loss, step, optimizer)` (zero the gradients, backward, `before_step`, clipping to
  `clip_grad_norm`, the optimiser step), then `after_step`. Override it whole when the step is more than a loss
  (draw from a memory, step, store the batch: `examples/my_replay.py`; a gradient projection; a second network);
  override its pieces when only they change:
- `loss(batch: Batch, step: StepInfo) -> Tensor`: the mean training loss (default: the scenario's
  cross-entropy, `scenario_cross_entropy`, plus `penalty(step.stage)`).
- `penalty(stage) -> Tensor | float`: a regulariser added to the training and validation loss (default 0).
- `before_step(step)`: after backward, before clipping and the optimiser step (gradient conditioning).
- `after_step(step)`: after the optimiser step (e.g. clamping).
- `end_task(stage, tasks)`: after task `stage` is trained and its best weights restored.
- `predict(inputs, task) -> logits`: task-aware evaluation (the network is in eval mode).
- `predict_classes(inputs, n_tasks) -> logits`: task-agnostic evaluation, over the classes of tasks
  0..n_tasks-1 side by side (task t's at `context.class_offsets[t]`; default: the heads on `features`,
  concatenated). An approach that overrides `predict` must override this too, or its runs store task-aware
  rows only; set the class attribute `needs_task_id = True` when the prediction needs the task id (masks,
  paths): then the class scenario trains it on its task's head too, and `report` shows "needs the task id".
- `monitoring(stage, tasks) -> MonitoringTables`: named tables (lists of row dicts) stored as
  `<table>.parquet` in the run folder, with the run's identity columns and `stage` (1-based) added.
- Checkpoints: `extra_state() -> dict` returns what the approach keeps besides the network (tensors, numbers,
  lists; anchors, Fisher, masks, random generators' states) and `load_extra_state(state)` restores it (move
  tensors with `tensors_to(state[...], self.device)`). A run is resumed from these after every task, so
  anything `end_task` computes must be in `extra_state`.

Scenarios: `self.class_scenario` is True under `data.scenario: class` (no task id at test time),
`self.domain_scenario` under `data.scenario: domain` (no task id; the default `build_network` ties the heads, so
`heads[t]` is one head shared by every task; `seen_logits` is that head's outputs; the target is the class within
the task; a network without tied heads, an approach with `needs_task_id` and one whose `refuses_domain` says why
are refused there). `self.scenario_cross_entropy(features, batch, stage, reduction)` is the loss of a batch in the
run's scenario, also of a batch that mixes tasks (`batch.task_ids`, e.g. replayed samples with the current ones):
each sample on its own head (task scenario), over every class of tasks 0..stage (class scenario, targets from
`class_targets(batch)`), or on the shared head (domain scenario). A replay method builds such a batch with
`LabelledData(images, labels, task_ids, transform, -1).batch(...)`, the transform being the tasks' own
(`tasks[t].train.transform`).

Replay: `ReplayBuffer(capacity, device)` keeps uint8 images, labels, task ids (and logits) on the device:
`add_reservoir(images, labels, task_ids, generator, logits=None, inputs=None)` (reservoir sampling, one vectorised
step per batch; `inputs`, the batch's normalised inputs, are written beside the images into the input cache that
`use_input_cache(cache, transform)` hands it, the task sequence's `tasks[t].train.cache`, so that `sample`'s
`Memory.inputs` need no normalisation; without one, `Memory.inputs` is None),
`sample(n, generator)` and `contents()` (a `Memory`), `set_contents(...)` (a class-balanced memory),
`state_dict()` / `load_state_dict()` for checkpoints, `nbytes`. A training `Batch` carries its uint8 `images`;
`joined(batch, other)` is two batches as one batch of mixed tasks. `ReplayApproach` (what the built-in er, agem,
derpp and icarl derive from) owns a buffer of `buffer_size`, its generator, checkpointing and `memory_usage`;
`examples/my_replay.py` is experience replay written against this module alone. Override `memory_usage() ->
(samples, bytes)` when the approach keeps samples: every result row records it.

Useful attributes: `self.network`, `self.hparams` (your dataclass), `self.context` (`ApproachContext`: network
and training specs, input shape, head sizes, device, seed; `self.context.generator(purpose)` is a seeded CPU
generator), `self.device`, `self.multihead` (the network as a `MultiHeadNet`).

Reporting monitoring tables: set the class attribute `monitoring_reporter = "package.module:ClassName"` to a
subclass of `MonitoringReporter` (override `tables(results) -> list[Table]`, optionally `csv`, `plots`, and
`table_notes` for warnings under the main table) in a module that does not import torch; `clbench report
--monitoring` prints its tables for your runs (run.json records the string, so `report` never imports your
approach). This module imports torch, so the reporter module imports the reporter names from the torch-free
`clbench.report` (the same objects as here: `MonitoringReporter`, `LayerShareReporter` (a table of per-layer,
per-task shares, as PackNet's and SupSup's), `Results` (here `ReportResults`), `Table`, `plain`, `format_seeds`,
`read_parquet_files`, `run_values`). HAT (`clbench.approaches.hat.report`), PackNet
(`clbench.approaches.packnet.report`), SI and MAS (`clbench.approaches.importance.report`) are reported this way
and use only these names.

Registration: a class named on the command line (`--method path/to/file.py:Class` or
`--method package.module:Class`) or by an entry point in the group `clbench.approaches` is registered by
clbench; `register` is only needed for a class imported some other way. Names must be unique.

Example (a file `my_method.py`, run with `clbench train mnist2 -m my_method.py:MyMethod`)::

    from dataclasses import dataclass
    import clbench.api as cl

    @dataclass(frozen=True)
    class MyHyperparameters(cl.Hyperparameters):
        lamb: float = cl.field(0.01, doc="penalty strength", minimum=0.0)

    class MyMethod(cl.Approach):
        name = "my-method"
        summary = "fine-tuning with a small L2 penalty on the weights"
        hyperparameters_class = MyHyperparameters

        def penalty(self, stage):
            return self.hparams.lamb * sum((p ** 2).sum() for p in self.multihead.body_parameters())
"""

from __future__ import annotations

from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, EpochLog, Evaluation, Hyperparameters, StepInfo, TaskLog
from clbench.approaches.domains import BenchmarkFacts, DomainProblem, memory_problem
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.parameters import ParameterDict, detached_parameters, named_body_parameters, tensors_to
from clbench.approaches.plugins import ENTRY_POINT_GROUP
from clbench.approaches.registry import REGISTRY, register  # noqa: F401  (built-ins registered before any plugin)
from clbench.approaches.replay.approach import ReplayApproach, ReplayHyperparameters, joined
from clbench.approaches.replay.buffer import Memory, ReplayBuffer
from clbench.data.batches import Batch, LabelledData, Task, TaskSequence
from clbench.data.transform import InputTransform
from clbench.errors import ClbenchError, SpecError
from clbench.nets import MultiHeadNet
from clbench.spec import NetworkSpec, TrainingSpec
from clbench.spec.fields import field

__all__ = [
    "ENTRY_POINT_GROUP",
    "Approach",
    "ApproachContext",
    "Batch",
    "BenchmarkFacts",
    "ClbenchError",
    "DomainProblem",
    "EpochLog",
    "Evaluation",
    "Hyperparameters",
    "LabelledData",
    "MonitoringTables",
    "MultiHeadNet",
    "NetworkSpec",
    "ParameterDict",
    "SpecError",
    "StepInfo",
    "StepOptimizer",
    "Task",
    "TaskLog",
    "TaskSequence",
    "TrainingSpec",
    "detached_parameters",
    "field",
    "memory_problem",
    "named_body_parameters",
    "register",
    "tensors_to",
    # replay (see "Replay" in the module docstring)
    "Memory",
    "ReplayApproach",
    "ReplayBuffer",
    "ReplayHyperparameters",
    "joined",
    "toy_context",
    "toy_tasks",
    # monitoring reporter hook (see "Reporting monitoring tables" in the module docstring)
    "LayerShareReporter",
    "MonitoringReporter",
    "ReportResults",
    "Table",
    "format_seeds",
    "plain",
    "read_parquet_files",
    "run_values",
]

MonitoringTables = dict[str, list[dict[str, Any]]]
"""What `Approach.monitoring` returns: table name -> rows (each a dict of column -> plain value)."""

def toy_tasks(n_tasks: int = 2, n_classes: int = 2, n_samples: int = 64, side: int = 4,
              seed: int = 0) -> TaskSequence:
    """A tiny learnable task sequence for a plugin's own tests: (1, side, side) uint8 images, flattened.

    Class c of task t brightens pixel (t * n_classes + c) mod side^2; each split has `n_samples` samples.
    """
    generator = torch.Generator().manual_seed(seed)
    transform = InputTransform(torch.full((n_tasks, 1), 0.2), torch.full((n_tasks, 1), 0.3), None, True)

    def split(task: int) -> LabelledData:
        labels = torch.randint(0, n_classes, (n_samples,), generator=generator)  # (N,)
        images = torch.randint(0, 60, (n_samples, side * side), generator=generator)  # (N, D)
        images[torch.arange(n_samples), (task * n_classes + labels) % (side * side)] += 180
        images = images.to(torch.uint8).reshape(n_samples, 1, side, side)  # (N, 1, H, W)
        return LabelledData(images, labels, torch.full((n_samples,), task), transform, task)

    tasks = tuple(Task(t, f"toy-{t + 1}", n_classes, split(t), split(t), split(t)) for t in range(n_tasks))
    return TaskSequence(tasks, (side * side,))


def toy_context(tasks: TaskSequence, *, hidden: tuple[int, ...] = (16,), max_epochs: int = 3,
                seed: int = 0) -> ApproachContext:
    """An `ApproachContext` for `toy_tasks`: a small MLP on the CPU, the paper's protocol with few epochs."""
    return ApproachContext(NetworkSpec(kind="mlp", hidden=hidden),
                           TrainingSpec(max_epochs=max_epochs, batch_size=16, patience=2),
                           tasks.input_shape, tasks.head_sizes, torch.device("cpu"), seed)


# -- monitoring reporter hook: an approach's `monitoring_reporter = "package.module:Class"` names a subclass of
#    `MonitoringReporter` that `clbench report --monitoring` imports without torch; it reads `ReportResults` (the
#    loaded results of one benchmark: `info`, `files`, `folder(run_id)`) and returns `Table`s.
from clbench.report import (  # noqa: E402  (torch-free)
    LayerShareReporter,
    MonitoringReporter,
    Table,
    format_seeds,
    plain,
    read_parquet_files,
    run_values,
)
from clbench.report import Results as ReportResults  # noqa: E402
