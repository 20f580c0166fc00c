"""PathNet (Fernando et al. 2017): per task, evolve a path through M modules per layer; freeze it afterwards.

The network has L layers (AlexNet: 3 conv + 2 fc; MLP: its hidden layers) of M modules each; a path uses N
modules per layer, whose activations are summed. Per task (the reference's serial version of the paper's
binary tournament):

1. Modules on no earlier task's best path are reset to their initial weights (the paper re-initialises them);
   modules on earlier best paths are frozen (no gradient, not in the optimiser).
2. P random paths (N distinct modules per layer) start, each with its own lr schedule (`PlateauSchedule`).
3. Each of `generations` generations trains every candidate path in turn for `epochs_per_generation` epochs
   (the base class's `train_epoch` / `evaluate_validation`). By default that is max_epochs // generations
   (200 // 20 = 10), so that a path gets at most the protocol's budget of max_epochs per task (the reference's
   "same number of training updates"); when max_epochs < generations, max_epochs generations of one epoch run.
   Candidates share the modules, as in the paper. Every epoch, the lowest validation loss so far snapshots
   the weights and makes its path the winner.
4. At the end of a generation the winner's snapshot is restored; every other candidate becomes a copy of the
   winner's path, mutated gene by gene with probability 1 / (N L) by a shift uniform in [-2, 2] modulo M
   (the paper's mutation, as in the reference), and restarts its schedule at the winner's lr. A path whose
   lr fell below lr_min stops; the task stops when every path has stopped.
5. The winner's path becomes the task's path: evaluation of task t uses its path and its own head.

The base loop (one schedule, one optimiser) cannot express several candidates with their own schedules, so
`learn_task` is overridden; it reuses the base class's epoch, validation and schedule pieces.

Module widths are chosen by `clbench.nets.sizing` so that all L x M modules and the heads have as many parameters as
the base network (the reference: 0.258 x the base widths for M = 16, N = 3). Achieved counts (M = 16;
tests/test_pathnet.py checks them):
- mixture8, AlexNet, 8 tasks, 293 classes: 7,104,229 -> 7,097,797 (-0.09%), modules (17, 33, 66, 528, 528)
- mnist2, MLP 784-800-800-800, two 5-class heads: 1,917,610 -> 1,912,492 (-0.27%), modules (117, 117, 117)
- pmnist small, MLP 784-100-100, ten 10-class heads: 98,700 -> 98,736 (+0.04%), modules (7, 47)
  (one multiplier for all layers gives 89,616 or 102,532; `match_widths` then widens the last layer alone)

Bodies: the MLP and the AlexNet-like net, whose layers become modules (`network.body_plan`). `network.kind`
resnet18 is refused (`unsupported_networks`): residual blocks with batch norm have no module plan here.

Choices where the paper and the reference differ: fitness is the validation loss (the reference; the paper
uses the classification accuracy seen during training), the protocol's early-stopping criterion; a candidate's
lr decay takes effect at once (the reference applies it only from the next generation); mutation may repeat a
module within a layer, which then counts twice in the sum (both).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, EpochLog, Hyperparameters, ProgressCallback, StepInfo, TaskLog
from clbench.approaches.domains import FLOAT_BYTES, BenchmarkFacts, DomainProblem, memory_problem
from clbench.approaches.parameters import tensors_to
from clbench.approaches.pathnet.network import PathNet, base_widths, body_plan, build_pathnet, pathnet_parameter_count
from clbench.approaches.schedule import PlateauSchedule
from clbench.data.batches import Batch, LabelledData, TaskSequence
from clbench.nets.sizing import WidthMatch, match_widths
from clbench.spec import DataSpec, NetworkSpec, TrainingSpec
from clbench.spec.fields import field

PathList = list[list[int]]  # (L, N) module indices


@dataclass(frozen=True)
class PathNetHyperparameters(Hyperparameters):
    """PathNet's architecture and evolution (the reference's tuned configuration for the AlexNet-like net)."""

    clip_grad_norm: float = field(1000.0, doc="gradient-norm clipping (reference for pathnet: 1000)",
                                  minimum=0.0, special={0.0: "no clipping"})
    modules: int = field(16, doc="M, modules per layer (reference's tuned value 16; the paper's Sec. 2.4: 10)",
                         minimum=1)
    modules_per_path: int = field(3, doc="N, modules a path uses per layer (paper Sec. 2.4 and reference: 3)",
                                  minimum=1)
    generations: int = field(20, doc="generations of the tournament per task (reference: 20, grid 5..200)",
                             minimum=1)
    paths_per_generation: int = field(2, doc="P, candidate paths per generation (paper's binary tournament: 2)",
                                      minimum=1)
    epochs_per_generation: int = field(0, doc="epochs a candidate trains per generation; 0: max_epochs // "
                                              "generations, at least 1 (reference: 200 // 20 = 10)", minimum=0,
                                       special={0: "max_epochs // generations"})


def random_path(n_layers: int, modules: int, per_path: int, generator: torch.Generator) -> PathList:
    """N distinct modules drawn uniformly per layer."""
    return [torch.randperm(modules, generator=generator)[:per_path].tolist() for _ in range(n_layers)]


def mutate_path(path: Sequence[Sequence[int]], modules: int, generator: torch.Generator) -> PathList:
    """Each of the L x N genes, with probability 1 / (N L), shifted by an integer uniform in [-2, 2] modulo M."""
    genes = torch.tensor(path, dtype=torch.long)  # (L, N)
    mutate = torch.rand(genes.shape, generator=generator) < 1.0 / genes.numel()  # (L, N)
    shift = torch.randint(-2, 3, genes.shape, generator=generator)  # (L, N)
    return torch.remainder(genes + shift * mutate, modules).tolist()


def pathnet_widths(spec: NetworkSpec, input_shape: Sequence[int], head_sizes: Sequence[int],
                   modules: int) -> WidthMatch:
    """Module widths giving the base network's parameter count (heads included) over all L x M modules."""
    base = base_widths(spec)
    target = pathnet_parameter_count(body_plan(spec, input_shape, base), head_sizes, 1)
    return match_widths(target, lambda widths: pathnet_parameter_count(body_plan(spec, input_shape, widths),
                                                                       head_sizes, modules), base)


