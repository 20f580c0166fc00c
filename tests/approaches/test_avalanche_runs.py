"""Avalanche's strategies run under clbench's protocol on the tiny synthetic benchmark: every runnable `av-*` in the
scenarios it allows (refused where it does not), a full accuracy matrix, Avalanche's version in the rows'
provenance, resumed after a finished task with the uninterrupted numbers, early stopping and the step hook inside
Avalanche's loop, and `report --summary` over the results. Skipped without avalanche-lib (`pip install -e
".[avalanche]"`; CI does not install it yet: issue 59)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from clihelpers import flat, kept_registry
from stopping import Stop, StopInTask2, same_numbers
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches.avalanche import STRATEGIES
from clbench.data.tasks import build_tasks
from clbench.errors import SpecError
from clbench.run.engine import execute
from clbench.run.plan import plan_runs


def av_class(name: str):  # type: ignore[no-untyped-def]
    """An av-* class without registering it (the registry stays as other test files count it)."""
    module, _, attribute = STRATEGIES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)

pytest.importorskip("avalanche.training")

CPU = torch.device("cpu")
RUNNABLE = sorted(name for name in STRATEGIES if not av_class(name).refusal)
DOMAIN_ONLY = sorted(name for name in RUNNABLE if av_class(name).class_scenario_refusal)
CLASS_ONLY = sorted(name for name in RUNNABLE if av_class(name).task_scenario_refusal and name not in DOMAIN_ONLY)
# Settings that keep the tiny runs short: BiC's second stage is 200 epochs by default, MER 5 inner steps per sample.
SHORT = {"av-bic": {"stage_2_epochs": 2}, "av-mer": {"n_inner_steps": 1}, "av-icarl": {"memory_size": 60}}


def spec_for(method: str, scenario: str, **training: object):  # type: ignore[no-untyped-def]
    protocol = replace(TINY_TRAINING, **{"max_epochs": 2, "class_loss": "all" if scenario == "class" else "seen",
                                         **training})
    kind = "permuted" if scenario == "domain" else "split"  # the domain scenario needs tasks of equal classes
    spec = tiny_spec("mlp", kind=kind, scenario=scenario, training=protocol)
    return replace(spec, approaches={method: SHORT[method]}) if method in SHORT else spec


def run(results: Path, method: str, spec, observer=None):  # type: ignore[no-untyped-def]
    [plan] = plan_runs(spec, [method], [0], results)
    return execute(plan, device=CPU, loader=synthetic_loader(), observer=observer)


def full_matrix(rows: list[dict]) -> bool:
    """Every (stage >= 1, task <= stage) test cell present with a finite accuracy."""
    cells = {(row["stage"], row["task"]): row["accuracy"] for row in rows
             if row["split"] == "test" and row["evaluation"] == "task-aware"}
    return all(math.isfinite(cells.get((stage, task), math.nan)) for stage in (1, 2, 3) for task in range(1, stage + 1))


@pytest.fixture(autouse=True)
def registry():  # type: ignore[no-untyped-def]
    with kept_registry():  # the av-* classes loaded here are not left for the tests that count the registry
        yield


class VerboseMultiStepLR(torch.optim.lr_scheduler.MultiStepLR):
    """torch's MultiStepLR with the `verbose` argument that avalanche-lib 0.6.0's BiC passes (plugins/bic.py:383),
    as torch's took it before its removal: av-bic's adaptation is tested whatever torch is installed."""

    def __init__(self, *args, verbose: bool = False, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)


class TerseMultiStepLR(torch.optim.lr_scheduler.MultiStepLR):
    """torch's MultiStepLR as torch 2.14's: no `verbose` argument."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1) -> None:  # type: ignore[no-untyped-def]
        super().__init__(optimizer, milestones, gamma, last_epoch)


def installed_scheduler(monkeypatch, scheduler: type) -> None:  # type: ignore[no-untyped-def]
    import avalanche.training.plugins.bic as bic

    monkeypatch.setattr(torch.optim.lr_scheduler, "MultiStepLR", scheduler)
    monkeypatch.setattr(bic, "MultiStepLR", scheduler)


@pytest.mark.parametrize("method", [name for name in RUNNABLE if not av_class(name).not_resumable])
def test_every_runnable_strategy_resumes_with_the_uninterrupted_numbers(method: str, tmp_path: Path,
                                                                        monkeypatch) -> None:
    if method == "av-gem" and importlib.util.find_spec("quadprog") is None:
        pytest.skip("av-gem needs quadprog (refused without it: test_gem_without_quadprog_is_refused)")
    if method == "av-bic":  # refused where torch's MultiStepLR has no verbose: test_bic_s_scheduler_...
        installed_scheduler(monkeypatch, VerboseMultiStepLR)
    scenario = "domain" if method in DOMAIN_ONLY else "class" if method in CLASS_ONLY else "task"
    spec = spec_for(method, scenario, max_epochs=3)
    reference = run(tmp_path / "reference", method, spec)
    assert full_matrix(reference.rows)
    origin = json.loads(reference.rows[0]["approach_origin"])
    assert origin["library"] == "avalanche-lib" and origin["library_version"].startswith("0.6")
    assert origin["strategy"] == f"avalanche.training.{av_class(method).strategy_class}"
    with pytest.raises(Stop):
        run(tmp_path / "stopped", method, spec, observer=StopInTask2())
    torch.rand(1000)  # whatever the process did meanwhile must not matter
    resumed = run(tmp_path / "stopped", method, spec)
    assert resumed.resumed_after_stage == 1
    assert same_numbers(reference.rows, resumed.rows)


