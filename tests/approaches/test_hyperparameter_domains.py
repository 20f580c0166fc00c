"""Every field of every registered approach, drawn valid, at its edges and invalid (hypothesis), from the domain its
field declares (`clbench.spec.fields.field`): an invalid value is refused by `clbench train` in one line naming the
key, exit 2, before any run folder is made; a valid one is refused the same way (by the approach's
`hyperparameter_problem` hook: against the other fields or the benchmark) or trains a tiny two-task benchmark to the
end, with finite losses and accuracies in [0, 1]. The strategies are derived from the field metadata, so a new
approach or field is drawn without an edit here. The fast suite draws a few values per approach; `-m slow` draws more.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from clihelpers import TINY, flat, offline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import SHORT_SETTINGS, TINY_TRAINING, synthetic_loader, tiny_spec
from typer.testing import CliRunner

from clbench.approaches.refusals import scenario_refusal
from clbench.approaches.registry import REGISTRY
from clbench.cli import app
from clbench.errors import SpecError
from clbench.run.engine import RunStatus, execute
from clbench.run.plan import plan_runs

METHODS = sorted(REGISTRY)
# Valid integers are drawn from their lowest allowed value up to this many above it (and the default, when below
# the cap): an epoch count or a memory of a billion is valid but not a unit test's run; `memory_problem` refuses
# the sizes that cannot be allocated (tested by hand in test_hyperparameter_checks.py).
INT_SPAN = 12
ONE_STEP = replace(TINY_TRAINING, max_epochs=1, batch_size=16, patience=1)
NO_LOSS = {"random"}  # the random classifier stores no loss (NaN: random_classifier.py `evaluate`)


def domain(method: str) -> list[tuple[str, Any, dict[str, Any], Any]]:
    """(name, type hint, metadata, default) of each field of `method`'s hyper-parameters."""
    cls = REGISTRY[method].hyperparameters_class
    hints = typing.get_type_hints(cls)
    return [(f.name, hints[f.name], dict(f.metadata), f.default) for f in dataclasses.fields(cls)]


def _bounds(metadata: dict[str, Any], integer: bool) -> tuple[float, float]:
    low, high = metadata.get("minimum"), metadata.get("maximum")
    above, below = metadata.get("above"), metadata.get("below")
    step = 1 if integer else 0
    low = max(x for x in (low, None if above is None else above + step, -1e3) if x is not None) if (
        low is not None or above is not None) else 0.0
    high = min(x for x in (high, None if below is None else below - step) if x is not None) if (
        high is not None or below is not None) else math.inf
    return low, high


def number_values(hint: Any, metadata: dict[str, Any], default: Any, valid: bool) -> st.SearchStrategy:
    """Numbers of a field (or of a list's items): inside its range, at its edges and special values; or outside."""
    integer = hint is int
    low, high = _bounds(metadata, integer)
    special = list(metadata.get("special") or {})
    if valid:
        if integer:
            top = int(min(high, low + INT_SPAN))
            edges = [int(low)] + ([int(high)] if high <= top else []) + (
                [default] if isinstance(default, int) and low <= default <= top else [])
            return st.one_of(st.integers(int(low), top), st.sampled_from(edges + special))
        top = high if math.isfinite(high) else max(10.0 * abs(default) if isinstance(default, float) else 10.0,
                                                   low + 10.0)
        inside = st.floats(low, top, exclude_min=metadata.get("above") is not None,
                           exclude_max=metadata.get("below") is not None, allow_nan=False)
        edges = [x for x in (metadata.get("minimum"), metadata.get("maximum")) if x is not None]
        return st.one_of(inside, st.sampled_from(edges + special)) if edges + special else inside
    outside: list[Any] = []
    for name, off in (("minimum", -1), ("maximum", 1)):
        if metadata.get(name) is not None:
            outside.append(metadata[name] + off)
    for name in ("above", "below"):
        if metadata.get(name) is not None:
            outside.append(metadata[name])
    outside = [value for value in outside if value not in special]
    wrong_type = ["many", True] + ([1.5] if integer else [])
    return st.sampled_from(outside + wrong_type)


