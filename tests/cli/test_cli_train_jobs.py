"""`clbench train` at scale through Typer's runner on real MNIST (tiny subsample): --jobs, --devices,
--with-references, --grid, failures and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from clbench.cli import app
from clbench.results import read_run_file
from clbench.run.plan import plan_runs
from clbench.spec import load_benchmark

runner = CliRunner()
SUBSAMPLE = ["--set", "data.max_train_samples=300", "--set", "data.max_test_samples=200",
             "--set", "training.max_epochs=1"]


def data_options(data_dir: Path, mirror: Path) -> list[str]:
    return ["--data-dir", str(data_dir), "--mirror", str(mirror)]


def stored(results: Path) -> pd.DataFrame:
    """Every finished run's rows, in a stable order."""
    frames = [pd.read_parquet(path) for path in sorted(results.glob("mnist2/*/*/seed-*/accuracy.parquet"))]
    return pd.concat(frames).sort_values(["method", "config_hash", "seed", "stage", "task"], ignore_index=True)


def run_dir(results: Path, method: str, seed: int, overrides: list[str] = SUBSAMPLE[1::2]) -> Path:
    spec = load_benchmark("mnist2", overrides)
    return plan_runs(spec, [method], [seed], results.absolute(), overrides)[0].run_dir


def test_with_references_adds_joint_and_random_for_a_complete_table(tmp_path: Path, mnist_data_dir: Path,
                                                                     mnist_mirror: Path) -> None:
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd", "--seeds", "0", "--with-references",
                                 "--results", str(results), "--device", "cpu", *SUBSAMPLE,
                                 *data_options(mnist_data_dir, mnist_mirror)])
    assert result.exit_code == 0, result.output
    assert set(stored(results)["method"]) == {"sgd", "joint", "random"}
    output = tmp_path / "table.csv"
    result = runner.invoke(app, ["report", "mnist2", "--results", str(results), "--format", "csv", "-o", str(output)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(output)
    assert table.loc[table["approach"] == "sgd", "mean"].notna().all()


def test_grid_trains_every_point_once(tmp_path: Path, mnist_data_dir: Path, mnist_mirror: Path) -> None:
    results = tmp_path / "results"
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd,hat", "--seeds", "0", "--grid", "hat.smax=25,400",
                                 "--results", str(results), "--device", "cpu", *SUBSAMPLE,
                                 "--set", "hat.training.max_epochs=1",
                                 *data_options(mnist_data_dir, mnist_mirror)])
    assert result.exit_code == 0, result.output
    frame = stored(results)
    runs = frame.drop_duplicates("run_id")
    assert sorted(runs["method"]) == ["hat", "hat", "sgd"]  # sgd does not depend on hat.smax: one run
    smax = sorted(json.loads(text)["smax"] for text in runs.loc[runs["method"] == "hat", "hyperparameters"])
    assert smax == [25, 400]


@pytest.mark.slow
def test_jobs_run_everything_once_report_a_failure_and_match_serial(tmp_path: Path, mnist_data_dir: Path,
                                                                     mnist_mirror: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the workers' thread count, as in this process
    common = ["train", "mnist2", "-m", "sgd", "--seeds", "0-1", "--with-references", *SUBSAMPLE,
              *data_options(mnist_data_dir, mnist_mirror)]
    parallel, serial = tmp_path / "parallel", tmp_path / "serial"
    sabotaged = run_dir(parallel, "sgd", 1)
    sabotaged.mkdir(parents=True)
    (sabotaged / "checkpoints").write_text("not a folder")  # its first checkpoint cannot be written

    result = runner.invoke(app, [*common, "--results", str(parallel), "--jobs", "2", "--devices", "cpu,cpu:0"])
    assert result.exit_code == 1, result.output
    assert len(stored(parallel).drop_duplicates("run_id")) == 5
    assert read_run_file(sabotaged)["status"] == "failed"
    frame = stored(parallel)  # the first two runs go to slots 0 and 1, whose devices are cpu and cpu:0
    assert set(frame.loc[(frame["method"] == "sgd") & (frame["seed"] == 0), "device"]) == {"cpu"}
    assert read_run_file(sabotaged)["device"] == "cpu:0" and set(frame["device"]) <= {"cpu", "cpu:0"}

    (sabotaged / "checkpoints").unlink()
    result = runner.invoke(app, [*common, "--results", str(parallel), "--jobs", "2", "--devices", "cpu,cpu:0"])
    assert result.exit_code == 0, result.output  # only the failed run ran again
    result = runner.invoke(app, [*common, "--results", str(serial), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    parallel_rows, serial_rows = stored(parallel), stored(serial)
    # 3 runs x stages 0-3 x 3 tasks x 2 evaluations x 2 splits (test, validation)
    assert len(parallel_rows) == len(serial_rows) == 24 * 3 * 2
    assert set(parallel_rows["split"]) == {"test", "validation"}
    assert parallel_rows["accuracy"].tolist() == serial_rows["accuracy"].tolist()
    assert parallel_rows["loss"].fillna(-1).tolist() == serial_rows["loss"].fillna(-1).tolist()


NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")


@pytest.mark.parametrize("options", [
    ["--jobs", "0"],
    ["--executor", "slurm"],
    ["--device", "cpu", "--devices", "cpu"],
    ["--devices", "tpu"],
    pytest.param(["--devices", "0,1"], marks=NO_CUDA),
    ["--executor", "ray", "--jobs", "2"],
    ["--grid", "hat.smax"],
    ["--grid", "hat.smax=1,1"],
    ["--grid", "hat.smaxx=1,2"],
])
def test_bad_scale_options_exit_2_before_any_work(options: list[str], tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd,hat", "--results", str(tmp_path / "r"), *options])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "r").exists()