@pytest.mark.parametrize("method", sorted(name for name in RUNNABLE if av_class(name).not_resumable))
def test_a_strategy_that_cannot_resume_says_so(method: str, tmp_path: Path) -> None:
    spec = spec_for(method, "class", max_epochs=3)
    with pytest.raises(Stop):
        run(tmp_path, method, spec, observer=StopInTask2())
    with pytest.raises(SpecError, match=f"approach {method} cannot resume from its checkpoint: .* --force"):
        run(tmp_path, method, spec)


@pytest.mark.parametrize("method", ["av-naive", "av-replay", "av-ewc", "av-agem"])
def test_the_class_scenario_trains_over_every_class(method: str, tmp_path: Path) -> None:
    outcome = run(tmp_path, method, spec_for(method, "class"))
    assert full_matrix(outcome.rows)
    agnostic = [row for row in outcome.rows if row["evaluation"] == "task-agnostic" and row["split"] == "test"]
    assert agnostic and all(row["scenario"] == "class" for row in agnostic)


@pytest.mark.parametrize("method", CLASS_ONLY)
def test_class_incremental_strategies_are_refused_in_the_task_scenario(method: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=f"approach {method}: .* does not run with data.scenario=task"):
        run(tmp_path, method, spec_for(method, "task"))


@pytest.mark.parametrize("method", DOMAIN_ONLY)
@pytest.mark.parametrize("scenario", ["task", "class"])
def test_domain_incremental_strategies_are_refused_in_the_other_scenarios(method: str, scenario: str,
                                                                          tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=f"approach {method}: .* does not run with data.scenario={scenario}: .*"
                                        "use data.scenario=domain"):
        run(tmp_path, method, spec_for(method, scenario))


def test_lfl_reads_the_body_s_features_and_freezes_the_shared_head(tmp_path: Path) -> None:
    """av-lfl's network (the domain scenario's): LFL's `get_last_fc_layer` finds the one shared head, not a body
    layer, and `get_features` is the body's output; trained, the head stays as the first experience left it."""
    from avalanche.training.utils import get_last_fc_layer

    from clbench.approaches.avalanche import bridge
    from clbench.nets.mlp import MLP

    network = MLP(784, [6, 5], [3, 3, 3])
    network.tie_heads()
    model = bridge.SharedHeadWithFeatures(network)
    name, layer = get_last_fc_layer(model)
    assert layer is network.heads[0] and name.endswith("heads.0")
    x = torch.randn(4, 1, 28, 28)
    assert torch.equal(model.get_features(x), network.features(x))
    assert torch.equal(model(x), network.heads[0](network.features(x)))


def test_gem_without_quadprog_is_refused(tmp_path: Path, monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "quadprog" else real(name, *a))
    with pytest.raises(SpecError, match="approach av-gem: GEM solves a quadratic programme with quadprog"):
        run(tmp_path, "av-gem", spec_for("av-gem", "task"))


def test_bic_s_scheduler_without_torch_s_verbose_is_refused(tmp_path: Path, monkeypatch) -> None:
    installed_scheduler(monkeypatch, TerseMultiStepLR)
    with pytest.raises(SpecError, match=r"approach av-bic: BiC cannot run here: .*plugins/bic.py:383-385"):
        run(tmp_path, "av-bic", spec_for("av-bic", "class"))
    assert not (tmp_path / "tiny").exists()


def test_bic_trains_on_a_copy_of_the_experience_whose_dataset_it_reassigns(tmp_path: Path, monkeypatch) -> None:
    """BiC's plugin replaces the experience's dataset by all but its held-out share (plugins/bic.py:173): the copy
    it trains on shrinks, the stream's experience keeps the task's whole training set."""
    installed_scheduler(monkeypatch, VerboseMultiStepLR)
    bic = av_class("av-bic")
    original = bic.training_experience
    trained: list = []

    def recording(self, experience):  # type: ignore[no-untyped-def]
        copy = original(self, experience)
        trained.append((experience, len(experience.dataset), copy))
        return copy

    monkeypatch.setattr(bic, "training_experience", recording)
    outcome = run(tmp_path, "av-bic", spec_for("av-bic", "class"))
    assert full_matrix(outcome.rows) and len(trained) == 3
    for experience, size, copy in trained:
        assert len(experience.dataset) == size and 0 < len(copy.dataset) < size


