"""`clbench bench` through Typer's runner on a small MLP spec with synthetic data (nothing cached)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from clihelpers import pasted_commands
from typer.testing import CliRunner

from clbench.cli import app
from clbench.run.bench import BENCH_COLUMNS

runner = CliRunner()
SPEC = """
name: benchtiny
data: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28, shuffle_tasks: false,
       max_train_samples: 300, max_test_samples: 100}
network: {kind: mlp, hidden: [32, 32]}
training: {batch_size: 32}
"""


@pytest.fixture()
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "benchtiny.yaml"
    path.write_text(SPEC)
    return path


def invoke(spec_file: Path, results: Path, *extra: str):  # type: ignore[no-untyped-def]
    empty = results.parent / "no-data"
    empty.mkdir(exist_ok=True)
    return runner.invoke(app, ["bench", str(spec_file), "--device", "cpu", "--batches", "2", "--results",
                               str(results), "--data-dir", str(empty), *extra])


def stored(results: Path) -> list[Path]:
    """The bench files, oldest first (by name, as `report` reads them, and by measurement time)."""
    paths = sorted((results / "_bench").glob("benchtiny-*.parquet"))
    times = [pd.read_parquet(path)["measured_utc"].iloc[0] for path in paths]
    assert times == sorted(times)
    return paths


def metadata(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(pq.read_schema(path).metadata[b"clbench"])


def test_bench_stores_one_row_per_timed_approach(spec_file: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    result = invoke(spec_file, results, "-m", "sgd,hat,random")
    assert result.exit_code == 0, result.output
    [path] = stored(results)
    frame = pd.read_parquet(path)
    assert list(frame.columns) == list(BENCH_COLUMNS)
    assert list(frame["method"]) == ["sgd", "hat"] and set(frame["data"]) == {"synthetic"}
    assert (frame["batch_size"] == 32).all() and frame["forward_backward_ms"].gt(0).all()
    [fetch] = pasted_commands(result.output, "clbench fetch")  # fills the data folder the command was given
    assert fetch == ["fetch", str(spec_file), "--data-dir", str(tmp_path / "no-data")]
    info = metadata(path)
    assert info["epoch_mode"] == "extrapolate" and info["amp"] == "none" and "random" in info["skipped"]


def test_amp_flag_is_a_training_setting_with_its_own_hash(spec_file: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert invoke(spec_file, results, "-m", "sgd").exit_code == 0
    result = invoke(spec_file, results, "-m", "sgd", "--amp", "bf16", "--epoch", "measure")
    assert result.exit_code == 0, result.output
    plain, amp = (metadata(path) for path in stored(results))
    assert amp["amp"] == "bf16" and amp["training"]["amp"] == "bf16" and amp["epoch_mode"] == "measure"
    assert amp["config_hash"]["sgd"] != plain["config_hash"]["sgd"]


@pytest.mark.parametrize("bad", [["--amp", "fp16"], ["--epoch", "sometimes"], ["-m", "nope"],
                                 ["--set", "training.amp=fp8"]])
def test_bad_options_exit_with_usage_error(spec_file: Path, tmp_path: Path, bad: list[str]) -> None:
    result = invoke(spec_file, tmp_path / "results", *bad)
    assert result.exit_code == 2
    assert not (tmp_path / "results" / "_bench").exists()


def test_a_spec_without_validation_split_times_the_training_pass(spec_file: Path, tmp_path: Path) -> None:
    """seq-mnist, cifar10-5: no validation split, no early stopping; the epoch is its training pass alone."""
    results = tmp_path / "results"
    result = invoke(spec_file, results, "-m", "sgd", "--set", "data.validation_fraction=0", "--set",
                    "training.early_stopping=false")
    assert result.exit_code == 0, result.output
    [path] = stored(results)
    frame = pd.read_parquet(path)
    assert list(frame["method"]) == ["sgd"] and frame["epoch_seconds"].gt(0).all()