def values(hint: Any, metadata: dict[str, Any], default: Any, valid: bool) -> st.SearchStrategy:
    """Valid (inside the declared domain, its edges included) or invalid values of one field, as YAML reads them."""
    if typing.get_origin(hint) is tuple:
        item_hint = typing.get_args(hint)[0]
        fewest = metadata.get("min_items") or 0
        if valid:
            return st.lists(number_values(item_hint, metadata, None, True), min_size=fewest, max_size=4)
        bad_items = st.lists(number_values(item_hint, metadata, None, False), min_size=1, max_size=3)
        return st.one_of(bad_items, st.just([])) if fewest else bad_items
    if metadata.get("choices") is not None:
        return st.sampled_from(metadata["choices"]) if valid else st.sampled_from(["nosuch", 3])
    if hint is bool:
        return st.booleans() if valid else st.sampled_from([1, "yes please"])
    if hint in (int, float):
        return number_values(hint, metadata, default, valid)
    raise AssertionError(f"no strategy for a field of type {hint!r}: add one here")


def draws(method: str, valid: bool) -> st.SearchStrategy:
    """(key, value) of one field of `method`, valid or invalid."""
    fields = domain(method)
    return st.sampled_from(fields).flatmap(
        lambda entry: st.tuples(st.just(entry[0]), values(entry[1], entry[2], entry[3], valid)))


def runnable_scenarios(method: str) -> list[str]:
    return [scenario for scenario in ("task", "class") if scenario_refusal(REGISTRY[method], scenario) is None]


def check_refused_before_any_work(method: str, key: str, value: Any) -> None:
    """`clbench train mnist2 -m METHOD --set METHOD.KEY=VALUE`: exit 2, one line naming the key, nothing written."""
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results"
        option = f"{method}.{key}={json.dumps(value)}"
        result = CliRunner().invoke(app, ["train", "mnist2", "-m", method, "--seeds", "0", "--results", str(results),
                                          "--set", option, *offline(Path(folder)), *TINY])
        output = result.output.strip()
        assert result.exit_code == 2, (option, output)
        assert f"approaches.{method}.{key}" in flat(output), (option, output)
        assert "Traceback" not in output and not results.exists(), (option, output)


def check_trains_or_is_refused(method: str, key: str, value: Any, scenario: str) -> None:
    """A valid value: refused in one line naming the key before any run starts, or a tiny run to the end with finite
    losses and accuracies in [0, 1]."""
    spec = tiny_spec("mlp", n_tasks=2, training=ONE_STEP, scenario=scenario)
    section = {**SHORT_SETTINGS.get(method, {}), key: value}
    spec = replace(spec, approaches={method: section},
                   origins={f"approaches.{method}.{key}": f"--set {method}.{key}={json.dumps(value)}"})
    with tempfile.TemporaryDirectory() as folder:
        try:
            [plan] = plan_runs(spec, [method], [0], Path(folder))
        except SpecError as refused:
            message = str(refused)
            assert "\n" not in message and f"approaches.{method}." in message, message
            assert not any(Path(folder).iterdir()), message
            return
        outcome = execute(plan, device=torch.device("cpu"), loader=synthetic_loader(n_train=48, n_test=24))
    assert outcome.status == RunStatus.DONE, (key, value, outcome.error)
    rows = pd.DataFrame(outcome.rows)
    assert rows["accuracy"].between(0.0, 1.0).all(), (key, value)
    if method not in NO_LOSS:
        assert rows["loss"].map(math.isfinite).all(), (key, value, rows["loss"].tolist())


def invalid_property(method: str, examples: int, fixed: bool = True):  # type: ignore[no-untyped-def]
    """The fast suite's draws are fixed (`derandomize`: the same values every run); the slow ones vary."""
    @settings(max_examples=examples, deadline=None, derandomize=fixed, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(draw=draws(method, valid=False))
    def check(draw: tuple[str, Any]) -> None:
        check_refused_before_any_work(method, *draw)

    return check


def valid_property(method: str, examples: int, fixed: bool = True):  # type: ignore[no-untyped-def]
    @settings(max_examples=examples, deadline=None, derandomize=fixed, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(draw=draws(method, valid=True), scenario=st.sampled_from(runnable_scenarios(method)))
    def check(draw: tuple[str, Any], scenario: str) -> None:
        check_trains_or_is_refused(method, *draw, scenario)

    return check


@pytest.mark.parametrize("method", METHODS)
def test_an_invalid_value_is_refused_in_one_line_before_any_work(method: str) -> None:
    invalid_property(method, examples=3)()


@pytest.mark.parametrize("method", METHODS)
def test_a_valid_value_trains_with_finite_numbers_or_is_refused_in_one_line(method: str) -> None:
    valid_property(method, examples=2)()


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_many_invalid_values_are_refused(method: str) -> None:
    invalid_property(method, examples=40, fixed=False)()


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_many_valid_values_train_or_are_refused(method: str) -> None:
    valid_property(method, examples=25, fixed=False)()
