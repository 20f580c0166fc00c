"""`clbench fetch my.yaml` and `clbench train my.yaml` with a spec's own data sets, through Typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from filebuilders import constant_images, write_image_folder, write_npz
from typer.testing import CliRunner

from clbench.cli import app

runner = CliRunner()
TINY = ["--set", "training.max_epochs=1", "--set", "training.batch_size=4", "--device", "cpu"]
MIXTURE_SPEC = """\
name: mine
datasets:
  my-shapes: {format: imagefolder, path: ./my-shapes}
  my-arrays: {format: npz, path: ./arrays.npz}
data: {kind: mixture, datasets: [my-shapes, my-arrays], shuffle_tasks: false, validation_fraction: 0.3}
network: {kind: alexnet, conv_channels: [4, 4, 4], fc_units: [8, 8]}
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    """A spec beside an image folder of PNGs and an npz file, as a user would write them."""
    folder = tmp_path / "project"
    write_image_folder(folder / "my-shapes")
    write_npz(folder / "arrays.npz")
    (folder / "my.yaml").write_text(MIXTURE_SPEC)
    return folder / "my.yaml"


def prepared(data_dir: Path, name: str) -> list[Path]:
    return sorted(data_dir.glob(f"custom/{name}-*/manifest.json"))


def test_fetch_then_train(spec_file: Path, tmp_path: Path) -> None:
    data_dir, results = tmp_path / "data", tmp_path / "results"
    fetched = runner.invoke(app, ["fetch", str(spec_file), "--data-dir", str(data_dir)])
    assert fetched.exit_code == 0, fetched.output
    manifests = {name: prepared(data_dir, name) for name in ("my-shapes", "my-arrays")}
    assert all(len(found) == 1 for found in manifests.values())
    assert json.loads(manifests["my-shapes"][0].read_text())["class_counts"] == {"train": [3, 2], "test": [1, 1]}
    trained = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--seeds", "0", "--results", str(results),
                                  "--data-dir", str(data_dir), *TINY])
    assert trained.exit_code == 0, trained.output
    files = sorted(results.glob("mine/sgd/*/seed-0/accuracy.parquet"))
    assert len(files) == 1
    frame = pd.read_parquet(files[0])
    # stages 0, 1, 2 x 2 tasks x 2 evaluations x test and validation
    assert set(frame["task_name"]) == {"my-shapes", "my-arrays"} and len(frame) == 3 * 2 * 2 * 2
    assert frame["accuracy"].between(0, 1).all()


def test_train_prepares_missing_data(spec_file: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    spec_file.write_text(MIXTURE_SPEC.replace("[my-shapes, my-arrays]", "[my-arrays]"))
    result = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--seeds", "0", "--results",
                                 str(tmp_path / "results"), "--data-dir", str(data_dir), *TINY])
    assert result.exit_code == 0, result.output
    assert len(prepared(data_dir, "my-arrays")) == 1 and not prepared(data_dir, "my-shapes")
    assert len(list((tmp_path / "results").glob("mine/sgd/*/seed-0/accuracy.parquet"))) == 1


def test_changed_data_is_a_new_run(spec_file: Path, tmp_path: Path) -> None:
    args = ["train", str(spec_file), "-m", "sgd", "--seeds", "0", "--results", str(tmp_path / "results"),
            "--data-dir", str(tmp_path / "data"), *TINY]
    spec_file.write_text(MIXTURE_SPEC.replace("[my-shapes, my-arrays]", "[my-arrays]"))
    assert runner.invoke(app, args).exit_code == 0
    write_npz(spec_file.parent / "arrays.npz", x_test=constant_images([70, 80]))
    assert runner.invoke(app, args).exit_code == 0
    runs = [json.loads(path.read_text()) for path in (tmp_path / "results").glob("mine/sgd/*/seed-0/run.json")]
    assert len(runs) == 2 and len({run["data_hash"] for run in runs}) == 2
    assert len(prepared(tmp_path / "data", "my-arrays")) == 2



