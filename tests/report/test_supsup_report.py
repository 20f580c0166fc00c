"""SupSup's monitoring table through `clbench report --monitoring`, from a trained tiny run's `supsup_masks`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from runhelpers import run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.results import read_run_file


def test_monitoring_shows_each_tasks_mask_share_per_layer(tmp_path: Path) -> None:
    outcome = run(tmp_path, "supsup")
    assert read_run_file(outcome.plan.run_dir)["monitoring_reporter"] == \
        "clbench.approaches.supsup.report:SupSupReporter"
    stored = pd.read_parquet(outcome.plan.run_dir / "supsup_masks.parquet")
    last = stored[stored["stage"] == stored["stage"].max()]
    assert sorted(last["task"].unique()) == [1, 2, 3]
    total = last[(last["layer"] == "total") & (last["task"] == 2)].iloc[0]
    layers = last[(last["layer"] != "total") & (last["task"] == 2)]
    assert total["used"] == layers["used"].sum() and total["weights"] == layers["weights"].sum()
    result = CliRunner().invoke(app, ["report", outcome.plan.spec.name, "--results", str(tmp_path), "--monitoring"])
    assert result.exit_code == 0, result.output
    assert "% of each layer's edges in each task's supermask after task 3, mean over seeds 0" in result.output
    share = f"{100 * total['used'] / total['weights']:.1f}"
    row = next(line for line in result.output.splitlines() if line.startswith("| total"))
    assert row.split("|")[3].strip() == share  # task 2's column
