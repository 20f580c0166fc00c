"""The continual evaluation's curve (`training.eval_every`): its end points are the end-of-task rows, its steps
increase, it changes no number of the run, and a stopped run resumes it bit for bit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.results import CURVE_FILE
from clbench.run.curve import END, STEP, subset_indices
from clbench.run.engine import execute
from clbench.run.plan import plan_runs

CPU = torch.device("cpu")
BASE = replace(tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3)),
               network=replace(tiny_spec("mlp").network, dropout=0.2))


def with_curve(spec, every: int = 3, subset: int = 10_000):  # type: ignore[no-untyped-def]
    return replace(spec, training=replace(spec.training, eval_every=every, eval_subset=subset))


def run(results: Path, method: str, spec, observer=None):  # type: ignore[no-untyped-def]
    [plan] = plan_runs(spec, [method], [0], results)
    return plan, execute(plan, device=CPU, loader=synthetic_loader(), observer=observer)


def curve_of(plan) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    return pd.read_parquet(plan.run_dir / CURVE_FILE)


@pytest.mark.parametrize("method", ["sgd", "er", "hat", "ewc", "pathnet", "packnet", "joint", "random"])
def test_the_curve_changes_no_number_and_its_end_points_are_the_end_of_task_rows(method: str, tmp_path: Path) -> None:
    _, without = run(tmp_path / "off", method, BASE)
    plan, outcome = run(tmp_path / "on", method, with_curve(BASE))
    assert same_numbers(without.rows, outcome.rows)
    curve = curve_of(plan)
    ends = curve[curve["at"] == END]
    # the subset is every test image (eval_subset above the test size): the same images as the rows
    rows = {(r["stage"], r["task"], r["evaluation"]): (r["accuracy"], r["loss"]) for r in outcome.rows
            if r["split"] == "test"}
    assert len(ends) > 0 and set(ends["stage"]) == {1, 2, 3}
    for point in ends.itertuples():
        np.testing.assert_equal((point.accuracy, point.loss), rows[(point.stage, point.task, point.evaluation)])
    steps = curve[(curve["at"] == STEP) & (curve["task"] == 1) & (curve["evaluation"] == "task-aware")]["step"]
    assert steps.is_monotonic_increasing and steps.is_unique and (steps % 3 == 0).all()
    assert (len(steps) > 0) == (method != "random")  # random takes no optimiser step: its end points only
    during = curve[(curve["at"] == STEP) & (curve["task"] == curve["stage"])]
    assert (len(during) > 0) == (method not in ("random", "pathnet"))  # pathnet: no path before the task's end
    assert set(curve[curve["stage"] == 2]["task"]) == {1, 2}  # the learned tasks and the current one only
    batches = sum(r["stage_batches"] for r in outcome.rows if r["task"] == r["stage"] and r["split"] == "test"
                  and r["evaluation"] == "task-aware")
    assert curve["step"].max() == batches  # every optimiser step counted once


def test_eval_every_off_leaves_the_config_hash_and_the_reference_hash_alone(tmp_path: Path) -> None:
    [off] = plan_runs(BASE, ["sgd"], [0], tmp_path)
    [on] = plan_runs(with_curve(BASE), ["sgd"], [0], tmp_path)
    [default] = plan_runs(replace(BASE, training=replace(BASE.training, eval_every=0)), ["sgd"], [0], tmp_path)
    [subset_only] = plan_runs(replace(BASE, training=replace(BASE.training, eval_subset=7)), ["sgd"], [0], tmp_path)
    assert default.config_hash == off.config_hash == subset_only.config_hash  # eval_subset alone does nothing
    assert "eval_every" not in off.config["training"]
    assert on.config_hash != off.config_hash  # another run (its own folder) ...
    assert on.reference_hash == off.reference_hash  # ... measured against the same joint reference


def test_a_stopped_run_resumes_the_curve_bit_for_bit(tmp_path: Path) -> None:
    spec = with_curve(BASE, every=2)
    reference_plan, _ = run(tmp_path / "reference", "er", spec)
    with pytest.raises(Stop):
        run(tmp_path / "stopped", "er", spec, observer=StopInTask2())
    torch.rand(1000)
    plan, resumed = run(tmp_path / "stopped", "er", spec)
    assert resumed.resumed_after_stage == 1
    pd.testing.assert_frame_equal(curve_of(plan), curve_of(reference_plan))


def test_the_subset_is_seeded_sorted_and_whole_when_small() -> None:
    first = subset_indices(100, 10, torch.Generator().manual_seed(1))
    assert first.tolist() == sorted(set(first.tolist())) and len(first) == 10
    assert torch.equal(first, subset_indices(100, 10, torch.Generator().manual_seed(1)))
    assert not torch.equal(first, subset_indices(100, 10, torch.Generator().manual_seed(2)))
    assert subset_indices(5, 10, torch.Generator()).tolist() == [0, 1, 2, 3, 4]