def test_fetch_force_converts_a_spec_own_data_set_again(spec_file: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    fetch = ["fetch", str(spec_file), "--data-dir", str(data_dir)]
    assert runner.invoke(app, fetch).exit_code == 0
    (manifest,) = prepared(data_dir, "my-arrays")
    stored = manifest.parent / "mnist28" / "test_images.npy"
    np.save(stored, np.zeros((2, 1, 28, 28), np.uint8))  # damaged in place: same shape and size, so still valid
    assert runner.invoke(app, fetch).exit_code == 0
    assert np.load(stored).max() == 0  # without --force the cache is taken as it is
    assert runner.invoke(app, [*fetch, "--force"]).exit_code == 0
    assert np.load(stored)[:, 0, 0, 0].tolist() == [50, 60]  # the npz's x_test converted again

def test_fetch_bad_image_exits_2_naming_the_file(spec_file: Path, tmp_path: Path) -> None:
    broken = spec_file.parent / "my-shapes" / "test" / "a_circle" / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 truncated")
    result = runner.invoke(app, ["fetch", str(spec_file), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2
    assert "broken.jpg" in result.output
    assert len(prepared(tmp_path / "data", "my-arrays")) == 1  # the other data set is still prepared


def test_unknown_data_set_exits_2(spec_file: Path, tmp_path: Path) -> None:
    spec_file.write_text(MIXTURE_SPEC.replace("[my-shapes, my-arrays]", "[my-shapes, my-aray]"))
    result = runner.invoke(app, ["train", str(spec_file), "-m", "sgd", "--seeds", "0", "--results",
                                 str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), *TINY])
    assert result.exit_code == 2
    assert "unknown data set my-aray; known:" in " ".join(result.output.split())


def test_list_counts_tasks_and_parameters(spec_file: Path) -> None:
    from clbench.cli.listing import parameter_counts
    from clbench.spec import load_benchmark

    result = runner.invoke(app, ["list", "-b", str(spec_file), "--no-parameters"])
    assert result.exit_code == 0, result.output
    spec = load_benchmark(str(spec_file))
    # alexnet [4, 4, 4] convs, fc [8, 8]; the heads (2 classes + 2 classes) add 2 * (8 * 2 + 2) parameters
    counts = parameter_counts(spec)
    heads = parameter_counts(load_benchmark(str(spec_file), ["data.datasets=[my-shapes]"]))
    assert counts["sgd"] - heads["sgd"] == 8 * 2 + 2


def test_bench_times_a_spec_with_its_own_data_on_the_real_files(spec_file: Path, tmp_path: Path) -> None:
    data_dir, results = tmp_path / "data", tmp_path / "results"
    result = runner.invoke(app, ["bench", str(spec_file), "-m", "sgd", "--batches", "2", "--device", "cpu",
                                 "--data-dir", str(data_dir), "--results", str(results)])
    assert result.exit_code == 0, result.output
    assert "synthetic" not in result.output
    [stored] = sorted(results.glob("_bench/mine-*.parquet"))
    frame = pd.read_parquet(stored)
    assert list(frame["method"]) == ["sgd"] and list(frame["data"]) == ["real"]
    assert (frame["forward_backward_ms"] > 0).all()
    assert len(prepared(data_dir, "my-shapes")) == 1  # converted into the cache, as train does


def test_bench_mixing_own_and_uncached_built_in_data_times_synthetic_built_ins(spec_file: Path,
                                                                              tmp_path: Path) -> None:
    spec_file.write_text(MIXTURE_SPEC.replace("[my-shapes, my-arrays]", "[my-shapes, cifar10]"))
    results = tmp_path / "results"
    result = runner.invoke(app, ["bench", str(spec_file), "-m", "sgd", "--batches", "2", "--device", "cpu",
                                 "--epoch", "extrapolate", "--data-dir", str(tmp_path / "data"),
                                 "--results", str(results)])
    assert result.exit_code == 0, result.output
    [stored] = sorted(results.glob("_bench/mine-*.parquet"))
    assert list(pd.read_parquet(stored)["data"]) == ["synthetic"]  # cifar10 is not cached here


def test_bench_with_a_missing_own_data_set_exits_1_naming_it(spec_file: Path, tmp_path: Path) -> None:
    (spec_file.parent / "arrays.npz").unlink()
    result = runner.invoke(app, ["bench", str(spec_file), "-m", "sgd", "--batches", "2", "--device", "cpu",
                                 "--data-dir", str(tmp_path / "data"), "--results", str(tmp_path / "results")])
    assert result.exit_code == 1  # data that is missing and cannot be fetched: a runtime failure
    assert "my-arrays" in result.output and "no npz file" in " ".join(result.output.split())
