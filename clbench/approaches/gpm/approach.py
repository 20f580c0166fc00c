"""GPM: Gradient Projection Memory (Saha, Garg & Roy, ICLR 2021; the authors' code: sahagobinda/GPM).

After each task, every projected layer's representation matrix (its inputs on `samples` random training images of
the task: input vectors for a linear layer, unfolded input patches for a convolution) extends the layer's stored
orthonormal basis with the fewest directions of its residual that reach the layer's energy threshold (`functions`,
Eq. 5, 8, 9). While a later task trains, each projected layer's weight gradient has its component in the stored
subspace removed before the optimiser step (Eq. 10: g - g U U^T, with U U^T computed once per task as the authors'
`feature_mat`, main_pmnist.py:266-271). The bases are the memory (`memory_usage`: their bytes).

Projected layers: every linear and convolution layer of the body, and the shared head in the domain scenario (the
authors' permuted MNIST: one 10-way head, projected as a layer, main_pmnist.py:84-87). Per-task heads are trained
at their own task only and not projected (the authors' CIFAR: main_cifar100.py:150-157 projects the first 15
parameters, the body). The authors' networks have no biases; their 1-D parameters (batch norm) are trained on the
first task only (main_cifar100.py:156-157), and so are clbench's biases of the projected layers here: with them
frozen, a past task's outputs move only through the threshold's discarded energy.

Refused: the class scenario (`refuses_class`) and `network.kind` resnet18 (`unsupported_networks`).
Monitoring: `gpm_subspace` after each task: per projected layer, the basis' dimension and the layer's input size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters, StepInfo
from clbench.approaches.domains import BenchmarkFacts, DomainProblem
from clbench.approaches.gpm import functions
from clbench.data.batches import TaskSequence
from clbench.errors import SpecError
from clbench.spec.fields import field


@dataclass(frozen=True)
class GPMHyperparameters(Hyperparameters):
    """GPM's hyper-parameters; the defaults are the authors' permuted MNIST values (sahagobinda/GPM main_pmnist.py)."""

    clip_grad_norm: float = field(0.0, doc="gradient-norm clipping (the authors clip nothing: main_pmnist.py:62-66, "
                                           "main_cifar100.py:127-159; 0: none)",
                                  minimum=0.0, special={0.0: "no clipping"})
    thresholds: tuple[float, ...] = field((0.95, 0.99, 0.99), doc="energy threshold per projected layer, input "
                                          "layer first, the last repeated for further layers (main_pmnist.py:216: "
                                          "0.95, 0.99, 0.99; main_cifar100.py:297: 0.97 for every layer)",
                                          minimum=0.0, maximum=1.0, min_items=1)
    threshold_increment: float = field(0.0, doc="added to every threshold per task learned before (main_cifar100.py"
                                                ":297: 0.003; pmnist: none)", minimum=0.0, maximum=1.0)
    samples: int = field(300, doc="random training samples of the task whose activations form the representation "
                                  "(main_pmnist.py:124: 300; main_cifar100.py:193: 125)", minimum=1)
    layer_samples: tuple[int, ...] = field((), doc="samples per projected layer, the last repeated, at most "
                                           "`samples` (main_cifar100.py:198: 24, 100, 100, 125, 125; empty: "
                                           "`samples` for every layer, as main_pmnist.py:129)", minimum=1)


class GPM(Approach):
    """Gradients of later tasks projected out of the input subspaces of earlier tasks, layer by layer.

    The authors' code: sahagobinda/GPM@1a238ec `main_pmnist.py` (the MLP form) and `main_cifar100.py` (the conv form,
    unfolded input patches)."""

    name = "gpm"
    summary = "gradient projection memory: steps orthogonal to past tasks' input subspaces (Saha et al. 2021)"
    refuses_class = ("the bases protect the shared layers, but in one softmax over every head the new task's loss "
                     "moves the earlier tasks' heads, which GPM neither projects nor freezes; the authors run it "
                     "task-incremental (CIFAR) or with one shared head (pmnist): use data.scenario=task or domain")
    unsupported_networks = {"resnet18": "not implemented here: the authors' ResNet-18 form (strided and shortcut "
                                        "convolutions' patches, batch norm learned on the first task only)"}
    monitoring_reporter = "clbench.approaches.gpm.report:GPMReporter"
    hyperparameters_class = GPMHyperparameters
    hparams: GPMHyperparameters

    @classmethod
    def hyperparameter_problem(cls, hyperparameters: Hyperparameters, facts: BenchmarkFacts) -> DomainProblem | None:
        """Each layer's samples (layer_samples) among the `samples` images of the representation: at most it."""
        assert isinstance(hyperparameters, GPMHyperparameters)
        if max(hyperparameters.layer_samples, default=0) > hyperparameters.samples:
            return DomainProblem("layer_samples", f"each layer's samples are taken among the gpm.samples "
                                                  f"({hyperparameters.samples}) images of the representation: use "
                                                  f"at most {hyperparameters.samples} each")
        return None

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.layers = projected_layers(self.multihead)
        self.bases = {name: torch.zeros(input_size(layer), 0, device=self.device)
                      for name, layer in self.layers.items()}  # (d, r) orthonormal columns per layer
        self.projections: dict[str, torch.Tensor] = {}  # U U^T (d, d) per layer while a later task trains

    def begin_task(self, stage: int, tasks: TaskSequence) -> None:
        """Before a later task: the projector onto each layer's stored subspace (none before the first task)."""
        self.projections = ({} if stage == 0 else
                            {name: functions.projection_matrix(basis) for name, basis in self.bases.items()})

    def before_step(self, step: StepInfo) -> None:
        """After the first task: project the weight gradients (Eq. 10) and zero the biases' gradients."""
        if not self.projections:
            return
        for name, layer in self.layers.items():
            if layer.weight.grad is not None:
                layer.weight.grad = functions.project_gradient(layer.weight.grad, self.projections[name])
            if layer.bias is not None and layer.bias.grad is not None:
                layer.bias.grad.zero_()

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        """Extend each layer's basis with the task's representation (on `samples` random training images)."""
        train = self.training_data(stage, tasks)[0]
        order = torch.randperm(len(train), generator=self.context.generator(f"gpm-representation-{stage}"))
        indices = order[: self.hparams.samples].to(train.images.device)
        representations = self.representations(train.batch(indices).inputs.to(self.device), stage)
        thresholds = functions.layer_thresholds(self.hparams.thresholds, self.hparams.threshold_increment,
                                                len(self.layers), stage)
        for (name, matrix), threshold in zip(representations.items(), thresholds):
            self.bases[name] = functions.update_basis(matrix, self.bases[name], threshold)
        self.projections = {}

    def representations(self, inputs: torch.Tensor, stage: int) -> dict[str, torch.Tensor]:
        """Each projected layer's representation matrix (d, columns) from one eval-mode forward pass of `inputs`,
        layer i on its first `layer_samples[i]` samples (as main_cifar100.py:198-218)."""
        captured: dict[str, torch.Tensor] = {}
        hooks = [layer.register_forward_pre_hook(lambda _m, args, name=name: captured.__setitem__(name, args[0]))
                 for name, layer in self.layers.items()]
        self.network.eval()
        try:
            with torch.no_grad():
                self.network(inputs, stage)
        finally:
            for hook in hooks:
                hook.remove()
        counts = self.hparams.layer_samples or (self.hparams.samples,)
        matrices = {}
        for i, (name, layer) in enumerate(self.layers.items()):
            batch = captured[name][: counts[min(i, len(counts) - 1)]]
            matrices[name] = (functions.unfold_patches(batch, layer) if isinstance(layer, nn.Conv2d)
                              else functions.linear_representation(batch))
        return matrices

    # ------------------------------------------------------------------ state and monitoring
    def extra_state(self) -> dict[str, Any]:
        return {"bases": {name: basis.clone() for name, basis in self.bases.items()}}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        for name, basis in (state.get("bases") or {}).items():
            if name in self.bases:
                self.bases[name] = basis.to(self.device)

    def monitoring(self, stage: int, tasks: TaskSequence) -> dict[str, list[dict[str, Any]]]:
        """`gpm_subspace`: per projected layer, the stored subspace's dimension and the layer's input size."""
        return {"gpm_subspace": [{"layer": name, "dimension": int(basis.shape[1]), "size": int(basis.shape[0]),
                                  "fraction": np.float32(basis.shape[1] / basis.shape[0])}
                                 for name, basis in self.bases.items()]}


