"""SI's and MAS's monitoring tables through `clbench report --monitoring`, on hand-made `penalty_stiffness` tables."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from resultbuilders import write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.results import write_parquet

# (stage, parameter) -> (weights, max Omega, max stiffness, weights with stiffness > 2)
SEED_0 = {(1, "layers.0.weight"): (100, 10.0, 1.0, 0), (1, "layers.1.weight"): (20, 30.0, 3.0, 2),
          (2, "layers.0.weight"): (100, 12.0, 1.2, 0), (2, "layers.1.weight"): (20, 50.0, 5.0, 4)}
SEED_1 = {**SEED_0, (2, "layers.1.weight"): (20, 30.0, 3.0, 2)}


def write_stiffness(run_dir: Path, rows: dict[tuple[int, str], tuple[int, float, float, int]],
                    before_clip: dict[tuple[int, str], tuple[float, int]] | None = None) -> None:
    """A `penalty_stiffness` table; without `before_clip` ((min Omega, negatives) per key) as runs stored it
    before clbench recorded SI's clipping."""
    benchmark, method, config_hash, seed_folder = run_dir.parts[-4:]
    identity = {"run_id": f"{benchmark}/{method}/{config_hash}/{seed_folder}", "benchmark": benchmark,
                "method": method, "seed": int(seed_folder.removeprefix("seed-"))}
    frame = pd.DataFrame([{**identity, "stage": stage, "parameter": name, "weights": weights,
                           "max_importance": importance, "mean_importance": importance / 2,
                           "max_stiffness": stiffness, "unstable": unstable,
                           **({} if before_clip is None else dict(zip(("min_importance", "negative"),
                                                                      before_clip[(stage, name)])))}
                          for (stage, name), (weights, importance, stiffness, unstable) in rows.items()])
    write_parquet(run_dir / "penalty_stiffness.parquet", frame)


def test_monitoring_shows_the_last_tasks_stiffness_and_names_the_unstable_layers(tmp_path: Path) -> None:
    for seed, rows in ((0, SEED_0), (1, SEED_1)):
        write_stiffness(write_run(tmp_path, "si", seed, [[0.9], [0.9, 0.9]]), rows)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    # after task 2, layers.1.weight: max Omega (50 + 30) / 2 = 40, stiffness (5 + 3) / 2 = 4, (4 + 2) / 2 / 20 = 15%
    # runs stored before the clip was recorded: its columns read "–"
    assert ("### si: importance and SGD stiffness of the penalty after task 2, mean over seeds 0-1\n\n"
            "| parameter       | max Omega | max lr*2*strength*Omega | % weights > 2 | min Omega before clip |"
            " Omega < 0 before clip |\n"
            "|-----------------|-----------|-------------------------|---------------|-----------------------|"
            "-----------------------|\n"
            "| layers.0.weight | 12        | 1.2                     | 0.00          | –                     |"
            " –                     |\n"
            "| layers.1.weight | 40        | 4                       | 15.00         | –                     |"
            " –                     |\n") in result.output
    assert "plain SGD is unstable on layers.1.weight:" in result.output
    assert "layers.0.weight:" not in result.output.split("plain SGD is unstable on")[1].splitlines()[0]


def test_monitoring_shows_the_minimum_and_the_negative_entries_of_omega_before_sis_clip(tmp_path: Path) -> None:
    rows = {(1, "layers.0.weight"): (100, 10.0, 1.0, 0), (2, "layers.0.weight"): (100, 12.0, 1.2, 0)}
    clips = {0: {(1, "layers.0.weight"): (0.5, 0), (2, "layers.0.weight"): (-145.0, 3)},
             1: {(1, "layers.0.weight"): (0.5, 0), (2, "layers.0.weight"): (-5.0, 1)}}
    for seed in (0, 1):
        write_stiffness(write_run(tmp_path, "si", seed, [[0.9], [0.9, 0.9]]), rows, clips[seed])
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    # after task 2, mean over seeds: min Omega (-145 - 5) / 2 = -75, negatives (3 + 1) / 2 = 2
    line = next(line for line in result.output.splitlines() if line.startswith("| layers.0.weight"))
    assert [cell.strip() for cell in line.strip("|").split("|")] == ["layers.0.weight", "12", "1.2", "0.00", "-75",
                                                                     "2"]


def test_a_stable_penalty_gets_no_warning_and_mas_has_the_same_section(tmp_path: Path) -> None:
    stable = {(1, "layers.0.weight"): (100, 10.0, 1.0, 0), (2, "layers.0.weight"): (100, 19.0, 1.9, 0)}
    write_stiffness(write_run(tmp_path, "mas", 0, [[0.9], [0.9, 0.9]]), stable)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    assert "### mas: importance and SGD stiffness of the penalty after task 2, mean over seeds 0\n" in result.output
    assert "| layers.0.weight | 19        | 1.9" in result.output and "unstable" not in result.output


