"""Runs through the engine and the scheduler on synthetic data: one tiny run, an SGD that trains slowly (so that
a test can act while a run trains), and a listener that records the scheduler's events. Worker processes and the
tests' child processes import these by name: the tests folder must be on their path."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch
from synthetic import synthetic_loader, tiny_spec

from clbench.approaches.sgd import SGD
from clbench.run.engine import RunOutcome, execute
from clbench.run.plan import RunPlan, plan_runs

CPU = torch.device("cpu")


def run(tmp_path: Path, method: str = "sgd", seed: int = 0, network: str = "mlp", force: bool = False):  # type: ignore[no-untyped-def]
    """One tiny run (`tiny_spec(network)` on synthetic data, on the CPU) through the engine: its outcome."""
    spec = tiny_spec(network)
    [plan] = plan_runs(spec, [method], [seed], tmp_path)
    return execute(plan, device=CPU, loader=synthetic_loader(), force=force)


class SlowSGD(SGD):
    """SGD whose epochs also sleep (same numbers), so that a test can act while a run trains."""

    delay = 0.1

    def train_epoch(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return super().train_epoch(*args, **kwargs)


def slow(plan: RunPlan) -> RunPlan:
    return replace(plan, approach=replace(plan.approach, cls=SlowSGD)) if plan.method == "sgd" else plan


class Recorder:
    """A ScheduleListener that keeps every event as (kind, run_id, payload)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    def _add(self, kind: str, plan: RunPlan, payload: object = None) -> None:
        self.events.append((kind, plan.run_id, payload))

    def run_launched(self, plan, device) -> None:  # type: ignore[no-untyped-def]
        self._add("launched", plan, device)

    def run_ended(self, outcome: RunOutcome) -> None:
        self._add("ended", outcome.plan, outcome.status)

    def run_started(self, plan, task_names) -> None:  # type: ignore[no-untyped-def]
        self._add("started", plan, list(task_names))

    def run_resumed(self, plan, stage) -> None:  # type: ignore[no-untyped-def]
        self._add("resumed", plan, stage)

    def task_started(self, plan, stage) -> None:  # type: ignore[no-untyped-def]
        self._add("task_started", plan, stage)

    def epoch_finished(self, plan, epoch) -> None:  # type: ignore[no-untyped-def]
        self._add("epoch", plan, epoch.epoch)

    def task_finished(self, plan, stage, accuracies) -> None:  # type: ignore[no-untyped-def]
        self._add("task_finished", plan, stage)

    def of(self, kind: str, run_id: str) -> list[object]:
        return [payload for k, r, payload in self.events if k == kind and r == run_id]
