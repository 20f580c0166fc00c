"""Global training options mean what they say (issue 58, item 3): a `--set training.KEY=...` applies to the methods
asked where it can; where a method's own `training:` section overrides it, or the method ignores the key, it is
said for that method with the value it trains with; only a method asked is refused, never for another section of
the spec; row labels show the values the runs used; an option a method ignores makes no new configuration.

The walk over every shipped spec x every global training option is generated from `TrainingSpec`'s fields (each
choice, the other boolean, a number inside its range) and the approach registry, not listed by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from clihelpers import TINY, flat
from clioutputs import assert_exit
from filebuilders import write_block_arrays
from typer.testing import CliRunner

from clbench.approaches.registry import REGISTRY, approach_names
from clbench.approaches.resolution import protocol, protocol_notes, refusal, resolve
from clbench.cli import app
from clbench.errors import SpecError
from clbench.report.loading import load_results
from clbench.results import RUN_FILE
from clbench.spec import BenchmarkSpec, TrainingSpec, benchmark_names, load_benchmark

runner = CliRunner()
SPEC = """\
name: tiny-options
datasets:
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: split, datasets: [my-arrays], classes_per_task: [2], form: mnist28}
network: {kind: mlp, hidden: [8]}
approaches:
  sgd: {training: {lr: 0.0001}}
  wsn: {training: {optimizer: adam, lr: 0.001}}
  gdumb: {buffer_size: 8, fitting_epochs: 2}
"""


def other_values(spec_field: dataclasses.Field) -> list[Any]:
    """Valid values other than the default of one `TrainingSpec` field: every other choice, the other boolean, or
    a number inside the field's range."""
    default, metadata = spec_field.default, spec_field.metadata
    if metadata.get("choices"):
        return [choice for choice in metadata["choices"] if choice != default]
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default * 2 if default else 1]
    maximum = metadata.get("maximum")
    value = default * 2 if default else 0.5
    return [value if maximum is None or value <= maximum else maximum / 2]


