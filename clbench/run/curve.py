"""Continual evaluation (`training.eval_every: K`): the accuracy of every learned task and of the current one every K
optimiser steps of the whole sequence, the curve the stability gap is read from (De Lange, van de Ven and
Tuytelaars, "Continual evaluation for lifelong learning: identifying the stability gap", ICLR 2023, Section 3).

Each task is evaluated on a fixed, seeded subset of its test set (`training.eval_subset` images, the `curve-subset`
stream of the seeding contract, drawn once: the same images at every evaluation, in test-set order), through
`Approach.evaluate_task`, the end-of-task evaluation's own path (one forward pass per batch for both evaluations,
the test split's input cache). Points are taken after the optimiser step whose global count (over the whole
sequence, from 1) is a multiple of K (`at: step`), and after each task is trained and its best weights restored
(`at: end`, at the task's last step): those end points are the end-of-task rows on the same images, the accuracy
"at the task boundary" that the stability gap is measured from.

The loop calls `CurveRecorder.after_step` once per optimiser step (`Approach.step_hook`); evaluating draws from no
random stream and puts the network back in its training mode, so a run's numbers are the same with the curve or
without. The recorder's state (the step count and the points so far) is kept in each checkpoint and
`curve.parquet` is rewritten after it, so a resumed run continues the curve without gaps or duplicates.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from clbench.approaches.base import Approach
from clbench.approaches.datatypes import StepInfo
from clbench.data.batches import LabelledData, TaskSequence
from clbench.results import CURVE_FILE, parquet_bytes
from clbench.run.plan import RunPlan
from clbench.run_files import write_run_file
from clbench.seeding import torch_generator

STEP, END = "step", "end"
"""`at`: a point after an optimiser step (every K), or after a task is learned (the end-of-task weights)."""


def subset_indices(size: int, keep: int, generator: torch.Generator) -> torch.Tensor:
    """`keep` of `range(size)` drawn without replacement from `generator`, in increasing order (all when size <=
    keep): (keep,) int64."""
    if size <= keep:
        return torch.arange(size)
    return torch.randperm(size, generator=generator)[:keep].sort().values


def evaluation_subset(data: LabelledData, indices: torch.Tensor) -> LabelledData:
    """The samples of a split at `indices`, sharing its transform and input cache (the cache keeps the subset's
    normalised inputs as one more split)."""
    device_indices = indices.to(data.images.device)
    return dataclasses.replace(data, images=data.images.index_select(0, device_indices),
                               labels=data.labels.index_select(0, device_indices),
                               task_ids=data.task_ids.index_select(0, device_indices))


def evaluation_subsets(tasks: TaskSequence, keep: int, seed: int) -> list[LabelledData]:
    """Each task's fixed subset of `keep` test images, from the run's `curve-subset` stream (task by task)."""
    generator = torch_generator(seed, "curve-subset")
    return [evaluation_subset(task.test, subset_indices(len(task.test), keep, generator)) for task in tasks]


@dataclass
class CurveRecorder:
    """Takes the curve's points of one run: `after_step` once per optimiser step, `end_task` after each task."""

    approach: Approach
    tasks: TaskSequence
    every: int
    subsets: list[LabelledData]
    identity: dict[str, Any]
    step: int = 0  # optimiser steps taken in the whole sequence so far
    rows: list[dict[str, Any]] = field(default_factory=list)

    def after_step(self, info: StepInfo) -> None:
        """Count the step; every `every` steps, evaluate the tasks 1..stage+1 and return to the training mode."""
        self.step += 1
        if self.step % self.every == 0:
            self.record(info.stage, info.epoch + 1, STEP)
            self.approach.train_mode(info.stage)

    def end_task(self, stage: int, epochs: int) -> None:
        """The points of the task's final weights (the end-of-task rows' weights), at its last step."""
        self.record(stage, epochs, END)

    def record(self, stage: int, epoch: int, at: str) -> None:
        """The points of the learned tasks and the current one; during training, not the current one for an approach
        that cannot predict a task before it is learned (PathNet: no best path yet)."""
        current = at == END or type(self.approach).predicts_unlearned_tasks
        for task in range(stage + 1 if current else stage):
            evaluations = self.approach.evaluate_task(self.subsets[task], task, stage + 1)
            self.rows.extend({**self.identity, "step": self.step, "stage": stage + 1, "epoch": epoch,
                              "task": task + 1, "at": at, "evaluation": name, "accuracy": float(result.accuracy),
                              "loss": float(result.loss), "n": int(result.n)}
                             for name, result in evaluations.items())

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the step count and the points so far."""
        return {"step": self.step, "rows": list(self.rows)}

    def load_state(self, state: dict[str, Any] | None) -> None:
        """Continue from a checkpoint's `state()`; a checkpoint without one (written with the curve off) starts the
        count again at the stage resumed, which the curve's steps then say."""
        if state is not None:
            self.step, self.rows = int(state["step"]), list(state["rows"])


def curve_recorder(plan: RunPlan, approach: Approach, tasks: TaskSequence) -> CurveRecorder | None:
    """The run's recorder, hooked into the approach's loop; None when `training.eval_every` is 0 (off)."""
    training = plan.approach.training
    if training.eval_every == 0:
        return None
    identity = {"run_id": plan.run_id, "benchmark": plan.spec.name, "method": plan.method, "seed": plan.seed}
    recorder = CurveRecorder(approach, tasks, training.eval_every,
                             evaluation_subsets(tasks, training.eval_subset, plan.seed), identity)
    approach.step_hook = recorder.after_step
    return recorder


def write_curve(run_dir: Path, run_id: str, rows: list[dict[str, Any]]) -> None:
    """`curve.parquet` in the run folder, atomically and recorded (one row per point, task and evaluation;
    `clbench.run_files.write_run_file`)."""
    import pandas as pd

    write_run_file(Path(run_dir) / CURVE_FILE, parquet_bytes(pd.DataFrame(rows), {"run_id": run_id}))
