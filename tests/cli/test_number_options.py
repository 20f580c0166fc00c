"""`1e-2` and friends through `--set`, `--grid` and a spec file: the runs `clbench train` plans get the numbers; a
value still refused is named with the option or the file it came from."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from clbench.cli import app
from clbench.run.plan import RunPlan

runner = CliRunner()
BASE = {"name": "numbers", "data": {"kind": "split", "datasets": ["mnist"], "classes_per_task": [5], "form": "mnist28"},
        "network": {"kind": "mlp", "hidden": [10]}}
PLACEHOLDER = "VALUE-PLACEHOLDER"

# (key, value as typed, method, where in a run's config, expected value: type included)
CASES = [
    ("training.lr", "1e-2", "sgd", ("training", "lr"), 0.01),
    ("training.lr", "1E-2", "sgd", ("training", "lr"), 0.01),
    ("training.lr", "5e3", "sgd", ("training", "lr"), 5000.0),
    ("training.lr", ".5", "sgd", ("training", "lr"), 0.5),
    ("training.lr", "1_000", "sgd", ("training", "lr"), 1000.0),
    ("training.max_epochs", "1e3", "sgd", ("training", "max_epochs"), 1000),
    ("network.hidden", "[1e2, 5e1]", "sgd", ("network", "hidden"), [100, 50]),
    ("approaches.hat.smax", "4e2", "hat", ("hyperparameters", "smax"), 400.0),
    ("approaches.hat.training.lr", "1e-2", "hat", ("training", "lr"), 0.01),
]


def spec_file(folder: Path, key: str, text: str) -> Path:
    """A spec with `key` written as `text`, verbatim, in the file."""
    raw: dict[str, Any] = yaml.safe_load(yaml.safe_dump(BASE))
    node = raw
    *sections, last = key.split(".")
    for section in sections:
        node = node.setdefault(section, {})
    node[last] = PLACEHOLDER
    path = folder / "numbers.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False).replace(PLACEHOLDER, text))
    return path


def arguments(path: str, key: str, text: str, folder: Path) -> list[str]:
    """`train` arguments that give `key` the value `text` by `path` (set, grid or file)."""
    if path == "file":
        return [str(spec_file(folder, key, text))]
    return [str(spec_file(folder, "training.patience", "5")), f"--{path}", f"{key}={text}"]


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[RunPlan]:
    """The plans `clbench train` would run, captured instead of run (and no data fetched)."""
    plans: list[RunPlan] = []
    train_module = importlib.import_module("clbench.cli.train")
    monkeypatch.setattr("clbench.run.loaders.prepare_data", lambda specs, data_dir, mirror: None)
    monkeypatch.setattr(train_module, "_run", lambda runs, execution, loader: plans.extend(runs) or [])
    return plans


@pytest.mark.parametrize("path", ["set", "grid", "file"])
@pytest.mark.parametrize("key, text, method, config_key, expected", CASES)
def test_numbers_reach_the_planned_run(path: str, key: str, text: str, method: str, config_key: tuple[str, str],
                                       expected: object, planned: list[RunPlan], tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", *arguments(path, key, text, tmp_path), "-m", method, "--device", "cpu",
                                 "--results", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    [plan] = planned
    section, name = config_key
    value = plan.config[section][name]
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("path, key, text, message", [
    ("set", "training.max_epochs", "1.5", "--set training.max_epochs=1.5: `training.max_epochs` is 1.5 (float); "
                                          "expected an integer"),
    ("grid", "training.lr", "1e-2,1e", "--grid training.lr=1e-2,1e: `training.lr` is '1e' (str); expected a number"),
    ("file", "training.max_epochs", "1.5", "{file}: `training.max_epochs` is 1.5 (float); expected an integer"),
    ("set", "data.datasets", "[1e5]", "--set data.datasets=[1e5]: `data.datasets`: unknown data set 1e5;"),
])
def test_a_refused_value_names_where_it_came_from(path: str, key: str, text: str, message: str,
                                                  tmp_path: Path) -> None:
    results = tmp_path / "r"
    given = arguments(path, key, text, tmp_path)
    result = runner.invoke(app, ["train", *given, "-m", "sgd", "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert message.format(file=given[0]) in " ".join(result.output.split())
    assert not results.exists()


def test_spec_writes_an_approach_s_own_protocol_values_as_numbers() -> None:
    result = runner.invoke(app, ["spec", "mnist2", "--set", "hat.training.lr=1e-2"])
    assert result.exit_code == 0, result.output
    written = yaml.safe_load(result.stdout)["approaches"]["hat"]["training"]["lr"]
    assert written == 0.01 and type(written) is float


@pytest.mark.parametrize("options, message", [
    (["--set", "hat.smax=abc"], "--set hat.smax=abc: `approaches.hat.smax` is 'abc' (str); expected a number"),
    (["--grid", "hat.training.max_epochs=2,2.5"],
     "--grid hat.training.max_epochs=2,2.5: `approaches.hat.training.max_epochs` is 2.5 (float); expected an integer"),
])
def test_a_refused_hyperparameter_names_the_option_that_gave_it(options: list[str], message: str,
                                                                tmp_path: Path) -> None:
    results = tmp_path / "r"
    result = runner.invoke(app, ["train", "mnist2", *options, "-m", "hat", "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not results.exists()


@pytest.mark.parametrize("override, message", [
    ("training=5", "--set training=5: `training` must be a mapping of keys to values, got 5 (int)"),
    ("data=[1, 2]", "--set data=[1, 2]: `data` must be a mapping of keys to values, got [1, 2] (list)"),
    ("training=abc", "--set training=abc: `training` must be a mapping of keys to values, got 'abc' (str)"),
])
def test_a_section_given_a_value_that_is_not_a_mapping_is_a_one_line_error(override: str, message: str,
                                                                           tmp_path: Path) -> None:
    results = tmp_path / "r"
    result = runner.invoke(app, ["train", "mnist2", "--set", override, "-m", "sgd", "--results", str(results)])
    assert result.exit_code == 2, result.output  # was a TypeError/ValueError traceback (exit 1)
    assert message in " ".join(result.output.split())
    assert not results.exists()


def test_a_spec_file_whose_section_is_not_a_mapping_names_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    document = yaml.safe_load((Path(__file__).resolve().parents[2] / "benchmarks" / "mnist2.yaml").read_text())
    spec.write_text(yaml.safe_dump({**document, "training": 5}))
    result = runner.invoke(app, ["train", str(spec), "-m", "sgd", "--results", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert f"{spec}: `training` must be a mapping of keys to values, got 5 (int)" in " ".join(result.output.split())