def test_the_class_scenario_s_seen_loss_is_refused(tmp_path: Path) -> None:
    spec = replace(spec_for("av-naive", "class"), training=replace(TINY_TRAINING, class_loss="seen"))
    with pytest.raises(SpecError, match="training.class_loss=all"):
        run(tmp_path, "av-naive", spec)


def test_early_stopping_ends_avalanche_s_loop_on_the_best_validation_weights(tmp_path: Path, monkeypatch) -> None:
    """Validation losses 1, 2, 3, ... (by hand): epoch 1 is the best, patience 2 runs out after epoch 3, the lr
    divided by 3 falls below lr_min: Avalanche's 20 epochs stop after 3, on the weights of epoch 1."""
    from clbench.approaches.avalanche.adapter import AvalancheApproach
    from clbench.approaches.datatypes import Evaluation
    from clbench.run.engine import build_approach

    spec = spec_for("av-naive", "task", max_epochs=20, patience=2, lr=0.05, lr_min=0.02)
    [plan] = plan_runs(spec, ["av-naive"], [0], tmp_path)
    tasks = build_tasks(spec.data, 0, synthetic_loader(), CPU)
    approach = build_approach(plan, tasks, CPU)
    weights: list[dict] = []

    def validation(self, data, stage):  # type: ignore[no-untyped-def]
        weights.append(self.snapshot())
        return Evaluation(float(len(weights)), 0.5, 1)

    monkeypatch.setattr(AvalancheApproach, "evaluate_validation", validation)
    log = approach.learn_task(0, tasks)
    assert (log.epochs, log.best_epoch, len(weights)) == (3, 1, 3)
    assert not torch.equal(weights[0]["network.layers.0.weight"], weights[2]["network.layers.0.weight"])
    final = approach.snapshot()
    assert all(torch.equal(final[key], weights[0][key]) for key in final)


def test_the_step_hook_sees_every_optimiser_step(tmp_path: Path) -> None:
    """`training.eval_every` evaluates inside Avalanche's loop: a point every 2 steps."""
    spec = spec_for("av-naive", "task", eval_every=2, early_stopping=False)
    outcome = run(tmp_path, "av-naive", spec)
    curve = pd.read_parquet(outcome.plan.run_dir / "curve.parquet")
    steps = sum({row["stage"]: row["stage_batches"] for row in outcome.rows if row["stage"] >= 1}.values())
    tasks = build_tasks(spec.data, 0, synthetic_loader(), CPU)
    assert steps == sum(2 * math.ceil(len(task.train) / 32) for task in tasks)  # 2 epochs of batch 32
    assert set(curve.loc[curve["at"] == "step", "step"]) == set(range(2, steps + 1, 2))


def test_report_summary_over_av_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from clbench.cli import app

    for method in ("av-naive", "av-replay"):
        run(tmp_path, method, spec_for(method, "class"))
    result = CliRunner().invoke(app, ["report", "tiny", "--results", str(tmp_path), "--summary", "--evaluation",
                                      "task-agnostic"])
    assert result.exit_code == 0, result.output
    assert "av-naive" in flat(result.output) and "av-replay" in flat(result.output)


@pytest.mark.parametrize("method", ["av-naive", "av-replay"])
def test_every_iteration_of_avalanche_s_loop_is_a_sampled_step(method: str, tmp_path: Path, monkeypatch) -> None:
    """Each iteration of Avalanche's loop goes through `FlopLedger.sampled` (counted in full only its first steps,
    as clbench's own steps are), and the stored training FLOPs are those of counting every step in full."""
    from clbench.approaches import flops as flops_module
    from clbench.approaches.avalanche.bridge import AVALANCHE_STEP

    kinds: list[str] = []
    original = flops_module.FlopLedger.sampled

    def spy(self, kind, size=None):  # type: ignore[no-untyped-def]
        kinds.append(kind)
        return original(self, kind, size)

    spec = spec_for(method, "class")
    monkeypatch.setattr(flops_module.FlopLedger, "sampled", spy)
    sampled = run(tmp_path / "sampled", method, spec)
    first = {row["stage"]: row for row in sampled.rows if row["stage_batches"] is not None}  # trained stages
    assert kinds.count(AVALANCHE_STEP) == sum(int(row["stage_batches"]) for row in first.values()) > 3 * len(first)
    monkeypatch.setattr(flops_module, "MEASURED_STEPS", 10**9)  # every step counted in full
    every = {row["stage"]: row for row in run(tmp_path / "every", method, spec).rows
             if row["stage_batches"] is not None}
    assert every.keys() == first.keys() == {1, 2, 3}
    assert all(first[stage]["stage_train_flops"] == every[stage]["stage_train_flops"] > 0 for stage in every)