def projected_layers(network: nn.Module) -> dict[str, nn.Linear | nn.Conv2d]:
    """The layers GPM projects, in forward order: the body's linear and conv layers, and the head when it is one
    shared head (tied: the domain scenario). Any other parameter in the body is an error (GPM here knows these
    two layer kinds only)."""
    heads = getattr(network, "heads", None)
    tied = bool(getattr(network, "heads_tied", False))
    head_modules = {id(module) for module in heads.modules()} if heads is not None else set()
    layers: dict[str, nn.Linear | nn.Conv2d] = {}
    for name, module in network.named_modules():
        if id(module) in head_modules and not (tied and module is heads[0]):  # type: ignore[index]
            continue
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            layers[name] = module
        elif any(True for _ in module.parameters(recurse=False)):
            raise SpecError(f"approach gpm projects linear and conv layers only; {name} is a {type(module).__name__}")
    return layers


def input_size(layer: nn.Linear | nn.Conv2d) -> int:
    """The dimension of the layer's input space: in_features, or C_in * kh * kw for a convolution."""
    if isinstance(layer, nn.Linear):
        return layer.in_features
    if layer.groups != 1:
        raise SpecError(f"approach gpm: grouped convolutions are not supported ({layer})")
    return layer.in_channels * int(np.prod(layer.kernel_size))
