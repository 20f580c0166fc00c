"""Report tables as objects: statistics, summary, time, HAT monitoring, sensitivity, labels, loading, CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from importchecks import assert_imports_no_torch, cli_code
from resultbuilders import (
    ALL_09,
    PARAMETERS,
    golden_results,
    sensitivity_results,
    write_bench,
    write_hat_tables,
    write_run,
)
from typer.testing import CliRunner

from clbench.approaches.hat.report import build_hat_report, hat_sensitivity
from clbench.cli import app
from clbench.errors import ResultsError
from clbench.report.loading import benchmarks_in, load_results
from clbench.report.statistics import Cell, student_t_quantile, summarize
from clbench.report.summary import build_summary
from clbench.report.tables import build_report
from clbench.report.timing import build_time_report, latest_bench
from clbench.results import write_parquet


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return golden_results(tmp_path_factory.mktemp("results"))


# ---------------------------------------------------------------------------------------------- statistics

@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (9, 2.2622), (29, 2.0452),
                                              (200, 1.9719)])
def test_student_t_quantile_matches_the_tables(df: int, expected: float) -> None:
    assert student_t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_confidence_half_width_is_t_times_standard_error() -> None:
    cell = summarize([1.0, 2.0, 4.0])  # mean 7/3, sample std sqrt(7/3)
    assert cell.std == pytest.approx(math.sqrt(7 / 3))
    assert cell.half_width == pytest.approx(4.3027 * math.sqrt(7 / 3) / math.sqrt(3), rel=1e-4)
    assert math.isnan(summarize([1.0]).half_width) and summarize([math.nan]).n == 0
    assert Cell(0.0, 0.0, 2).half_width == 0.0


# ---------------------------------------------------------------------------------------------- tables

def test_summary_is_accuracy_bwt_and_forgetting_after_the_last_task(golden: Path) -> None:
    rows = {row.label: row for row in build_summary(load_results(golden, "b")).rows}
    sgd = rows["sgd"]  # seed 0: A<=3 = 0.7333, BWT = -0.25, F = 0.25; seed 1: 0.6667, -0.35, 0.35
    assert sgd.accuracy.mean == pytest.approx(0.7) and sgd.accuracy.n == 2
    assert sgd.backward_transfer.mean == pytest.approx(-0.3) and sgd.forgetting.mean == pytest.approx(0.3)
    assert sgd.backward_transfer.std == pytest.approx(0.1 / math.sqrt(2))
    assert sgd.parameters is None and rows["hat"].parameters == PARAMETERS
    assert rows["ewc"].seeds == [0, 1]  # the partial seed-2 matrix is left out
    assert [row.label for row in build_summary(load_results(golden, "b")).rows][-1] == "joint"


def test_time_table_sums_stages_and_takes_the_latest_bench(golden: Path) -> None:
    report = build_time_report(load_results(golden, "b"))
    rows = {row.label: row for row in report.rows}
    assert rows["hat"].total_seconds.mean == pytest.approx(60.0)  # 3 stages x 20 s
    assert rows["hat"].epoch_seconds.mean == pytest.approx(5.0)  # 60 s / 12 epochs
    assert rows["hat"].batch_ms.mean == pytest.approx(500.0)  # 60 s / 120 batches
    assert rows["sgd"].total_seconds.mean == pytest.approx(33.0) and rows["sgd"].total_seconds.n == 2
    assert (rows["hat"].forward_ms, rows["hat"].forward_backward_ms) == (4.0, 11.7)  # not the older 9.9
    assert math.isnan(rows["ewc"].forward_ms)  # the ewc bench row is of another benchmark
    assert report.rows[0].label == "joint" and report.has_bench


def test_latest_bench_ignores_other_benchmarks_and_an_empty_folder(golden: Path, tmp_path: Path) -> None:
    assert set(latest_bench(golden, "b")["method"]) == {"hat", "sgd"}
    assert latest_bench(tmp_path, "b").empty


def test_hat_monitoring_means_over_seeds(golden: Path) -> None:
    [config] = build_hat_report(load_results(golden, "b")).configs
    capacity = config.capacity.set_index(["mask", "stage", "layer"])["mean"]
    assert capacity[("cumulative", 3, "fc2")] == pytest.approx(0.61)  # 0.6 + mean(0, 0.01, 0.02)
    assert capacity[("task", 2, "total")] == pytest.approx(0.16)
    reuse = config.reuse.set_index(["task", "later_task"])
    assert reuse.loc[(1, 2), "mean"] == pytest.approx(0.6) and reuse.loc[(1, 2), "n"] == 3  # last stage only
    assert config.layers == ["fc1", "fc2", "total"] and config.task_names == ["t1", "t2", "t3"]
    assert config.seeds == [0, 1, 2]


def test_sensitivity_grid_is_rho_at_the_last_stage_on_one_seed(tmp_path: Path) -> None:
    results = load_results(sensitivity_results(tmp_path), "b")
    notes: list[str] = []
    grid = hat_sensitivity(results, "hat", notes)
    assert grid is not None and (grid.seed, grid.stage, grid.smax, grid.c) == (0, 3, [25.0, 400.0], [0.1, 0.75])
    # rho<=3 = ((A - 0.5) / 0.4 - 1 + 0 + 0) / 3 for task 1's final accuracy A
    expected = [[-1 / 3, -0.5 / 3], [0.0, math.nan]]
    np.testing.assert_allclose(grid.values, expected, atol=1e-12)
    assert notes == []  # seed 1 is not on the grid's seed, so its missing references do not matter here
    assert build_hat_report(results).sensitivity is not None


def test_no_sensitivity_grid_with_one_config_per_seed(golden: Path) -> None:
    assert hat_sensitivity(load_results(golden, "b"), "hat", []) is None


def test_configs_are_labelled_by_variant_or_overrides_when_hyperparameters_agree(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, ALL_09, config_hash="v1", variant="small")
    write_run(tmp_path, "sgd", 0, ALL_09, config_hash="v2", variant="large")
    write_run(tmp_path, "ewc", 0, ALL_09, config_hash="o1", overrides=["training.max_epochs=5"])
    write_run(tmp_path, "ewc", 0, ALL_09, config_hash="o2", overrides=["training.max_epochs=9"])
    write_run(tmp_path, "lwf", 0, ALL_09, config_hash="x1")
    write_run(tmp_path, "lwf", 0, ALL_09, config_hash="x2")
    for config_hash, variant, smax in (("h1", "small", 200), ("h2", "medium", 400), ("h3", "large", 400)):
        write_run(tmp_path, "hat", 0, ALL_09, config_hash=config_hash, variant=variant,
                  hyperparameters={"smax": smax, "c": 0.5})
    labels = {row[0] for row in build_report(tmp_path, "b", "accuracy").rows}
    assert labels == {"sgd (variant=small)", "sgd (variant=large)", "ewc (training.max_epochs=5)",
                      "ewc (training.max_epochs=9)", "lwf (config x1)", "lwf (config x2)",
                      "hat (smax=200, variant=small)", "hat (smax=400, variant=medium)",
                      "hat (smax=400, variant=large)"}


# ---------------------------------------------------------------------------------------------- loading

def test_benchmark_listing_skips_bench_and_hidden_folders(golden: Path) -> None:
    (golden / ".cache").mkdir(exist_ok=True)
    assert benchmarks_in(golden) == ["b"]
    with pytest.raises(ResultsError, match="does not exist"):
        benchmarks_in(golden / "missing")


def test_an_unknown_schema_version_names_the_file(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, "sgd", 0, ALL_09)
    frame = pd.read_parquet(run_dir / "accuracy.parquet").assign(schema_version=99)
    write_parquet(run_dir / "accuracy.parquet", frame)
    with pytest.raises(ResultsError, match=r"b/sgd/c0/seed-0/accuracy.parquet.*schema version \['99'\]"):
        load_results(tmp_path, "b")


def test_seeds_filter_and_parameters_from_run_json(golden: Path) -> None:
    results = load_results(golden, "b", seeds=[1])
    assert set(results.runs["seed"]) == {1} and results.incomplete == []
    assert build_report(golden, "b", seeds=[1]).seeds == {"sgd": [1], "ewc": [1], "hat": [1]}


def test_bench_files_missing_required_columns_are_an_error(tmp_path: Path) -> None:
    write_parquet(tmp_path / "_bench" / "x.parquet", pd.DataFrame({"benchmark": ["b"], "method": ["hat"]}))
    with pytest.raises(ResultsError, match="lack columns"):
        latest_bench(tmp_path, "b")


def test_time_table_names_runs_without_timings(tmp_path: Path) -> None:
    write_run(tmp_path, "sgd", 0, ALL_09)  # no timing columns (null)
    write_run(tmp_path, "hat", 0, ALL_09, timing=(1.0, 1, 10))
    write_bench(tmp_path, [{"method": "hat", "forward_ms": 1.0, "forward_backward_ms": 2.0}])
    report = build_time_report(load_results(tmp_path, "b"))
    assert [row.label for row in report.rows] == ["hat"]
    assert any("no stage timings" in note and "b/sgd/c0/seed-0" in note for note in report.notes)


def test_monitoring_of_runs_with_different_task_orders_is_averaged_by_position(tmp_path: Path) -> None:
    capacity = {(mask, stage, layer): 0.1 for mask in ("cumulative", "task") for stage in (1, 2)
                for layer in ("fc1", "total")}
    for seed in (0, 1):
        run_dir = write_run(tmp_path, "hat", seed, [[0.9], [0.9, 0.9]])
        write_hat_tables(run_dir, capacity)
    frame = pd.read_parquet(run_dir / "accuracy.parquet").assign(task_name=lambda f: "x" + f["task"].astype(str))
    write_parquet(run_dir / "accuracy.parquet", frame)
    [config] = build_hat_report(load_results(tmp_path, "b")).configs
    assert config.task_names is None and config.reuse.empty


# ---------------------------------------------------------------------------------------------- command line

def invoke(*arguments: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["report", *arguments])
    return result.exit_code, result.output


def test_table_is_the_default_unless_another_table_is_asked_for(golden: Path) -> None:
    code, only_summary = invoke("b", "--results", str(golden), "--summary", "--format", "csv")
    assert code == 0 and only_summary.splitlines()[0].startswith("benchmark,approach,parameters,quantity")
    code, both = invoke("b", "--results", str(golden), "--summary", "--table", "--format", "csv")
    blocks = both.strip().split("\n\n")
    assert code == 0 and len(blocks) == 2 and blocks[0].startswith("benchmark,approach,metric,stage")


def test_every_benchmark_is_reported_under_one_csv_header(golden: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(golden, tmp_path / "r")
    shutil.copytree(golden / "b", tmp_path / "r" / "c")
    frame = pd.read_parquet(next((tmp_path / "r" / "c").glob("*/*/seed-*/accuracy.parquet")))
    assert set(frame["benchmark"]) == {"b"}  # a copied folder: the report goes by folder, not by this column
    code, text = invoke("--results", str(tmp_path / "r"), "--format", "csv")
    lines = text.strip().splitlines()
    assert code == 0 and sum(line.startswith("benchmark,") for line in lines) == 1 and len(lines) == 1 + 2 * 9


@pytest.mark.parametrize("arguments", [["--format", "pdf"], ["--metric", "rho"], ["--seeds", "x"]])
def test_bad_options_exit_2(golden: Path, arguments: list[str]) -> None:
    assert invoke("b", "--results", str(golden), *arguments)[0] == 2


def test_report_imports_neither_torch_nor_torchvision(golden: Path, tmp_path: Path) -> None:
    every_table = ["report", "b", "--results", str(golden), "--summary", "--time", "--hat", "--table", "--ci"]
    figures = ["report", "b", "--results", str(golden), "--plot", str(tmp_path / "figures")]
    assert_imports_no_torch(cli_code(every_table, figures))
    assert (tmp_path / "figures" / "b-forgetting-ratio.png").is_file()  # matplotlib and clbench.report.figures ran
