"""The three tiny tasks learned once per (method, network) in a test session, with what each stage left behind:
the isolation tests (tests/approaches/test_isolation.py) and a method's own tests read the same training, each
from its own copy."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

import torch
from synthetic import make_approach, tiny_spec, tiny_tasks

from clbench.data.batches import TaskSequence

# The tiny conv net is too narrow for 16 modules per layer (modules of 2 channels); 4 modules of 2 per path learn.
PATHNET_CONV = {"modules": 4, "modules_per_path": 2, "generations": 4, "epochs_per_generation": 2}
PATHNET_MLP = {"generations": 2}
PACKNET = {"prune_fraction": 0.5, "retrain_epochs": 2}


@dataclass
class Learned:
    """A method after learning the 3 tiny tasks; per stage t (after task t + 1): `accuracy[t][u]` on task u's test
    split, `outputs[t][u]` task u's test logits (every test input, eval mode), `states[t]` the approach's
    checkpoint state (`network`: the weights), `rng_states[t]` the global generator (dropout's; not approach state)."""

    method: str
    network: str
    approach: Any  # the method's Approach
    tasks: TaskSequence
    accuracy: list[list[float]]
    outputs: list[list[torch.Tensor]]
    states: list[dict]
    rng_states: list[torch.Tensor]

    def weights(self, stage: int) -> dict[str, torch.Tensor]:
        """The network's weights after stage `stage` (0: after the first task)."""
        return self.states[stage]["network"]


def hyperparameters(method: str, network: str) -> dict[str, Any]:
    """The overrides the tiny runs of `method` use."""
    if method == "pathnet":
        return PATHNET_MLP if network == "mlp" else PATHNET_CONV
    return PACKNET if method == "packnet" else {}


def inputs_of(tasks: TaskSequence, task: int) -> torch.Tensor:
    """All test inputs of a task."""
    return tasks[task].test.batch(slice(0, len(tasks[task].test))).inputs


def learned(method: str, network: str) -> Learned:
    """`method` after the 3 tiny tasks of `tiny_spec(network)`: a copy of the session's one training."""
    return copy.deepcopy(_learn(method, network))


@functools.cache
def _learn(method: str, network: str) -> Learned:
    spec = tiny_spec(network)
    tasks = tiny_tasks(spec)
    approach = make_approach(method, spec, tasks, **hyperparameters(method, network))
    record = Learned(method, network, approach, tasks, [], [], [], [])
    for stage in range(3):
        approach.learn_task(stage, tasks)
        record.accuracy.append([approach.evaluate(tasks[u].test, u).accuracy for u in range(stage + 1)])
        approach.network.eval()
        with torch.inference_mode():
            record.outputs.append([approach.predict(inputs_of(tasks, u), u) for u in range(stage + 1)])
        record.states.append(copy.deepcopy(approach.state()))
        record.rng_states.append(torch.get_rng_state())  # last: nothing may draw from it before the next task
    return record
