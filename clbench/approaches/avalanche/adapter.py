"""`AvalancheApproach`: an Avalanche strategy as a clbench approach, on clbench's protocol.

The design, and why. An Avalanche strategy is its own loop (`train(experience)`: dataset adaptation, the loader, model
adaptation, the optimiser's reset, epochs of iterations, and the plugins' hooks at every point of them), and most of
its methods live in those hooks (Replay swaps the loader, EWC adds to the loss before backward, DER and ER-ACE
override the iteration). Re-implementing that loop inside clbench's `Approach.learn_task`, hook by hook, would be a
second Avalanche that drifts from the first. So each task runs the strategy's own `train` on an experience made from
clbench's task tensors (the same data, normalisation, task order and split as every clbench method), and clbench's
protocol enters Avalanche's loop as a plugin (`bridge.ClbenchProtocol`): the task's lr, gradient clipping, the step
hook of the continual evaluation, and after each epoch clbench's validation loss stepping the lr plateaus and early
stopping, with the best weights restored at the end of the last epoch, before the strategy's end-of-experience work.
The network is the spec's body and heads (`avalanche_model`: Avalanche's multi-head module in the task scenario, one
output per class in the class scenario); the optimiser is the spec's (`training.optimizer`, `lr`, `momentum`,
`weight_decay`), the batch size and epochs are the spec's; clbench evaluates the trained network, so every row,
report and comparison is clbench's.

Where it departs from Avalanche's own runs: the validation loss is the plain cross-entropy (a strategy's penalty
lives inside its hooks; clbench's own methods add theirs); the class scenario trains over every class
(`training.class_loss: all`, Avalanche's single head of `num_classes` units); clbench's `data.augment` is refused
(Avalanche's loader does not draw clbench's per-image crops).
"""

from __future__ import annotations

import importlib.util
import inspect
import time
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches import avalanche as avalanche_table
from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, ProgressCallback, TaskLog
from clbench.approaches.losses import head_cross_entropy
from clbench.approaches.parameters import tensor_bytes
from clbench.approaches.refusals import early_stopping_problem
from clbench.data.batches import Batch, TaskSequence
from clbench.errors import SpecError
from clbench.nets import MultiHeadNet
from clbench.spec import DataSpec, TrainingSpec
from clbench.spec.fields import to_dict


