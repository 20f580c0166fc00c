"""One task sequence kept from run to run in a process, for the next run on the same data.

The runs of one command often share their data: `clbench train -m sgd,hat,joint --seeds 0-2` builds the same
task sequence for every method of a seed (the data spec and the seed decide it; `build_tasks` is deterministic).
`SharedTasks` keeps the last sequence built, with the normalised inputs its `InputCache` kept (every split holds
the sequence's cache), and hands it to the next run on the same data instead of building (and normalising) it
again: the same tensors, so the same numbers. Runs read the sequence and never change it; if one did (a plugin
writing into its data in place: the version stamps of the images, labels, task ids or normalisation tables moved,
`clbench.data.input_cache.version_stamp`, the rule the cache's own entries follow), the next run gets a sequence
built anew, with a warning, and never the changed one.

One sequence at a time: a run on other data frees the kept sequence before its own is built, so the peak
memory is one sequence, as without sharing. `grouped_by_data` orders a serial schedule so that the runs on the
same data follow each other (the first command of the README: the four methods of seed 0, then of seed 1, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from clbench.data.batches import TaskSequence
from clbench.data.input_cache import version_stamp
from clbench.data.tasks import DatasetLoader, build_tasks
from clbench.run.loaders import loader_for
from clbench.run.plan import RunPlan

Item = TypeVar("Item")
log = logging.getLogger(__name__)


def data_key(plan: RunPlan, loader: DatasetLoader, device: torch.device | str) -> tuple[Any, ...]:
    """What decides a plan's task sequence: the data spec, the seed, the device and the loader (its data folder,
    mirror and the spec's own data sets). Two plans with equal keys get equal sequences from `build_tasks`."""
    return plan.spec.data, plan.seed, str(device), loader_for(loader, plan.spec)


@dataclass(eq=False)
class SharedTasks:
    """The task sequence of the last run (None before the first), kept for the next run on the same data.

    `builds` counts the sequences built (the tests read it)."""

    key: tuple[Any, ...] | None = None
    tasks: TaskSequence | None = field(default=None, repr=False)
    versions: tuple[int, ...] = ()  # `data_versions` of the kept sequence when it was built
    builds: int = 0

    def tasks_for(self, plan: RunPlan, loader: DatasetLoader, device: torch.device | str) -> TaskSequence:
        """The plan's task sequence: the kept one when the plan's data is the same and unchanged, else a new one
        (kept)."""
        key = data_key(plan, loader, device)
        if self.tasks is not None and self.key == key:
            if data_versions(self.tasks) == self.versions:
                return self.tasks
            log.warning("a run before %s changed its task data in place; %s gets the data built anew", plan.run_id,
                        plan.run_id)
        self.forget()  # the kept sequence is freed before the next is built: one in memory at a time
        self.tasks = build_tasks(plan.spec.data, plan.seed, loader_for(loader, plan.spec), device)
        self.key, self.versions = key, data_versions(self.tasks)
        self.builds += 1
        return self.tasks

    def forget(self) -> None:
        """Drop the kept sequence (after a failed or interrupted run, whose caches may be half filled)."""
        self.key, self.tasks, self.versions = None, None, ()


def data_versions(tasks: TaskSequence) -> tuple[int, ...]:
    """The version stamp (`version_stamp`: they move at every in-place change) of every split's labels and of what
    its inputs are computed from (images, task ids, the normalisation tables), in a fixed order."""
    return version_stamp(tensor for task in tasks for split in (task.train, task.valid, task.test)
                         for tensor in (split.labels, *split.input_sources))


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
