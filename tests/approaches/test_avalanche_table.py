"""Avalanche's strategies as `av-*` methods: listed without Avalanche, refused without it in one line that names the
extra, and (when avalanche-lib is installed) every hyper-parameter's name and default checked against the
installed strategy's signature, every strategy of `avalanche.training` listed."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest
from clihelpers import invoke_fresh, kept_registry, offline
from importchecks import loaded_modules

import clbench.approaches.avalanche as avalanche_package
from clbench.approaches.avalanche import STRATEGIES
from clbench.approaches.avalanche.adapter import AvalancheApproach
from clbench.approaches.registry import approach_names, origin_of
from clbench.approaches.resolution import refusal
from clbench.spec import benchmarks_dir, load_benchmark


def av_class(name: str):  # type: ignore[no-untyped-def]
    """An av-* class without registering it (the registry stays as other test files count it)."""
    module, _, attribute = STRATEGIES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)

# Arguments every strategy takes that come from clbench's spec and loop, not hyper-parameters (the template's).
TEMPLATE = {"self", "model", "optimizer", "criterion", "train_mb_size", "train_epochs", "eval_mb_size", "device",
            "plugins", "evaluator", "eval_every", "peval_mode", "base_kwargs", "kwargs"}
# Per strategy: arguments the adapter gives from the spec or the network (not hyper-parameters), and ones it leaves
# at Avalanche's default because they are not hyper-parameters (MAS's `verbose` prints).
GIVEN = {"GSS_greedy": {"input_size"}, "CoPE": {"n_classes", "p_size"}, "MAS": {"verbose"},
         "ICaRL": {"feature_extractor", "classifier", "buffer_transform"}, "ER_AML": {"feature_extractor"}}


@pytest.fixture(autouse=True)
def registry():  # type: ignore[no-untyped-def]
    with kept_registry():  # the av-* classes a refusal loads are not left for the tests that count the registry
        yield


def runnable() -> list[str]:
    return sorted(name for name in STRATEGIES if not av_class(name).refusal)


def installed() -> bool:
    return importlib.util.find_spec("avalanche") is not None


def test_the_av_methods_are_listed_without_importing_avalanche() -> None:
    """With the extra, the runnable ones; without it, none (clbench lists what it lists without the extra)."""
    expected = runnable() if installed() else []
    code = ("from clbench.approaches.registry import approach_names\n"
            f"assert [n for n in approach_names() if n.startswith('av-')] == {expected!r}\n")
    assert loaded_modules(code, ["avalanche"]) == []


def test_names_follow_avalanche_s_class_names() -> None:
    assert len(STRATEGIES) == 34
    for name in STRATEGIES:
        cls = av_class(name)
        assert name == "av-" + cls.strategy_class.lower().replace("_", "-")
        assert f"avalanche.training.{cls.strategy_class}" in cls.summary  # `clbench list` shows the class


def test_without_avalanche_an_av_method_is_refused_in_one_line_naming_the_extra(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(avalanche_package, "avalanche_version", lambda: None)
    spec = load_benchmark("seq-mnist")
    found = refusal(spec, "av-naive")
    assert found is not None and found.key == "training"
    assert "optional extra `avalanche`" in found.reason and "clbench[avalanche]" in found.reason
    assert "\n" not in found.reason and found.reason.startswith("approach av-naive: ")
    assert not any(name.startswith("av-") for name in approach_names())  # clbench lists what it did before
    code, output = invoke_fresh("train", "seq-mnist", "-m", "av-naive", *offline(tmp_path),
                                "--results", str(tmp_path / "r"))
    assert (code, output) == (2, f"error: {benchmarks_dir() / 'seq-mnist.yaml'}: {found.reason}")
    assert not (tmp_path / "r").exists()
    code, output = invoke_fresh("list", "-b", "seq-mnist")
    assert code == 0 and "av-" not in output


def test_an_unsupported_avalanche_version_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(avalanche_package, "avalanche_version", lambda: "0.7.0")
    found = refusal(load_benchmark("seq-mnist"), "av-replay")
    assert found is not None and "avalanche-lib >=0.6,<0.7" in found.reason and "0.7.0" in found.reason


def test_strategies_that_cannot_run_here_are_refused_with_their_reason() -> None:
    spec = load_benchmark("seq-mnist")
    for name in ("av-ar1", "av-learningtoprompt", "av-generativereplay", "av-streaminglda"):
        found = refusal(spec, name)
        assert found is not None and av_class(name).refusal in found.reason, name
    assert "pre-trained" in av_class("av-ar1").refusal and "generator" in av_class("av-generativereplay").refusal


def test_rows_carry_avalanche_s_version_in_their_origin(monkeypatch) -> None:
    monkeypatch.setattr(avalanche_package, "avalanche_version", lambda: "0.6.0")
    from clbench.approaches.registry import lookup

    with kept_registry():
        lookup("av-replay")  # registered when a run names it
        assert origin_of("av-replay") == {"kind": "built-in", "module": "clbench.approaches.avalanche.strategies",
                                          "library": "avalanche-lib", "library_version": "0.6.0",
                                          "strategy": "avalanche.training.Replay"}


# ---------------------------------------------------------------------------------------------- with avalanche


@pytest.fixture(scope="module")
def training():  # type: ignore[no-untyped-def]
    return pytest.importorskip("avalanche.training")


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_hyperparameters_are_avalanche_s_signature(name: str, training) -> None:  # type: ignore[no-untyped-def]
    cls: type[AvalancheApproach] = av_class(name)  # type: ignore[assignment]
    strategy = getattr(training, cls.strategy_class)
    parameters = inspect.signature(strategy.__init__).parameters
    file, line = cls.signature.rsplit(":", 1)
    assert Path(inspect.getsourcefile(strategy)).as_posix().endswith(file)  # type: ignore[arg-type]
    assert inspect.getsourcelines(strategy.__init__)[1] == int(line)
    if cls.refusal:
        return
    fields = {f.name: f for f in dataclasses.fields(cls.hyperparameters_class) if f.name != "clip_grad_norm"}
    own = set(parameters) - TEMPLATE - GIVEN.get(cls.strategy_class, set())
    assert set(fields) == own, f"{name}: fields {sorted(fields)} != the signature's {sorted(own)}"
    for key, spec_field in fields.items():
        default = parameters[key].default
        if default is inspect.Parameter.empty:
            assert "required in Avalanche" in spec_field.metadata["doc"], key
        else:
            assert spec_field.default == default and type(spec_field.default) is type(default) or (
                isinstance(default, (int, float)) and float(spec_field.default) == float(default)), key


def test_clbench_list_shows_the_av_methods_with_their_class(training) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from clbench.cli import app

    with kept_registry():
        result = CliRunner().invoke(app, ["list", "-b", "seq-mnist", "--no-parameters"], env={"COLUMNS": "250"})
    code, output = result.exit_code, result.output
    assert code == 0, output
    for name in runnable():
        assert f"{name} " in output and f"avalanche.training.{av_class(name).strategy_class})" in output


def test_every_avalanche_strategy_is_listed(training) -> None:  # type: ignore[no-untyped-def]
    from avalanche.training.templates import BaseTemplate

    strategies = {name for name, value in vars(training).items()
                  if inspect.isclass(value) and issubclass(value, BaseTemplate)}
    assert strategies == {av_class(name).strategy_class for name in STRATEGIES}
