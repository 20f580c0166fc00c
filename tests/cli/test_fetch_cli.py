"""`clbench fetch` through Typer's runner: exit codes and files in the data folder."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
import typer
from importchecks import assert_imports_no_torch
from typer.testing import CliRunner

from clbench.cli.fetch import expand_names, fetch
from clbench.data import sources
from clbench.data.download import Checksum

MIXTURE8 = ("facescrub", "mnist", "cifar100", "notmnist", "svhn", "cifar10", "traffic-signs", "fashion-mnist")


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    app.command("fetch")(fetch)
    return app


def _write_idx_gz(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


@pytest.fixture
def tiny_mnist_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A mirror with tiny MNIST idx files; the registry is pinned to their md5s."""
    folder = tmp_path / "mirror" / "mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for prefix, count in (("train", 20), ("t10k", 10)):
        _write_idx_gz(folder / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (count, 28, 28)))
        _write_idx_gz(folder / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, count))
    md5 = {path.name: hashlib.md5(path.read_bytes()).hexdigest() for path in folder.iterdir()}
    real_get_source = sources.get_source

    def get_source(name: str) -> sources.DataSource:
        source = real_get_source(name)
        if name != "mnist":
            return source
        files = tuple(dataclasses.replace(f, checksum=Checksum("md5", md5[f.name])) for f in source.files)
        return dataclasses.replace(source, files=files)

    monkeypatch.setattr(sources, "get_source", get_source)
    return tmp_path / "mirror"


def test_fetch_prepares_the_data_set_from_a_mirror(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    arguments = ["mnist", "--data-dir", str(tmp_path / "data"), "--mirror", str(tiny_mnist_mirror)]

    result = CliRunner().invoke(app, arguments)

    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "mnist" / "manifest.json").is_file()
    assert np.load(tmp_path / "data" / "mnist" / "image32" / "train_images.npy").shape == (20, 3, 32, 32)


def test_mirror_and_data_dir_from_the_environment(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    env = {"CLBENCH_DATA": str(tmp_path / "env-data"), "CLBENCH_MIRROR": tiny_mnist_mirror.as_uri()}

    result = CliRunner().invoke(app, ["mnist"], env=env)

    assert result.exit_code == 0, result.output
    assert (tmp_path / "env-data" / "mnist" / "manifest.json").is_file()


def test_benchmark_name_expands_to_its_data_sets(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    arguments = ["mnist2", "--data-dir", str(tmp_path / "data"), "--mirror", str(tiny_mnist_mirror)]

    result = CliRunner().invoke(app, arguments)

    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["downloads", "mnist"]


def test_expand_names_keeps_order_and_drops_duplicates() -> None:
    assert expand_names(["mnist", "mnist2", "pmnist"]) == ["mnist"]
    assert expand_names(["cifar10", "mixture8"]) == ["cifar10", *[n for n in MIXTURE8 if n != "cifar10"]]
    assert expand_names(["cifar-incremental"]) == ["cifar10", "cifar100"]


def test_force_prepares_again(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    arguments = ["mnist", "--data-dir", str(tmp_path / "data"), "--mirror", str(tiny_mnist_mirror)]
    runner = CliRunner()
    assert runner.invoke(app, arguments).exit_code == 0
    manifest = tmp_path / "data" / "mnist" / "manifest.json"
    first = manifest.stat().st_mtime_ns

    assert runner.invoke(app, arguments).exit_code == 0
    assert manifest.stat().st_mtime_ns == first
    assert runner.invoke(app, [*arguments, "--force"]).exit_code == 0
    assert manifest.stat().st_mtime_ns != first


def test_list_works_on_an_empty_and_a_filled_data_folder(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    data_dir = str(tmp_path / "data")
    runner = CliRunner()

    assert runner.invoke(app, ["--list", "--data-dir", data_dir]).exit_code == 0
    assert runner.invoke(app, ["mnist", "--data-dir", data_dir, "--mirror", str(tiny_mnist_mirror)]).exit_code == 0
    assert runner.invoke(app, ["--list", "--data-dir", data_dir]).exit_code == 0
    assert not (tmp_path / "data" / "cifar10").exists()


@pytest.mark.parametrize("arguments", [["imagenet"], [], ["mnist", "--mirror", "ftp://example.org/x"]])
def test_usage_errors_exit_with_code_2(app, tmp_path: Path, arguments: list[str]) -> None:
    result = CliRunner().invoke(app, [*arguments, "--data-dir", str(tmp_path / "data")])

    assert result.exit_code == 2


def test_a_file_missing_from_the_mirror_exits_with_code_1(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    (tiny_mnist_mirror / "mnist" / "train-labels-idx1-ubyte.gz").unlink()
    arguments = ["mnist", "--data-dir", str(tmp_path / "data"), "--mirror", str(tiny_mnist_mirror)]

    result = CliRunner().invoke(app, arguments)

    assert result.exit_code == 1  # a runtime failure: data that cannot be fetched
    assert not (tmp_path / "data" / "mnist").exists()


def test_one_failure_does_not_stop_the_other_data_sets(app, tmp_path: Path, tiny_mnist_mirror: Path) -> None:
    arguments = ["cifar10", "mnist", "--data-dir", str(tmp_path / "data"), "--mirror", str(tiny_mnist_mirror)]

    result = CliRunner().invoke(app, arguments)

    assert result.exit_code == 1  # cifar10 is not in the mirror: a runtime failure
    assert (tmp_path / "data" / "mnist" / "manifest.json").is_file()
    assert not (tmp_path / "data" / "cifar10").exists()


def test_the_cli_module_imports_neither_torch_nor_numpy() -> None:
    assert_imports_no_torch("import clbench.cli.fetch", also=("numpy",))


@pytest.mark.slow
def test_fetch_real_mnist_and_fashion_from_the_shared_mirror(app, tmp_path: Path, shared_mirror: Path) -> None:
    result = CliRunner().invoke(
        app, ["mnist", "fashion-mnist", "--data-dir", str(tmp_path), "--mirror", str(shared_mirror.resolve())]
    )

    assert result.exit_code == 0, result.output
    for name in ("mnist", "fashion-mnist"):
        assert np.load(tmp_path / name / "mnist28" / "test_labels.npy").shape == (10000,)


def test_the_cli_reads_a_relative_mirror_and_cache_from_the_folder_it_started_in(
        app, tiny_mnist_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tiny_mnist_mirror.parent)
    monkeypatch.setenv("CLBENCH_MIRROR", tiny_mnist_mirror.name)
    monkeypatch.setenv("CLBENCH_DATA", "relative-cache")
    result = CliRunner().invoke(app, ["mnist"])
    assert result.exit_code == 0, result.output
    assert (tiny_mnist_mirror.parent / "relative-cache" / "mnist").is_dir()
