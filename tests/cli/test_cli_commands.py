"""train, evaluate, report and list through Typer's runner, on real MNIST (tiny subsample) from the mirror."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from importchecks import assert_imports_no_torch, cli_code
from typer.testing import CliRunner

from clbench.cli import app

runner = CliRunner()
QUICK = ["--set", "data.max_train_samples=300", "--set", "data.max_test_samples=200",
         "--set", "training.max_epochs=1", "--device", "cpu"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, mnist_data_dir: Path, mnist_mirror: Path) -> Path:
    results = tmp_path_factory.mktemp("results")
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd,random,joint", "--seeds", "0-1",
                                 "--results", str(results), "--data-dir", str(mnist_data_dir),
                                 "--mirror", str(mnist_mirror), *QUICK])
    assert result.exit_code == 0, result.output
    return results


def accuracy_files(results: Path) -> list[Path]:
    return sorted(results.glob("mnist2/*/*/seed-*/accuracy.parquet"))


def test_train_writes_one_parquet_per_run(trained: Path) -> None:
    files = accuracy_files(trained)
    assert len(files) == 6
    frame = pd.concat(pd.read_parquet(path) for path in files)
    assert set(frame["method"]) == {"sgd", "random", "joint"} and set(frame["seed"]) == {0, 1}
    assert set(frame["task_name"]) == {"mnist:0-4", "mnist:5-9"}
    assert frame.loc[frame["split"] == "test", "n_test"].eq(200).all()
    assert set(frame["split"]) == {"test", "validation"}


def test_rerun_skips_finished_runs(trained: Path, mnist_data_dir: Path, mnist_mirror: Path) -> None:
    stamps = [path.stat().st_mtime_ns for path in accuracy_files(trained)]
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd", "--seeds", "0", "--results", str(trained),
                                 "--data-dir", str(mnist_data_dir), *QUICK])
    assert result.exit_code == 0
    assert [path.stat().st_mtime_ns for path in accuracy_files(trained)] == stamps


def test_report_writes_the_forgetting_ratio_table(trained: Path, tmp_path: Path) -> None:
    output = tmp_path / "table.csv"
    result = runner.invoke(app, ["report", "mnist2", "--results", str(trained), "--format", "csv",
                                 "--output", str(output)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(output)
    sgd = table[table["approach"] == "sgd"].set_index("stage")
    assert sgd.loc[1, "seeds"] == 2 and sgd["mean"].notna().all()
    assert (sgd["mean"] <= 0.5).all()  # a forgetting ratio is below 0 up to noise


def test_report_accuracy_metric_includes_references(trained: Path, tmp_path: Path) -> None:
    output = tmp_path / "table.csv"
    result = runner.invoke(app, ["report", "mnist2", "--results", str(trained), "--metric", "accuracy",
                                 "--format", "csv", "-o", str(output)])
    assert result.exit_code == 0
    table = pd.read_csv(output)
    assert set(table["approach"]) == {"sgd", "random", "joint"}
    assert table[table["approach"] == "random"]["mean"].between(0.05, 0.4).all()


def test_evaluate_recomputes_from_checkpoints(trained: Path, mnist_data_dir: Path) -> None:
    result = runner.invoke(app, ["evaluate", "mnist2", "-m", "sgd", "--seeds", "1", "--results", str(trained),
                                 "--data-dir", str(mnist_data_dir), *QUICK])
    assert result.exit_code == 0, result.output
    [run_dir] = [p.parent for p in accuracy_files(trained) if "/sgd/" in str(p) and p.parent.name == "seed-1"]
    stored = pd.read_parquet(run_dir / "accuracy.parquet")
    again = pd.read_parquet(run_dir / "evaluation.parquet")
    assert stored["accuracy"].tolist() == again["accuracy"].tolist()


def test_evaluate_builds_one_task_sequence_per_seed_for_all_methods(trained: Path, mnist_data_dir: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from clbench.run import shared_tasks

    built: list[int] = []
    build = shared_tasks.build_tasks
    monkeypatch.setattr(shared_tasks, "build_tasks", lambda spec, seed, *rest: built.append(seed) or build(
        spec, seed, *rest))
    result = runner.invoke(app, ["evaluate", "mnist2", "-m", "sgd,joint", "--seeds", "0-1", "--results",
                                 str(trained), "--data-dir", str(mnist_data_dir), *QUICK])
    assert result.exit_code == 0, result.output
    assert built == [0, 1]  # sgd and joint of a seed on one sequence
    runs = [p.parent for p in accuracy_files(trained) if "/random/" not in str(p)]
    assert len(runs) == 4
    for run_dir in runs:  # the numbers of each run's training, recomputed on the shared sequence
        stored = pd.read_parquet(run_dir / "accuracy.parquet")
        again = pd.read_parquet(run_dir / "evaluation.parquet")
        assert stored["accuracy"].tolist() == again["accuracy"].tolist()
        assert stored["loss"].tolist() == again["loss"].tolist()


def test_list_exits_cleanly() -> None:
    assert runner.invoke(app, ["list", "--no-parameters"]).exit_code == 0


@pytest.mark.parametrize("arguments", [
    ["train", "mnist3"],
    ["train", "mnist2", "-m", "adam"],
    ["train", "mnist2", "-m", "sgd", "--seeds", "3-1"],
    ["train", "mnist2", "-m", "sgd", "--seeds", "x"],
    ["train", "mnist2", "-m", "sgd", "--set", "training.epochs=3"],
    ["train", "mnist2", "-m", "sgd", "--set", "training.max_epochs=many"],
    ["train", "mnist2", "-m", "sgd", "--device", "tpu"],
    ["report", "mnist2", "--results", "/nonexistent/results"],
    ["report", "--format", "pdf"],
])
def test_bad_input_exits_2_without_traceback(arguments: list[str]) -> None:
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_yaml_syntax_error_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "broken.yaml"
    spec.write_text("name: broken\ndata: [\n")
    result = runner.invoke(app, ["train", str(spec), "-m", "sgd"])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)


def test_missing_data_with_empty_mirror_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd", "--data-dir", str(tmp_path / "data"),
                                 "--mirror", str(tmp_path / "empty-mirror"), "--results", str(tmp_path / "r"),
                                 *QUICK])
    assert result.exit_code == 1  # data that cannot be fetched: a runtime failure
    assert not list((tmp_path / "r").rglob("accuracy.parquet"))


def test_help_does_not_import_torch() -> None:
    assert_imports_no_torch(cli_code(["--help"], ["train", "--help"]), also=("numpy", "pandas"))


def test_seeds_parser() -> None:
    from clbench.cli.common import parse_seeds

    assert parse_seeds("0-3") == [0, 1, 2, 3] and parse_seeds("0,3,7") == [0, 3, 7] and parse_seeds("4") == [4]
    assert parse_seeds("0-2,5") == [0, 1, 2, 5]