class AvalancheApproach(Approach):
    """Runs `strategy_class` of `avalanche.training`, one `train(experience)` per task, on clbench's protocol."""

    strategy_class: ClassVar[str] = ""  # its name in `avalanche.training`, e.g. "Naive"
    signature: ClassVar[str] = ""  # where its constructor is, in avalanche-lib 0.6.0: "file.py:line"
    refusal: ClassVar[str] = ""  # why it cannot run under clbench at all (pre-trained weights, a generator...)
    task_scenario_refusal: ClassVar[str] = ""  # why it cannot run in the task scenario, "" if it can
    class_scenario_refusal: ClassVar[str] = ""  # why it cannot run in the class scenario, "" if it can
    not_resumable: ClassVar[str] = ""  # why a stopped run cannot resume from its checkpoint, "" if it can

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self._experiences: tuple[int, list[Any], list[torch.Tensor]] | None = None
        self._pending_state: bytes | None = None

    # ------------------------------------------------------------------ refusals
    @classmethod
    def library_origin(cls) -> dict[str, Any]:
        """What the rows' `approach_origin` adds for these methods: the Avalanche class and version that ran."""
        return {"library": "avalanche-lib", "library_version": avalanche_table.avalanche_version(),
                "strategy": f"avalanche.training.{cls.strategy_class}"}

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        if cls.refusal:
            return f"{cls.strategy_class} cannot run here: {cls.refusal}"
        problem = avalanche_table.avalanche_problem()
        if problem is not None:
            return problem
        if cls.strategy_class == "GEM" and importlib.util.find_spec("quadprog") is None:
            return ("GEM solves a quadratic programme with quadprog (through qpsolvers), which is not installed: "
                    "pip install quadprog")
        if data.scenario == "task" and cls.task_scenario_refusal:
            return f"{cls.strategy_class} does not run with data.scenario=task: {cls.task_scenario_refusal}"
        if data.scenario == "class" and cls.class_scenario_refusal:
            return f"{cls.strategy_class} does not run with data.scenario=class: {cls.class_scenario_refusal}"
        if data.scenario == "class" and training.class_loss != "all":
            return ("Avalanche's strategies train a single head over every class: set training.class_loss=all "
                    f"(here {training.class_loss})")
        if data.augment:
            return "Avalanche's loader does not apply clbench's per-image augmentation: set data.augment=false"
        if training.realtime:
            return "Avalanche's training loop has no real-time stream (clbench's loop has): set training.realtime=false"
        return early_stopping_problem(training, data)

    # ------------------------------------------------------------------ the strategy
    def build_network(self) -> nn.Module:
        """The spec's network, wrapped as the strategy trains it; the strategy is built here, around it."""
        from clbench.approaches.avalanche import bridge

        body = super().build_network()
        assert isinstance(body, MultiHeadNet)
        self.body = body
        self.protocol = bridge.ClbenchProtocol(self.hparams.clip_grad_norm)
        self.strategy = self.make_strategy(self.strategy_arguments(body))
        return self.strategy.model

    def strategy_arguments(self, body: MultiHeadNet) -> dict[str, Any]:
        """The network arguments of the strategy's constructor (default: `model`, the body as it trains it)."""
        from clbench.approaches.avalanche import bridge

        return {"model": bridge.avalanche_model(body, self.context.scenario)}

    def strategy_hyperparameters(self) -> dict[str, Any]:
        """The strategy's own keyword arguments: every hyper-parameter but clbench's `clip_grad_norm`."""
        values = to_dict(self.hparams)
        values.pop("clip_grad_norm")
        return values

    def make_strategy(self, network: dict[str, Any]) -> Any:
        import avalanche.training

        from clbench.approaches.avalanche import bridge

        training = self.context.training
        modules = nn.ModuleList(module for module in network.values() if isinstance(module, nn.Module))
        optimizer = torch_optimizer(modules.parameters(), training)
        strategy_class = getattr(avalanche.training, self.strategy_class)
        common = {"optimizer": optimizer, "criterion": nn.CrossEntropyLoss(), "train_mb_size": training.batch_size,
                  "train_epochs": training.max_epochs, "eval_mb_size": training.eval_batch_size,
                  "device": self.device, "plugins": [self.protocol], "evaluator": bridge.quiet_evaluator()}
        parameters = inspect.signature(strategy_class.__init__).parameters
        if not any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
            common = {key: value for key, value in common.items() if key in parameters}  # ICaRL: its own loss
        return strategy_class(**network, **common, **self.strategy_hyperparameters())

    def experiences(self, tasks: TaskSequence) -> tuple[list[Any], list[torch.Tensor]]:
        """The tasks as Avalanche experiences (made once per task sequence)."""
        from clbench.approaches.avalanche import bridge

        if self._experiences is None or self._experiences[0] != id(tasks):
            made, tensors = bridge.experiences(tasks, self.context.scenario, self.context.class_offsets,
                                               self.context.head_sizes)
            self._experiences = (id(tasks), made, tensors)
        return self._experiences[1], self._experiences[2]

    # ------------------------------------------------------------------ the loop
    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        """Task `stage`: the strategy's `train` on its experience, clbench's protocol inside (`ClbenchProtocol`)."""
        from clbench.approaches.avalanche import bridge

        start = time.perf_counter()
        made, _ = self.experiences(tasks)
        if self._pending_state is not None:  # resumed from a checkpoint: the strategy's state, with the tasks'
            bridge.load_strategy(self.strategy, self._pending_state, self.shared(tasks))
            self._pending_state = None
        bridge.seed_global_generators(self.context.seed, stage)
        schedule = self.task_schedule()
        valid = tasks[stage].valid

        def validate() -> tuple[float, float]:
            self.network = self.strategy.model  # GDumb and FromScratchTraining train a fresh copy each task
            if len(valid) == 0 and not schedule.restores_best:
                return float("nan"), float("nan")
            evaluation = self.evaluate_validation(valid, stage)
            self.network.train()
            return evaluation.loss, evaluation.accuracy

        task = bridge.TaskProtocol(stage, schedule, self.context.training.max_epochs, validate, self.snapshot,
                                   self.restore, progress, self.step_hook, self.flops)
        self.protocol.task = task
        try:
            self.strategy.train(self.training_experience(made[stage]), eval_streams=[])
        finally:
            self.protocol.task = None
            self.network = self.strategy.model
        return TaskLog(stage, task.epoch, task.best_epoch if schedule.restores_best else task.epoch,
                       schedule.best_loss, schedule.lr, time.perf_counter() - start, task.batches)

    def training_experience(self, experience: Any) -> Any:
        """The experience the strategy's `train` gets for a task (default: the stream's own)."""
        return experience

    def shared(self, tasks: TaskSequence) -> dict[str, Any]:
        from clbench.approaches.avalanche import bridge

        made, tensors = self.experiences(tasks)
        return bridge.shared_objects(self.strategy, self.protocol, made, tensors)

    # ------------------------------------------------------------------ evaluation
    def outputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """The strategy's network on `inputs` without a task id: (B, every class) in the class scenario (a strategy's
        narrower output, e.g. iCaRL's nearest-mean scores over the classes seen, padded below its minimum), (B, the
        shared head) in the domain scenario."""
        out = self.strategy_outputs(inputs)
        total = sum(self.context.head_sizes) if self.context.scenario == "class" else self.context.head_sizes[0]
        if out.shape[1] < total:
            low = out.min().detach() - 1 if out.numel() else torch.zeros((), device=out.device)
            out = torch.cat([out, low.expand(out.shape[0], total - out.shape[1])], dim=1)
        return out

    def strategy_outputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """The network's outputs as the strategy's evaluation makes them: through its plugins' `after_eval_forward`
        and `after_eval_iteration` (CoPE's nearest prototypes)."""
        strategy = self.strategy
        strategy.mb_output = self.network(inputs)
        for event in ("after_eval_forward", "after_eval_iteration"):
            for plugin in strategy.plugins:
                if hasattr(plugin, event):
                    getattr(plugin, event)(strategy)
        out, strategy.mb_output = strategy.mb_output, None
        return out

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        if self.context.scenario == "task":
            return self.network(inputs, task)
        if self.context.scenario == "domain":
            return self.outputs(inputs)
        start = self.context.class_offsets[task]
        return self.outputs(inputs)[:, start:start + self.context.head_sizes[task]]

    def predict_classes(self, inputs: torch.Tensor, n_tasks: int) -> torch.Tensor:
        width = sum(self.context.head_sizes[:n_tasks])
        if self.context.scenario == "task":
            return torch.cat([self.network(inputs, task) for task in range(n_tasks)], dim=1)
        return self.outputs(inputs)[:, :width]

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed cross-entropy, number correct): over every class in the class scenario, else the task's head."""
        if self.context.scenario == "class":
            logits, targets = self.outputs(batch.inputs), self.class_targets(batch)
            loss = functional.cross_entropy(logits, targets, reduction="sum")
            return loss, (logits.argmax(1) == targets).sum()
        return head_cross_entropy(self.predict(batch.inputs, batch.task), batch.targets, "sum")

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict[str, torch.Tensor]:
        """A copy of the weights of the network the strategy trains now (GDumb's is a fresh copy each task)."""
        self.network = self.strategy.model
        return super().snapshot()

    def restore(self, snapshot: dict[str, torch.Tensor]) -> None:
        self.network = self.strategy.model
        super().restore(snapshot)

    def extra_state(self) -> dict[str, Any]:
        """The strategy's own state (its buffer, importances, old model...), pickled with the live network, optimiser
        and the tasks' tensors as references: a resumed run continues the same strategy."""
        from clbench.approaches.avalanche import bridge

        if self._pending_state is not None:
            data = self._pending_state
        elif self._experiences is None:
            return {}
        else:
            data = bridge.dump_strategy(self.strategy, bridge.shared_objects(
                self.strategy, self.protocol, self._experiences[1], self._experiences[2]))
        model = bridge.dump_model(self.strategy.model)
        return {"avalanche_strategy": torch.frombuffer(bytearray(data), dtype=torch.uint8),
                "avalanche_model": torch.frombuffer(bytearray(model), dtype=torch.uint8)}

    def load_state(self, state: dict[str, Any]) -> None:
        """The network as the strategy left it (its structure too), then its weights and the strategy's state."""
        from clbench.approaches.avalanche import bridge

        extra = state.get("extra", {})
        if "avalanche_strategy" in extra and self.not_resumable:
            raise SpecError(f"approach {self.name} cannot resume from its checkpoint: {self.not_resumable}; start "
                            f"the run over with --force")
        model = extra.get("avalanche_model")
        if model is not None:
            self.strategy.model = bridge.load_model(model.numpy().tobytes()).to(self.device)
            self.network = self.strategy.model
        super().load_state(state)

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Keep the pickled strategy until the next task (its buffers refer to the tasks' tensors)."""
        if "avalanche_strategy" in state:
            self._pending_state = bytes(state["avalanche_strategy"].numpy().tobytes())

    def memory_usage(self) -> tuple[int, int]:
        """(samples in the strategy's buffer, bytes of its pickled state plus those samples' inputs)."""
        from clbench.approaches.avalanche import bridge

        samples = bridge.replay_samples(self.strategy) if self._pending_state is None else 0
        per_sample = 4 * int(torch.tensor(self.context.input_shape).prod())
        strategy_state = self.extra_state().get("avalanche_strategy")  # the network is not memory kept besides it
        return samples, tensor_bytes(strategy_state) + samples * per_sample


def torch_optimizer(parameters: Any, training: TrainingSpec) -> torch.optim.Optimizer:
    """The spec's optimiser as a `torch.optim` one (Avalanche resets its state and parameter list each
    experience): SGD (momentum, weight decay), Adam or RMSprop at the spec's lr."""
    if training.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=training.lr, weight_decay=training.weight_decay)
    if training.optimizer == "rmsprop":
        return torch.optim.RMSprop(parameters, lr=training.lr, momentum=training.momentum,
                                   weight_decay=training.weight_decay)
    return torch.optim.SGD(parameters, lr=training.lr, momentum=training.momentum, weight_decay=training.weight_decay)
