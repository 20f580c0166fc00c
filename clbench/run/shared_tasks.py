"""One task sequence kept from run to run in a process, for the next run on the same data.

The runs of one command often share their data: `clbench train -m sgd,hat,joint --seeds 0-2` builds the same
task sequence for every method of a seed (the data spec and the seed decide it; `build_tasks` is deterministic).
`SharedTasks` keeps the last sequence built, with the normalised evaluation inputs its `InputCache` computed, and
hands it to the next run on the same data instead of building (and normalising) it again: the same tensors, so
the same numbers. Runs read the sequence and never change it.

One sequence at a time: a run on other data frees the kept sequence before its own is built, so the peak
memory is one sequence, as without sharing. `grouped_by_data` orders a serial schedule so that the runs on the
same data follow each other (the first command of the README: the four methods of seed 0, then of seed 1, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from clbench.data.tasks import DatasetLoader, TaskSequence, build_tasks
from clbench.run.loaders import loader_for
from clbench.run.plan import RunPlan

Item = TypeVar("Item")


def data_key(plan: RunPlan, loader: DatasetLoader, device: torch.device | str) -> tuple[Any, ...]:
    """What decides a plan's task sequence: the data spec, the seed, the device and the loader (its data folder,
    mirror and the spec's own data sets). Two plans with equal keys get equal sequences from `build_tasks`."""
    return plan.spec.data, plan.seed, str(device), loader_for(loader, plan.spec)


@dataclass(eq=False)
class SharedTasks:
    """The task sequence of the last run (None before the first), kept for the next run on the same data.

    `builds` counts the sequences built (a test and the speed notes read it)."""

    key: tuple[Any, ...] | None = None
    tasks: TaskSequence | None = field(default=None, repr=False)
    builds: int = 0

    def tasks_for(self, plan: RunPlan, loader: DatasetLoader, device: torch.device | str) -> TaskSequence:
        """The plan's task sequence: the kept one when the plan's data is the same, else a new one (kept)."""
        key = data_key(plan, loader, device)
        if self.tasks is None or self.key != key:
            self.forget()  # the kept sequence is freed before the next is built: one in memory at a time
            self.tasks = build_tasks(plan.spec.data, plan.seed, loader_for(loader, plan.spec), device)
            self.key = key
            self.builds += 1
        return self.tasks

    def forget(self) -> None:
        """Drop the kept sequence (after a failed or interrupted run, whose caches may be half filled)."""
        self.key, self.tasks = None, None


def grouped_by_data(items: Sequence[Item], key: Callable[[Item], Any]) -> list[Item]:
    """`items` reordered so that items with equal keys follow each other, the groups in the order of their first
    item and the items of a group in their own order (a stable grouping; keys are compared with ==)."""
    groups: list[tuple[Any, list[Item]]] = []
    for item in items:
        value = key(item)
        for group_key, members in groups:
            if group_key == value:
                members.append(item)
                break
        else:
            groups.append((value, [item]))
    return [item for _, members in groups for item in members]
