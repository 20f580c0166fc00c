"""Row labels of the report's tables: every row of a table of several scenarios names its scenario once, and a
`--set` key that a config does not set reads as its value there, never as None."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from resultbuilders import write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.loading import load_results

MATRIX = [[0.9], [0.8, 0.9]]


def approaches(results: Path) -> list[str]:
    """The approaches of `clbench report b --metric accuracy --format csv` (one CSV row per approach and stage)."""
    result = CliRunner().invoke(app, ["report", "b", "--results", str(results), "--metric", "accuracy",
                                      "--evaluation", "task-aware", "--format", "csv"])
    assert result.exit_code == 0, result.output
    return sorted(set(pd.read_csv(io.StringIO(result.stdout))["approach"]))


def test_every_row_of_a_table_of_several_scenarios_names_its_scenario_once(tmp_path: Path) -> None:
    write_run(tmp_path, "derpp", 0, MATRIX, config_hash="d1", scenario="class", overrides=["data.scenario=class"])
    write_run(tmp_path, "si", 0, MATRIX, config_hash="s1", scenario="domain", overrides=["data.scenario=domain"])
    write_run(tmp_path, "ewc", 0, MATRIX, config_hash="e1", overrides=[])
    # sgd: the task scenario's default; the task scenario with class_loss all; the class scenario (loss: seen).
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g1", overrides=[])
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g2", overrides=["training.class_loss=all"], class_loss="all")
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g3", scenario="class", overrides=["data.scenario=class"])
    assert approaches(tmp_path) == sorted([
        "derpp (scenario=class)", "si (scenario=domain)", "ewc (scenario=task)",
        "sgd (scenario=task, class_loss=seen)", "sgd (scenario=task, class_loss=all)",
        "sgd (scenario=class, class_loss=seen)"])


def test_rows_of_one_scenario_name_none(tmp_path: Path) -> None:
    write_run(tmp_path, "ewc", 0, MATRIX, config_hash="e1", overrides=[])
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g1", overrides=[])
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g2", overrides=["training.class_loss=all"], class_loss="all")
    assert approaches(tmp_path) == ["ewc", "sgd (class_loss=all)", "sgd (class_loss=seen)"]


def test_a_set_key_that_a_config_does_not_set_reads_as_its_value_there(tmp_path: Path) -> None:
    training = {"lr": 0.05, "max_epochs": 200}  # as run.json stores it: early_stopping (default true) left out
    write_run_json(write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g1", overrides=[]),
                   config={"training": training})
    write_run_json(write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g2", overrides=["training.lr=0.1"]),
                   config={"training": training | {"lr": 0.1}})
    write_run_json(write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g3", overrides=["training.early_stopping=false"]),
                   config={"training": training | {"early_stopping": False}})
    write_run(tmp_path, "sgd", 0, MATRIX, config_hash="g4", overrides=["training.max_epochs=3"])  # no run.json
    labels = dict(zip(load_results(tmp_path, "b").runs["config_hash"], load_results(tmp_path, "b").runs["label"]))
    assert labels == {
        "g1": "sgd (training.early_stopping=true, training.lr=0.05, training.max_epochs=200)",
        "g2": "sgd (training.early_stopping=true, training.lr=0.1, training.max_epochs=200)",
        "g3": "sgd (training.early_stopping=false, training.lr=0.05, training.max_epochs=200)",
        "g4": "sgd (training.early_stopping=default, training.lr=default, training.max_epochs=3)"}
