"""`PreviousModel`: the network as it was after the previous task, for the approaches that distil from it.

LwF distils the earlier heads' outputs towards it, LFL pulls the penultimate activations towards its features, and
iCaRL takes the earlier classes' targets from its sigmoids. An approach holds one (`self.previous =
PreviousModel(...)`), calls `remember(network)` at the end of each task, reads `features` / `logits` while the next
task trains, and puts `state()` into its `extra_state` (`load_state` restores it). `ApproachWithPreviousModel` is
that wiring as a base class, for an approach whose only state is the previous model (LwF, LFL); iCaRL holds one
beside its memory. The checkpoint key is
`previous_network`, the network's `state_dict`; the memory it costs is its bytes (`nbytes`), counted in the
approach's `memory_usage` with the rest of `extra_state`.

EWC, IMM, SI and MAS keep an anchor of parameters instead (a dict of tensors the penalty compares the weights with,
never run on inputs): a different thing, kept as a `ParameterDict` in each of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Hyperparameters
from clbench.approaches.parameters import ParameterDict, tensor_bytes, tensors_to
from clbench.data.batches import TaskSequence
from clbench.nets import MultiHeadNet

STATE_KEY = "previous_network"  # in the approach's `extra_state` (the checkpoint format)


def frozen_network(build: Callable[[], nn.Module], weights: Mapping[str, torch.Tensor],
                   device: torch.device) -> nn.Module:
    """A network built by `build` with `weights` loaded, in eval mode and without gradients.

    Built inside `fork_rng` so that the throw-away initialisation leaves the global RNG untouched.
    """
    with torch.random.fork_rng(devices=[]):
        network = build()
    network.load_state_dict(weights)
    network.to(device).eval()
    network.requires_grad_(False)
    return network


class PreviousModel:
    """A frozen copy (eval mode, no gradients) of the network after the previous task; none before task 2."""

    def __init__(self, build_network: Callable[[], nn.Module], device: torch.device, owner: str) -> None:
        self.build_network = build_network
        self.device = device
        self.owner = owner  # the approach's name, for the error message
        self.weights: ParameterDict = {}  # state_dict after the previous task; {} before task 2
        self.network: MultiHeadNet | None = None  # built from `weights`

    @property
    def available(self) -> bool:
        """Whether there is a previous model (after the first task, or loaded from a checkpoint)."""
        return self.network is not None

    def remember(self, network: nn.Module) -> None:
        """Keep a copy of `network` as it is now (the end of a task, best weights restored)."""
        self.set_weights({key: value.detach().clone() for key, value in network.state_dict().items()})

    def set_weights(self, weights: ParameterDict) -> None:
        """Build the frozen network from `weights` ({}: no previous model)."""
        self.weights = weights
        self.network = frozen_network(self.build_network, weights, self.device) if weights else None  # type: ignore[assignment]

    def require(self, stage: int) -> MultiHeadNet:
        """The previous model; training a later task without it (state not loaded) is an error."""
        if self.network is None:
            raise RuntimeError(f"{self.owner}: stage {stage + 1} needs the model of the previous task (load the "
                               "approach's state)")
        return self.network

    def features(self, inputs: torch.Tensor, stage: int) -> torch.Tensor:
        """Its body's output, without autograd: (B, F)."""
        network = self.require(stage)
        with torch.no_grad():
            return network.features(inputs)  # (B, F)

    def logits(self, inputs: torch.Tensor, tasks: Iterable[int], stage: int) -> list[torch.Tensor]:
        """Its heads' outputs for `tasks` (one body pass), without autograd: a (B, n_task) tensor per task."""
        network = self.require(stage)
        with torch.no_grad():
            features = network.features(inputs)  # (B, F)
            return [network.heads[task](features) for task in tasks]

    @property
    def nbytes(self) -> int:
        """Bytes of the kept weights (what it adds to the approach's memory)."""
        return tensor_bytes(self.weights)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps, for the approach's `extra_state`."""
        return {STATE_KEY: self.weights}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore from an approach's `extra_state` (none there: no previous model)."""
        self.set_weights(tensors_to(state.get(STATE_KEY, {}), self.device))


class ApproachWithPreviousModel(Approach):
    """An approach that keeps the network as it was after the previous task (`self.previous`) as its whole
    approach state: remembered at the end of each task, checkpointed in `extra_state`."""

    def __init__(self, context: ApproachContext, hyperparameters: Hyperparameters) -> None:
        super().__init__(context, hyperparameters)
        self.previous = PreviousModel(self.build_network, self.device, self.name)

    def end_task(self, stage: int, tasks: TaskSequence) -> None:
        self.previous.remember(self.network)

    def extra_state(self) -> dict[str, Any]:
        return self.previous.state()

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.previous.load_state(state)
