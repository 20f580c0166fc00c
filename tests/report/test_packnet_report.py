"""PackNet's monitoring tables through `clbench report --monitoring`, on hand-made `packnet_capacity` tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.results import write_parquet

# (stage, task, layer) -> (used, weights); task 0 = the weights still free. Two tasks, two layers.
SEED_0 = {(1, 0, "fc1"): (50, 100), (1, 1, "fc1"): (50, 100), (1, 0, "fc2"): (10, 20), (1, 1, "fc2"): (10, 20),
          (2, 0, "fc1"): (0, 100), (2, 1, "fc1"): (50, 100), (2, 2, "fc1"): (50, 100),
          (2, 0, "fc2"): (0, 20), (2, 1, "fc2"): (10, 20), (2, 2, "fc2"): (10, 20)}
SEED_1 = {**SEED_0, (2, 1, "fc1"): (40, 100), (2, 2, "fc1"): (60, 100)}


def write_capacity(run_dir: Path, rows: dict[tuple[int, int, str], tuple[int, int]]) -> None:
    benchmark, method, config_hash, seed_folder = run_dir.parts[-4:]
    identity = {"run_id": f"{benchmark}/{method}/{config_hash}/{seed_folder}", "benchmark": benchmark,
                "method": method, "seed": int(seed_folder.removeprefix("seed-"))}
    frame = pd.DataFrame([{**identity, "stage": stage, "task": task, "layer": layer, "used": used, "weights": weights,
                           "fraction": used / weights} for (stage, task, layer), (used, weights) in rows.items()])
    write_parquet(run_dir / "packnet_capacity.parquet", frame)


def test_monitoring_shows_the_weights_each_task_owns_after_the_last_task(tmp_path: Path) -> None:
    for seed, rows in ((0, SEED_0), (1, SEED_1)):
        write_capacity(write_run(tmp_path, "packnet", seed, [[0.9], [0.9, 0.9]]), rows)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    # after task 2, fc1: task 1 owns (50 + 40) / 2 = 45%, task 2 (50 + 60) / 2 = 55%, none free; fc2: 50 / 50 / 0
    assert ("### packnet: % of each layer's weights owned by each task after task 2, mean over seeds 0-1\n\n"
            "| layer | free | task 1 | task 2 |\n"
            "|-------|------|--------|--------|\n"
            "| fc1   | 0.0  | 45.0   | 55.0   |\n"
            "| fc2   | 0.0  | 50.0   | 50.0   |\n") in result.output


def test_monitoring_csv_has_the_mean_per_layer_and_task(tmp_path: Path) -> None:
    for seed, rows in ((0, SEED_0), (1, SEED_1)):
        write_capacity(write_run(tmp_path, "packnet", seed, [[0.9], [0.9, 0.9]]), rows)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--monitoring", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "packnet,2,fc1,1,0.45,2" in result.output and "packnet,2,fc1,2,0.55,2" in result.output


def test_a_trained_packnet_run_is_reported_by_its_reporter(tmp_path: Path) -> None:
    from runhelpers import run

    from clbench.results import read_run_file

    outcome = run(tmp_path, "packnet")
    declared = read_run_file(outcome.plan.run_dir)["monitoring_reporter"]
    assert declared == "clbench.approaches.packnet.report:PackNetReporter"
    result = CliRunner().invoke(app, ["report", outcome.plan.spec.name, "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("| layer"))
    n_tasks = int(outcome.rows[-1]["stage"])
    assert header.split("|")[2:-1] == [" free ", *[f" task {t} " for t in range(1, n_tasks + 1)]]
    total = next(line for line in result.output.splitlines() if line.startswith("| total"))
    assert abs(sum(float(cell) for cell in total.split("|")[2:-1]) - 100.0) < 0.5  # every weight is owned or free