def frozen_modules(best_paths: dict[int, PathList], stage: int, n_layers: int) -> list[set[int]]:
    """Per layer, the modules on the best path of any other task already learned."""
    return [{module for task, path in best_paths.items() if task != stage for module in path[layer]}
            for layer in range(n_layers)]


@dataclass
class Candidate:
    """A path of the population and its own lr schedule."""

    path: PathList
    schedule: PlateauSchedule


@dataclass
class Tournament:
    """The best validation loss of the task so far, its weights and winning candidate, and epoch counts."""

    weights: dict[str, torch.Tensor]
    loss: float = float("inf")
    winner: int = 0
    epochs: int = 0
    best_epoch: int = 0
    batches: int = 0


class PathNetApproach(Approach):
    """Evolve a path per task over shared modules; modules on earlier tasks' paths are frozen.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/pathnet.py`,
    `src/networks/alexnet_pathnet.py`.
    """

    name = "pathnet"
    summary = "PathNet: evolved paths through M modules per layer, earlier paths frozen (Fernando et al. 2017)"
    needs_task_id = True  # its prediction uses the task's path: task-aware evaluation only
    refuses_bias_free = "PathNet's modules (pathnet/network.py) are built with biases"
    unsupported_networks = {"resnet18": "PathNet's modules are the layers of the MLP or the AlexNet-like net "
                                        "(network.body_plan); residual blocks with batch norm have no module plan"}
    predicts_unlearned_tasks = False  # an unlearned task has no path: no stage-0 or u > t rows
    hyperparameters_class = PathNetHyperparameters
    hparams: PathNetHyperparameters

    @classmethod
    def protocol_problem(cls, training: TrainingSpec, data: DataSpec, hyperparameters: Hyperparameters) -> str | None:
        """PathNet's tournament scores paths by their validation loss, each path with its own lr schedule: it needs
        a validation split and its schedules (no `training.early_stopping: false`)."""
        if data.validation_fraction == 0 or not training.early_stopping:
            return ("its tournament scores the paths by their validation loss, each with its own lr schedule "
                    "(Fernando et al. 2017, as the reference): it needs data.validation_fraction above 0 and "
                    "training.early_stopping true")
        return None

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """A path picks modules_per_path of a layer's modules, and M modules per layer of at least one unit each
        (their weights, gradients and the tournament's copies: 4 x 4 bytes per weight) must fit in memory."""
        assert isinstance(hyperparameters, PathNetHyperparameters)
        if hyperparameters.modules_per_path > hyperparameters.modules:
            return DomainProblem("modules_per_path", f"a path picks modules_per_path of a layer's "
                                                     f"{hyperparameters.modules} modules (pathnet.modules): use at "
                                                     f"most {hyperparameters.modules}")
        return memory_problem("modules", float(hyperparameters.modules) * facts.input_size * 4 * FLOAT_BYTES,
                              f"{hyperparameters.modules:,} modules per layer")

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        assert isinstance(hyperparameters, PathNetHyperparameters)
        super().__init__(context, hyperparameters)
        self.evolution_generator = context.generator("pathnet-evolution")
        self.best_paths: dict[int, PathList] = {}
        self.active_path: PathList | None = None  # the candidate being trained or validated
        self.initial_weights = {key: value for key, value in self.snapshot().items() if key.startswith("layers.")}

    # ------------------------------------------------------------------ network
    def build_network(self) -> nn.Module:
        spec, shape, heads = self.context.network, self.context.input_shape, self.context.head_sizes
        self.widths = pathnet_widths(spec, shape, heads, self.hparams.modules)
        return build_pathnet(spec, shape, heads, self.hparams.modules, self.widths.widths)

    @property
    def pathnet(self) -> PathNet:
        assert isinstance(self.network, PathNet)
        return self.network

    @property
    def epochs_per_generation(self) -> int:
        """The hyper-parameter, or max_epochs // generations (at least 1) when it is 0."""
        if self.hparams.epochs_per_generation > 0:
            return self.hparams.epochs_per_generation
        return max(1, self.training_protocol.max_epochs // self.hparams.generations)

    @property
    def generations(self) -> int:
        """The hyper-parameter; with the automatic epochs per generation, at most max_epochs (one epoch each)."""
        if self.hparams.epochs_per_generation > 0:
            return self.hparams.generations
        return min(self.hparams.generations, self.training_protocol.max_epochs)

    # ------------------------------------------------------------------ hooks
    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Reset the free modules to their initial weights; freeze the modules of earlier best paths."""
        frozen = frozen_modules(self.best_paths, stage, self.pathnet.n_layers)
        with torch.no_grad():
            for layer, modules in enumerate(self.pathnet.layers):
                for index, module in enumerate(modules):
                    module.requires_grad_(index not in frozen[layer])
                    if index not in frozen[layer]:
                        for name, parameter in module.named_parameters():
                            parameter.copy_(self.initial_weights[f"layers.{layer}.{index}.{name}"])
        for task, head in enumerate(self.pathnet.heads):
            head.requires_grad_(task == stage)

    def trainable_parameters(self, stage: int) -> Iterable[nn.Parameter]:
        """The free modules (only the active path's get gradients) and the task's head."""
        free = [p for modules in self.pathnet.layers for p in modules.parameters() if p.requires_grad]
        return free + list(self.pathnet.heads[stage].parameters())

    def loss(self, batch: Batch, step: StepInfo) -> torch.Tensor:
        logits = self.pathnet(batch.inputs, batch.task, self.current_path(batch.task))
        return functional.cross_entropy(logits, batch.targets)

    def validation_loss(self, batch: Batch, stage: int) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.pathnet(batch.inputs, batch.task, self.current_path(batch.task))
        loss = functional.cross_entropy(logits, batch.targets, reduction="sum")
        return loss, (logits.argmax(1) == batch.targets).sum()

    def predict(self, inputs: torch.Tensor, task: int) -> torch.Tensor:
        """Task `task`'s logits on its own best path."""
        return self.pathnet(inputs, task, self.path_of(task))

    def current_path(self, task: int) -> PathList:
        """The candidate being trained, else the task's best path."""
        return self.active_path if self.active_path is not None else self.path_of(task)

    def path_of(self, task: int) -> PathList:
        if task not in self.best_paths:
            raise ValueError(f"pathnet: task {task} has not been learned (no path)")
        return self.best_paths[task]

    # ------------------------------------------------------------------ evolution
    def learn_task(self, stage: int, tasks: TaskSequence, progress: ProgressCallback | None = None) -> TaskLog:
        """Evolve and train paths for task `stage` (see the module docstring), then keep the winner's path."""
        start = time.perf_counter()
        self.begin_task(stage, tasks)
        train, valid = self.training_data(stage, tasks)
        population = [Candidate(self.new_path(), PlateauSchedule(self.training_protocol))
                      for _ in range(self.hparams.paths_per_generation)]
        tournament = Tournament(self.snapshot())
        for _ in range(self.generations):
            if all(candidate.schedule.stopped for candidate in population):
                break
            for index, candidate in enumerate(population):
                if not candidate.schedule.stopped:
                    self.train_candidate(stage, index, candidate, train, valid, tournament, progress)
            self.restore(tournament.weights)
            population = self.next_generation(population, tournament.winner)
        self.active_path = None
        self.restore(tournament.weights)
        winner = population[tournament.winner]
        self.best_paths[stage] = [list(layer) for layer in winner.path]
        self.end_task(stage, tasks)
        return TaskLog(stage, tournament.epochs, tournament.best_epoch, tournament.loss, winner.schedule.lr,
                       time.perf_counter() - start, tournament.batches)

    def new_path(self) -> PathList:
        return random_path(self.pathnet.n_layers, self.hparams.modules, self.hparams.modules_per_path,
                           self.evolution_generator)

    def train_candidate(self, stage: int, index: int, candidate: Candidate, train: LabelledData,
                        valid: LabelledData, tournament: Tournament, progress: ProgressCallback | None) -> None:
        """Train one candidate's path for up to `epochs_per_generation` epochs with its own schedule."""
        self.active_path = candidate.path
        schedule = candidate.schedule
        optimizer = self.make_optimizer(stage, schedule.lr)
        for _ in range(self.epochs_per_generation):
            lr = schedule.lr
            train_loss, n_batches = self.train_epoch(stage, tournament.epochs, train, optimizer)
            evaluation = self.evaluate_validation(valid, stage)
            _, lr_changed = schedule.step(evaluation.loss)
            tournament.epochs += 1
            tournament.batches += n_batches
            best = evaluation.loss < tournament.loss
            if best:
                tournament.loss, tournament.winner, tournament.best_epoch = evaluation.loss, index, tournament.epochs
                tournament.weights = self.snapshot()
            if progress is not None:
                progress(EpochLog(stage, tournament.epochs, lr, train_loss, evaluation.loss, evaluation.accuracy,
                                  best))
            if schedule.stopped:
                break
            if lr_changed:
                optimizer = self.make_optimizer(stage, schedule.lr)

    def next_generation(self, population: list[Candidate], winner: int) -> list[Candidate]:
        """The winner stays; every other candidate becomes a mutated copy starting at the winner's lr."""
        champion = population[winner]
        following: list[Candidate] = []
        for index, candidate in enumerate(population):
            if index == winner:
                following.append(candidate)
                continue
            schedule = PlateauSchedule(self.training_protocol, lr=champion.schedule.lr)
            schedule.stopped = champion.schedule.lr < self.training_protocol.lr_min
            path = mutate_path(champion.path, self.hparams.modules, self.evolution_generator)
            following.append(Candidate(path, schedule))
        return following

    # ------------------------------------------------------------------ state
    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """The task's path: one row per (layer, slot), with whether an earlier task's path used the module."""
        earlier = frozen_modules({t: p for t, p in self.best_paths.items() if t < stage}, stage,
                                 self.pathnet.n_layers)
        return {"pathnet_paths": [
            {"task": stage + 1, "layer": layer + 1, "slot": slot, "module": module,
             "reused": module in earlier[layer], "module_width": self.widths.widths[layer]}
            for layer, modules in enumerate(self.best_paths.get(stage, []))
            for slot, module in enumerate(modules)
        ]}

    def extra_state(self) -> dict[str, Any]:
        return {"best_paths": {task: [list(layer) for layer in path] for task, path in self.best_paths.items()},
                "initial_weights": self.initial_weights,
                "evolution_generator": self.evolution_generator.get_state()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.best_paths = {int(task): [list(layer) for layer in path] for task, path in state["best_paths"].items()}
        self.initial_weights = tensors_to(state["initial_weights"], self.device)
        self.evolution_generator.set_state(state["evolution_generator"])