def as_text(value: Any) -> str:
    """A value as `--set` takes it."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


GLOBAL_OPTIONS = [[f"training.{spec_field.name}={as_text(value)}"] for spec_field in dataclasses.fields(TrainingSpec)
                  for value in other_values(spec_field)]
# momentum with each optimizer that has one (with adam, the user's own options contradict: refused at load)
GLOBAL_OPTIONS += [[f"training.optimizer={name}", "training.momentum=0.9"] for name in ("sgd", "rmsprop")]


def spec_file(tmp_path: Path) -> Path:
    write_block_arrays(tmp_path / "arrays.npz")
    (tmp_path / "tiny.yaml").write_text(SPEC)
    return tmp_path / "tiny.yaml"


def train(spec: Path, tmp_path: Path, *arguments: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["train", str(spec), "--results", str(tmp_path / "results"), "--data-dir",
                               str(tmp_path / "data"), *TINY, *arguments])


def stored_training(results: Path, method: str) -> list[dict]:
    """The resolved protocol in each run.json of `method` (as stored: `added` keys at their default left out)."""
    return [json.loads(path.read_text())["config"]["training"]
            for path in sorted(results.glob(f"tiny-options/{method}/*/seed-*/{RUN_FILE}"))]


def refusal_text(spec: BenchmarkSpec, method: str) -> str | None:
    """Why `method` cannot run `spec` when asked (its section, body, scenario or protocol), or None."""
    try:
        refused = refusal(spec, method)
    except SpecError as error:
        return str(error)
    return None if refused is None else refused.message(spec.source, spec.origins)


@pytest.mark.parametrize("benchmark", benchmark_names())
def test_every_global_option_applies_or_is_said_and_refuses_only_the_method_asked(benchmark: str) -> None:
    plain = load_benchmark(benchmark)
    before = {method: refusal_text(plain, method) for method in approach_names()}
    for options in GLOBAL_OPTIONS:
        spec = load_benchmark(benchmark, options)
        try:  # every other section built, none asked: none refuses sgd; an option may, naming itself
            resolve(spec, "sgd", check_grids=False)
        except SpecError as error:  # training.realtime=true on a benchmark without the online protocol's one pass
            assert any(f"--set {option}" in str(error) for option in options), (benchmark, options, str(error))
        for method in approach_names():
            refused = refusal_text(spec, method)
            # a refusal the option makes names the option, and no other method's section
            assert refused == before[method] or any(f"--set {option}" in refused for option in options), (
                benchmark, method, options, refused)
            assert not [name for name in spec.approaches if name != method and f"approaches.{name}." in
                        (refused or "")], (benchmark, options, refused)
            named = [option for option in options if f"--set {option}" in (refused or "")]
            assert all(option.partition("=")[0] in (refused or "").split(": ", 1)[-1] for option in named), (
                benchmark, method, options, refused)  # an option named where its key is the reason
            if refused is not None:
                continue
            notes = " ".join(protocol_notes(spec, method))
            effective = protocol(spec, method)
            for option in options:
                key = option.partition("=")[0].removeprefix("training.")
                assert getattr(effective, key) == getattr(spec.training, key) or f"--set {option}" in notes, (
                    benchmark, method, options, getattr(effective, key))


def test_momentum_with_adam_from_the_options_alone_is_refused_in_one_line(tmp_path: Path) -> None:
    result = train(spec_file(tmp_path), tmp_path, "-m", "sgd", "--set", "training.optimizer=adam", "--set",
                   "training.momentum=0.9")
    assert_exit(result, 2)
    assert "--set training.momentum=0.9" in flat(result.output)
    assert not (tmp_path / "results").exists()
    # the file's momentum, the option's adam: the option is named, not the file to edit
    (tmp_path / "tiny.yaml").write_text(SPEC.replace("network:", "training: {momentum: 0.9}\nnetwork:"))
    result = train(tmp_path / "tiny.yaml", tmp_path, "-m", "sgd", "--set", "training.optimizer=adam")
    assert_exit(result, 2)
    assert flat(result.output).startswith("error: --set training.optimizer=adam:")


def test_a_global_momentum_trains_the_method_asked_and_not_another_sections_optimizer(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    results = tmp_path / "results"
    assert_exit(train(spec, tmp_path, "-m", "sgd", "--set", "training.momentum=0.9"), 0)
    [sgd] = stored_training(results, "sgd")
    assert sgd["momentum"] == 0.9 and sgd["lr"] == 0.0001  # its own section's lr, the global momentum
    # wsn asked: its own section's Adam has no momentum; it trains with none, and says so
    assert_exit(train(spec, tmp_path, "-m", "wsn", "--set", "training.momentum=0.9"), 0)
    [wsn] = stored_training(results, "wsn")
    assert wsn["optimizer"] == "adam" and "momentum" not in wsn  # momentum at its default 0, left out
    notes = protocol_notes(load_benchmark(str(spec), ["training.momentum=0.9"]), "wsn")
    assert len(notes) == 1 and "--set training.momentum=0.9" in notes[0] and "momentum=0.0" in notes[0]


def test_a_contradiction_in_a_methods_own_section_refuses_that_method_only(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    own = ["--set", "wsn.training.momentum=0.9"]
    result = train(spec, tmp_path, "-m", "wsn", *own)
    assert_exit(result, 2)
    assert "approaches.wsn.training.momentum" in flat(result.output) and "--set wsn.training.momentum=0.9" in flat(
        result.output)
    assert not list((tmp_path / "results").glob("tiny-options/*"))
    assert_exit(train(spec, tmp_path, "-m", "sgd", *own), 0)  # wsn not asked
    assert len(stored_training(tmp_path / "results", "sgd")) == 1


def test_row_labels_show_the_values_the_runs_used(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    # sgd's own section sets lr 0.0001: the global lr of the first command does not reach it
    assert_exit(train(spec, tmp_path, "-m", "sgd", "--set", "training.lr=0.001", "--set", "network.hidden=[8]"), 0)
    assert_exit(train(spec, tmp_path, "-m", "sgd", "--set", "network.hidden=[6]"), 0)
    runs = load_results(tmp_path / "results", "tiny-options").runs
    assert sorted(runs["label"]) == ["sgd (network.hidden=[6])", "sgd (network.hidden=[8])"]


def test_an_option_gdumb_ignores_is_said_and_makes_no_new_configuration(tmp_path: Path) -> None:
    spec = spec_file(tmp_path)
    assert_exit(train(spec, tmp_path, "-m", "gdumb"), 0)
    result = train(spec, tmp_path, "-m", "gdumb", "--set", "training.optimizer=adam", "--set", "training.lr=0.3")
    assert_exit(result, 0)
    assert len(list((tmp_path / "results").glob("tiny-options/gdumb/*"))) == 1  # one config, its run reused
    notes = protocol_notes(load_benchmark(str(spec), [*TINY[1:4:2], "training.optimizer=adam",
                                                       "training.lr=0.3"]), "gdumb")
    assert len(notes) == 1 and all(f"--set {option}" in notes[0] for option in (
        "training.optimizer=adam", "training.lr=0.3", "training.max_epochs=1"))


@pytest.mark.parametrize("method", sorted(name for name, cls in REGISTRY.items() if cls.ignores_training))
def test_the_training_keys_an_approach_declares_ignored_change_none_of_its_numbers(method: str,
                                                                                   tmp_path: Path) -> None:
    """Trained with every declared key changed (past the identity that hides them), the rows are bit-identical."""
    import torch
    from synthetic import SHORT_SETTINGS, synthetic_loader, tiny_spec

    from clbench.run.engine import execute
    from clbench.run.plan import plan_runs

    spec = dataclasses.replace(tiny_spec(), approaches={method: dict(SHORT_SETTINGS.get(method, {}))})
    [plan] = plan_runs(spec, [method], [0], tmp_path / "plain")
    changed = {spec_field.name: other_values(spec_field)[0] for spec_field in dataclasses.fields(TrainingSpec)
               if spec_field.name in REGISTRY[method].ignores_training}
    assert set(changed) == set(REGISTRY[method].ignores_training)
    other = dataclasses.replace(plan, approach=dataclasses.replace(
        plan.approach, training=dataclasses.replace(plan.approach.training, **changed)), run_dir=tmp_path / "other")
    assert other.approach.training != plan.approach.training
    rows = []
    for each in (plan, other):
        outcome = execute(each, device=torch.device("cpu"), loader=synthetic_loader())
        assert outcome.succeeded, outcome
        rows.append(pd.read_parquet(each.run_dir / "accuracy.parquet")[["stage", "task", "evaluation", "accuracy"]])
    pd.testing.assert_frame_equal(rows[0], rows[1])
