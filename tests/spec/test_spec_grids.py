"""A spec's default grids (`grids:`): read and validated with the spec, `--set`'s errors, no hash, `default_grid`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clbench.approaches.registry import REGISTRY, approach_names
from clbench.approaches.resolution import resolve
from clbench.errors import SpecError
from clbench.run.plan import plan_runs
from clbench.spec import benchmark_names, benchmarks_dir, check_approach_sections, load_benchmark
from clbench.spec.fields import build
from clbench.spec.grid import default_grid, default_grid_options, expand_grid, value_text
from clbench.spec.render import render_spec

SPEC = """
name: mini
data: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28}
network: {kind: mlp, hidden: [10]}
approaches:
  sgd: {}
  ewc: {lamb: 5000}
"""
GRIDS = """
grids:
  ewc:
    lamb: {values: [500, 1e-2, 5000], source: "a paper, Table 9"}
    training: {lr: [0.01, 0.05]}
  hat: {smax: [25, 400]}
"""


def spec_file(tmp_path: Path, text: str, name: str = "bench.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def error_of(benchmark: str, overrides: list[str], method: str = "ewc") -> str:
    with pytest.raises(SpecError) as error:
        resolve(load_benchmark(benchmark, overrides), method)
    return str(error.value)


def test_default_grid_is_in_the_form_of_grid_options(tmp_path: Path) -> None:
    spec = load_benchmark(spec_file(tmp_path, SPEC + GRIDS))
    assert default_grid(spec, "ewc") == {"ewc.lamb": ("500", "1e-2", "5000"), "ewc.training.lr": ("0.01", "0.05")}
    assert default_grid(spec, "hat") == {"hat.smax": ("25", "400")}
    assert default_grid(spec, "sgd") is None
    assert default_grid_options(spec, "ewc") == ["ewc.lamb=500,1e-2,5000", "ewc.training.lr=0.01,0.05"]
    assert default_grid_options(spec, "sgd") == []
    assert [axis.source for axis in spec.grids["ewc"]] == ["a paper, Table 9", ""]


def test_each_point_of_a_default_grid_resolves_to_its_values(tmp_path: Path) -> None:
    path = spec_file(tmp_path, SPEC + GRIDS)
    points = expand_grid(default_grid_options(load_benchmark(path), "ewc"))
    resolved = [resolve(load_benchmark(path, point), "ewc") for point in points]
    assert [(approach.hyperparameters.lamb, approach.training.lr) for approach in resolved] == [
        (500.0, 0.01), (500.0, 0.05), (0.01, 0.01), (0.01, 0.05), (5000.0, 0.01), (5000.0, 0.05)]


@pytest.mark.parametrize(("grid", "option"), [
    ("{lamdb: [1]}", "ewc.lamdb=1"),  # not a hyper-parameter of ewc
    ("{training: {lrr: [1]}}", "ewc.training.lrr=1"),  # not a protocol key
    ("{lamb: [abc]}", "ewc.lamb=abc"),  # not a number
    ("{lamb: [5000, -1]}", "ewc.lamb=-1"),  # out of range
    ("{training: {lr: [0.05, 0]}}", "ewc.training.lr=0"),  # out of range (lr > 0)
    ("{fisher_dropout: [true, 1]}", "ewc.fisher_dropout=1"),  # not a boolean
])
def test_a_refused_grid_value_gives_the_set_error(tmp_path: Path, grid: str, option: str) -> None:
    path = spec_file(tmp_path, SPEC + f"grids:\n  ewc: {grid}\n")
    set_message = error_of(spec_file(tmp_path, SPEC, "plain.yaml"), [option])
    assert set_message.startswith(f"--set {option}: ")
    key, value = option.split("=")
    where = f"{path} (grids.{key}: {value_text(yaml.safe_load(value))})"  # abc is shown as "abc"
    assert error_of(path, []) == set_message.replace(f"--set {option}", where, 1)


def test_a_grid_of_an_approach_not_run_is_validated_too(tmp_path: Path) -> None:
    path = spec_file(tmp_path, SPEC + "grids:\n  hat: {smaxx: [1, 2]}\n")
    assert "unknown key `approaches.hat.smaxx`" in error_of(path, [], method="sgd")


def test_a_grid_from_set_is_named_by_its_option(tmp_path: Path) -> None:
    path = spec_file(tmp_path, SPEC)
    message = error_of(path, ["grids.ewc.lamb=[500, abc]"])
    assert message.startswith("--set grids.ewc.lamb=[500, abc] (grids.ewc.lamb: \"abc\"): `approaches.ewc.lamb` is")
    spec = load_benchmark(spec_file(tmp_path, SPEC + GRIDS, "grids.yaml"), ["grids.ewc.lamb=[1, 2]"])
    assert default_grid(spec, "ewc") == {"ewc.lamb": ("1", "2"), "ewc.training.lr": ("0.01", "0.05")}


@pytest.mark.parametrize(("grid", "expected"), [
    ("{lamb: []}", "`grids.ewc.lamb` is an empty list"),
    ("{lamb: {values: [], source: x}}", "`grids.ewc.lamb` is an empty list"),
    ("{lamb: 5000}", "`grids.ewc.lamb` is 5000; expected a list of the values to try"),
    ("{lamb: [500, 500]}", "`grids.ewc.lamb`: value 500 is given twice"),
    ("{lamb: {values: [1], src: x}}", "`grids.ewc.lamb` has the unknown key `src`"),
    ("{lamb: {values: [1], source: 3}}", "`grids.ewc.lamb.source` is 3; expected a string"),
    ("{training.lr: [0.1]}", "'training.lr' is not a key"),
    ("[500]", "`grids.ewc` must map each key of the approach to its values"),
])
def test_malformed_grids_are_refused_when_the_spec_is_loaded(tmp_path: Path, grid: str, expected: str) -> None:
    path = spec_file(tmp_path, SPEC + f"grids:\n  ewc: {grid}\n")
    with pytest.raises(SpecError) as error:
        load_benchmark(path)
    assert str(error.value).startswith(f"{path}: ") and expected in str(error.value)


def test_values_that_read_the_same_are_refused(tmp_path: Path) -> None:
    path = spec_file(tmp_path, SPEC + "grids:\n  ewc: {lamb: [500, 1000, 1e3]}\n")
    assert error_of(path, []) == (f"{path}: `grids.ewc.lamb`: 1000 and 1e3 are the same value (1000.0); give each "
                                  f"value once")


def test_a_grid_of_an_unknown_approach_is_an_error(tmp_path: Path) -> None:
    spec = load_benchmark(spec_file(tmp_path, SPEC + "grids:\n  haat: {smax: [1, 2]}\n"))
    with pytest.raises(SpecError, match=r"section `grids.haat` names unknown approach 'haat'"):
        check_approach_sections(spec, approach_names())
    with pytest.raises(SpecError, match="unknown approach 'haat'"):
        resolve(spec, "sgd")


def test_a_grid_enters_no_config_data_or_reference_hash(tmp_path: Path) -> None:
    without, with_grids = (load_benchmark(spec_file(tmp_path, text, f"{index}.yaml"))
                           for index, text in enumerate((SPEC, SPEC + GRIDS)))
    assert with_grids.grids and not without.grids
    plans = [plan_runs(spec, ["sgd", "ewc"], [0, 1], tmp_path / "results") for spec in (without, with_grids)]
    identities = [[(plan.config, plan.config_hash, plan.data_hash, plan.reference_hash, plan.run_dir)
                   for plan in spec_plans] for spec_plans in plans]
    assert identities[0] == identities[1]


def test_a_rendered_spec_keeps_its_grids_and_their_sources(tmp_path: Path) -> None:
    spec = load_benchmark(spec_file(tmp_path, SPEC + GRIDS))
    hyperparameters = {name: resolve(spec, name).hyperparameters for name in spec.approaches}
    text = render_spec(spec, hyperparameters, [])
    assert "      source: 'a paper, Table 9'  # where these values were published" in text.splitlines()
    assert load_benchmark(spec_file(tmp_path, text, "rendered.yaml")).grids == spec.grids


def _shipped() -> list[tuple[str, str | None]]:
    """Every shipped spec with None (its default) and each of its named variants."""
    cases = []
    for name in benchmark_names():
        raw = yaml.safe_load((benchmarks_dir() / f"{name}.yaml").read_text())
        cases += [(name, variant) for variant in [None, *(raw.get("variants") or {})]]
    return cases


@pytest.mark.parametrize(("name", "variant"), _shipped())
def test_shipped_grids_validate_cite_a_source_and_contain_the_specs_value(name: str, variant: str | None) -> None:
    spec = load_benchmark(name, [] if variant is None else [f"variant={variant}"])
    if spec.data.validation_fraction == 0:  # seq-mnist: nothing to tune on (`clbench tune` refuses it), no grids
        assert spec.grids == {}
        return
    # hat needs the task id: the domain scenario's specs (rot-mnist) have no grid for it
    assert ({"ewc", "lwf"} if spec.data.scenario == "domain" else {"hat", "ewc", "lwf"}) <= set(spec.grids)
    for method, axes in spec.grids.items():
        chosen = resolve(spec, method)  # validates every grid of the spec
        for axis in axes:
            assert axis.source, f"{name}: grids.{method}.{axis.key} has no source"
            values = [getattr(build(REGISTRY[method].hyperparameters_class, {axis.key: value}, where=method,
                                    source=name), axis.key) for value in axis.values]
            assert getattr(chosen.hyperparameters, axis.key) in values, f"{name}: {method}.{axis.key}"