def test_an_si_run_and_a_mas_run_give_one_section_each(tmp_path: Path) -> None:
    from clbench.approaches.importance.report import PenaltyReporter
    from clbench.report.loading import load_results

    write_stiffness(write_run(tmp_path, "si", 0, [[0.9], [0.9, 0.9]]), SEED_0)
    write_stiffness(write_run(tmp_path, "mas", 1, [[0.9], [0.9, 0.9]]), SEED_1)
    results = load_results(tmp_path, "b")
    # after task 2: si (SEED_0) layers.1.weight max Omega 50, stiffness 5; mas (SEED_1) 30 and 3
    for method, seed, omega, stiffness in (("si", 0, "50", "5"), ("mas", 1, "30", "3")):
        [table] = PenaltyReporter(method).tables(results)
        assert table.title == (f"{method}: importance and SGD stiffness of the penalty after task 2, mean over seeds "
                               f"{seed}")
        assert [row[:3] for row in table.rows] == [["layers.0.weight", "12", "1.2"],
                                                   ["layers.1.weight", omega, stiffness]]


def test_a_trained_si_run_is_reported_by_its_reporter(tmp_path: Path) -> None:
    from runhelpers import run

    from clbench.results import read_run_file

    outcome = run(tmp_path, "si")
    declared = read_run_file(outcome.plan.run_dir)["monitoring_reporter"]
    assert declared == "clbench.approaches.importance.report:PenaltyReporter"
    stored = pd.read_parquet(outcome.plan.run_dir / "penalty_stiffness.parquet")
    n_tasks = int(outcome.rows[-1]["stage"])
    assert sorted(stored["stage"].unique()) == list(range(1, n_tasks + 1))
    result = CliRunner().invoke(app, ["report", outcome.plan.spec.name, "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    assert f"### si: importance and SGD stiffness of the penalty after task {n_tasks}" in result.output
    assert "| layers.0.weight |" in result.output


def test_the_main_table_warns_under_it_when_a_penalty_was_unstable(tmp_path: Path) -> None:
    stable = {(1, "layers.0.weight"): (100, 10.0, 1.0, 0), (2, "layers.0.weight"): (100, 19.0, 1.9, 0)}
    for seed, rows in ((0, SEED_0), (1, SEED_1)):
        write_stiffness(write_run(tmp_path, "si", seed, [[0.9], [0.9, 0.9]], hyperparameters={"c": 1.0}), rows)
        write_run(tmp_path, "joint", seed, [[0.95], [0.95, 0.95]])
        write_run(tmp_path, "random", seed, [[0.1], [0.1, 0.1]])
    write_stiffness(write_run(tmp_path, "mas", 0, [[0.9], [0.9, 0.9]]), stable)
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--table"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # rich may wrap the notes
    # after task 2: seed 0 has 4 unstable weights (max 5.0), seed 1 has 2 (max 3.0); task 1's rows do not count
    assert ("si: plain SGD is unstable on its penalty (lr * 2 * strength * Omega > 2, up to 5) for 6 weights of "
            "layers.1.weight (seeds 0-1)") in output
    assert f"`clbench report b --monitoring --results {tmp_path}`" in output and "--grid si.c=..." in output
    assert "mas:" not in output  # a stable penalty gets no warning


PENALTY_METHODS = ["mas", "si"]  # the approaches whose reporter is PenaltyReporter


def test_penalty_methods_are_those_of_the_reporter() -> None:
    from clbench.approaches.importance.report import STRENGTH
    from clbench.report.monitoring import LEGACY_REPORTERS

    assert sorted(method for method, reporter in LEGACY_REPORTERS.items()
                  if reporter == "clbench.approaches.importance.report:PenaltyReporter") == PENALTY_METHODS
    assert sorted(STRENGTH) == PENALTY_METHODS


@pytest.mark.parametrize("method", PENALTY_METHODS)
def test_every_strength_hint_names_a_real_hyperparameter_field(tmp_path: Path, method: str) -> None:
    from dataclasses import fields

    from synthetic import make_approach, tiny_spec, tiny_tasks

    from clbench.approaches.importance.report import PenaltyReporter
    from clbench.approaches.registry import REGISTRY
    from clbench.report.loading import load_results

    write_stiffness(write_run(tmp_path, method, 0, [[0.9], [0.9, 0.9]]), SEED_0)  # unstable after task 2
    [note] = PenaltyReporter(method).table_notes(load_results(tmp_path, "b"))
    [(grid_method, key)] = re.findall(r"--grid ([\w-]+)\.(\w+)=\.\.\.", note)
    assert grid_method == method
    assert key in {field.name for field in fields(REGISTRY[method].hyperparameters_class)}
    # and it is the strength the penalty uses: the hinted field set to 0.125 is what `strength()` returns
    spec = tiny_spec("mlp")
    assert make_approach(method, spec, tiny_tasks(spec), **{key: 0.125}).strength() == 0.125


def test_a_reporter_that_cannot_be_imported_does_not_break_the_main_table(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "fake", 0, [[0.9], [0.9, 0.9]])
    write_run_json(run_dir, monitoring_reporter="no_such_module:Reporter")
    result = CliRunner().invoke(app, ["report", "b", "--results", str(tmp_path), "--metric", "accuracy"])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "| fake" in result.output and "'no_such_module:Reporter'" in output and "warnings" in output
