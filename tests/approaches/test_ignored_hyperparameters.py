"""A hyper-parameter an approach inherits but never reads (`Approach.ignores_hyperparameters`: iCaRL's, LUCIR's and
BiC's `replay_batch_size`, their exemplars joining the task's training data) changes none of its numbers, and an
option that sets it is said once and makes no new configuration (issue 59: found by the side-by-side of BiC and
Avalanche's, where `--set bic.replay_batch_size=10` had been set and did nothing)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
from synthetic import SHORT_SETTINGS, synthetic_loader, tiny_spec

from clbench.approaches.registry import REGISTRY
from clbench.approaches.resolution import protocol_notes, resolve
from clbench.run.engine import execute
from clbench.run.plan import plan_runs
from clbench.spec import load_benchmark

IGNORING = sorted(name for name, cls in REGISTRY.items() if cls.ignores_hyperparameters)


def test_the_approaches_that_join_their_exemplars_declare_the_replay_batch_ignored() -> None:
    assert IGNORING == ["bic", "icarl", "lucir"]
    assert all(REGISTRY[name].ignores_hyperparameters == ("replay_batch_size",) for name in IGNORING)


@pytest.mark.parametrize("scenario", ["task", "class"])
@pytest.mark.parametrize("method", IGNORING)
def test_a_declared_ignored_hyperparameter_changes_none_of_the_numbers(method: str, scenario: str,
                                                                       tmp_path: Path) -> None:
    """Trained with the declared keys changed (past the resolution that holds them), the rows are bit-identical."""
    spec = dataclasses.replace(tiny_spec(scenario=scenario), approaches={method: dict(SHORT_SETTINGS.get(method, {}))})
    [plan] = plan_runs(spec, [method], [0], tmp_path / "plain")
    hyperparameters = plan.approach.hyperparameters
    changed = {key: getattr(hyperparameters, key) * 2 + 1 for key in REGISTRY[method].ignores_hyperparameters}
    other = dataclasses.replace(plan, approach=dataclasses.replace(
        plan.approach, hyperparameters=dataclasses.replace(hyperparameters, **changed)), run_dir=tmp_path / "other")
    rows = []
    for each in (plan, other):
        outcome = execute(each, device=torch.device("cpu"), loader=synthetic_loader())
        assert outcome.succeeded, outcome
        rows.append(pd.read_parquet(each.run_dir / "accuracy.parquet")[["stage", "task", "evaluation", "accuracy"]])
    assert len(rows[0]) > 0
    pd.testing.assert_frame_equal(rows[0], rows[1])


@pytest.mark.parametrize("method", IGNORING)
def test_an_option_setting_it_is_said_and_resolves_to_the_runs_without_it(method: str) -> None:
    plain = resolve(load_benchmark("seq-mnist"), method)
    key = REGISTRY[method].ignores_hyperparameters[0]
    option = f"{method}.{key}={getattr(plain.hyperparameters, key) + 5}"
    spec = load_benchmark("seq-mnist", [option])
    assert resolve(spec, method).config() == plain.config()  # the same config hash: stored runs are found
    [note] = protocol_notes(spec, method)
    assert f"`--set {option}` has no effect on {method}" in note and "the same config hash" in note
    # the spec's own value stands (seq-mnist writes icarl's replay_batch_size: 10), not the class default
    assert getattr(resolve(spec, method).hyperparameters, key) == getattr(plain.hyperparameters, key)


def test_a_method_that_replays_per_step_takes_the_option_as_a_new_configuration() -> None:
    plain = resolve(load_benchmark("seq-mnist"), "er")
    spec = load_benchmark("seq-mnist", ["er.replay_batch_size=7", "bic.replay_batch_size=7"])
    assert resolve(spec, "er").hyperparameters.replay_batch_size == 7
    assert resolve(spec, "er").config() != plain.config() and protocol_notes(spec, "er") == []
