"""A run whose network diverged (NaN or infinite weights) is named under every table, from its stored losses: finite
at initialisation, not finite from some stage on; the random reference, which records no loss, is not."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from resultbuilders import write_run
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench import metrics
from clbench.approaches.sgd import SGD
from clbench.report.loading import load_results
from clbench.report.notes import incomplete_notes
from clbench.results import accuracy_frame, write_parquet
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

NAN, INF = math.nan, math.inf
MATRIX = [[0.9], [0.8, 0.9], [0.7, 0.8, 0.9]]


def test_the_first_stage_with_a_loss_that_is_not_finite_after_a_finite_start() -> None:
    stages = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    assert metrics.diverged_stage(stages, [2.3, 2.3, 0.4, 0.5, 0.6, NAN, NAN, NAN]) == 2
    assert metrics.diverged_stage(stages, [2.3, 2.3, 0.4, INF, NAN, NAN, NAN, NAN]) == 1  # inf counts too
    assert metrics.diverged_stage(stages, [2.3, 2.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]) is None
    # the random reference: no loss at initialisation (nor later), so nothing is said of it
    assert metrics.diverged_stage(stages, [NAN] * 8) is None
    assert metrics.diverged_stage(np.array([1, 2]), [0.4, NAN]) is None  # no stage-0 rows: no finite start to judge


def with_losses(run_dir: Path, loss_of_stage: dict[int, float]) -> None:
    """Rewrite a built run's losses (write_run stores 0.0 everywhere) stage by stage."""
    frame = pd.read_parquet(run_dir / "accuracy.parquet")
    frame["loss"] = [loss_of_stage.get(int(stage), 0.0) for stage in frame["stage"]]
    write_parquet(run_dir / "accuracy.parquet", accuracy_frame(frame.to_dict("records")))


def test_the_report_names_a_diverged_run_and_no_other(tmp_path: Path) -> None:
    initial = [0.1, 0.1, 0.1]
    write_run(tmp_path, "sgd", 0, MATRIX, initial=initial)
    with_losses(write_run(tmp_path, "sgd", 1, MATRIX, initial=initial), {2: NAN, 3: NAN})
    with_losses(write_run(tmp_path, "random", 0, MATRIX, initial=initial), {0: NAN, 1: NAN, 2: NAN, 3: NAN})
    notes = [note for note in incomplete_notes(load_results(tmp_path, "b")) if "diverged" in note]
    assert len(notes) == 1, notes
    assert notes[0].startswith("sgd seed 1 (b/sgd/c0/seed-1) diverged while learning task 2: its test loss is not "
                               "finite from stage 2 on")
    assert "they are in the means" in notes[0] and "--set training.lr=" in notes[0]


class DivergingSGD(SGD):
    """SGD whose loss is NaN from the second task on: its weights become NaN there, as a diverged run's do."""

    def loss(self, batch, step):  # type: ignore[no-untyped-def]
        loss = super().loss(batch, step)
        return loss * math.nan if step.stage >= 1 else loss


def test_a_run_that_diverges_warns_while_it_trains_and_is_named_by_the_report(tmp_path: Path, caplog) -> None:
    # a fixed number of epochs (the online protocols'), whose last weights end the task: the paper's early stopping
    # would restore the task's best validation weights, those before the NaN, and the network would not stay broken
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, early_stopping=False, max_epochs=2))
    [plan] = plan_runs(spec, ["sgd"], [0], tmp_path)
    plan = replace(plan, approach=replace(plan.approach, cls=DivergingSGD))
    with caplog.at_level(logging.WARNING, logger="clbench.run.engine"):
        outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader())
    assert outcome.status == "done"  # it finishes: a diverged seed is a result, named rather than dropped
    warnings = [record.getMessage() for record in caplog.records if "diverged" in record.getMessage()]
    # one warning per task trained after the divergence (tasks 2 and 3 of the tiny spec's 3), none for task 1
    assert [warning.split(": the training loss of ")[1][:6] for warning in warnings] == ["task 2", "task 3"]
    assert warnings[0].startswith(f"{plan.run_id}: the training loss of task 2 is nan after epoch 1")
    notes = [note for note in incomplete_notes(load_results(tmp_path, plan.spec.name)) if "diverged" in note]
    assert len(notes) == 1 and f"({plan.run_id}) diverged while learning task 2:" in notes[0]
