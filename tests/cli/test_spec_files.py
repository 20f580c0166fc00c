"""A spec file works wherever a benchmark name does, and the commands clbench prints work when pasted.

Real MNIST (tiny subsample) from the mirror, a spec named `mine` written by the test, relative paths from the
test's working folder: printed commands must name `mine.yaml` as given, not the bare name `mine`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from clbench.cli import app

runner = CliRunner()

SPEC = """
name: mine
description: "two tasks of split MNIST, a tiny MLP (a test's own benchmark)"
data: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28, shuffle_tasks: false,
       max_train_samples: 300, max_test_samples: 200}
network: {kind: mlp, hidden: [16]}
training: {max_epochs: 1, batch_size: 64}
approaches: {sgd: {clip_grad_norm: 10000}}
"""


def printed_commands(output: str) -> list[list[str]]:
    """Every `clbench ...` command quoted in backticks in the output, split as a shell would."""
    return [shlex.split(text)[1:] for text in re.findall(r"`(clbench [^`]*)`", output)]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("work")
    (folder / "mine.yaml").write_text(SPEC)
    return folder


@pytest.fixture
def in_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch, mnist_data_dir: Path) -> Path:
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("CLBENCH_DATA", str(mnist_data_dir))
    return workdir


@pytest.fixture(scope="module")
def trained_sgd(workdir: Path, mnist_data_dir: Path) -> str:
    """`clbench train mine.yaml -m sgd` run from the work folder; returns its output."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setenv("CLBENCH_DATA", str(mnist_data_dir))
        result = runner.invoke(app, ["train", "mine.yaml", "-m", "sgd", "--seeds", "0", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    return result.output


def test_train_prints_a_report_command_with_the_spec_path(trained_sgd: str, in_workdir: Path) -> None:
    [command] = printed_commands(trained_sgd)
    assert command == ["report", "mine.yaml", "--results", "results"]
    assert list(in_workdir.glob("results/mine/sgd/*/seed-0/accuracy.parquet"))


def test_report_commands_pasted_as_printed_make_the_table(trained_sgd: str, in_workdir: Path) -> None:
    report = runner.invoke(app, printed_commands(trained_sgd)[0])
    assert report.exit_code == 0, report.output
    # no joint/random references yet: the note says how to make them, naming the spec file
    [train_references] = [c for c in printed_commands(report.output) if c[0] == "train"]
    assert train_references[:4] == ["train", "mine.yaml", "-m", "joint,random"]
    made = runner.invoke(app, [*train_references, "--device", "cpu"])
    assert made.exit_code == 0, made.output
    table = runner.invoke(app, ["report", "mine.yaml", "--format", "csv"])
    assert table.exit_code == 0, table.output
    rows = pd.read_csv(__import__("io").StringIO(table.output))
    assert set(rows["benchmark"]) == {"mine"} and set(rows["approach"]) == {"sgd"}
    assert rows["mean"].notna().all() and list(rows["stage"]) == [1, 2]


def test_report_by_spec_file_reads_the_runs_of_the_name_it_declares(trained_sgd: str, in_workdir: Path,
                                                                      tmp_path: Path) -> None:
    renamed = tmp_path / "other-file-name.yaml"
    renamed.write_text(SPEC)
    by_path = runner.invoke(app, ["report", str(renamed), "--metric", "accuracy", "--format", "csv"])
    by_name = runner.invoke(app, ["report", "mine", "--metric", "accuracy", "--format", "csv"])
    assert by_path.exit_code == 0 and by_name.exit_code == 0, by_path.output + by_name.output
    assert by_path.output == by_name.output and "sgd" in by_path.output


def test_report_of_a_missing_spec_file_exits_2(in_workdir: Path) -> None:
    result = runner.invoke(app, ["report", "missing.yaml"])
    assert result.exit_code == 2 and "missing.yaml" in result.output


def test_evaluate_takes_the_spec_file(trained_sgd: str, in_workdir: Path) -> None:
    result = runner.invoke(app, ["evaluate", "mine.yaml", "-m", "sgd", "--seeds", "0", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert list(in_workdir.glob("results/mine/sgd/*/seed-0/evaluation.parquet"))


def test_evaluate_of_an_untrained_run_prints_a_train_command_with_the_spec_path(in_workdir: Path) -> None:
    result = runner.invoke(app, ["evaluate", "mine.yaml", "-m", "sgd", "--seeds", "7", "--device", "cpu"])
    assert result.exit_code == 2
    [command] = printed_commands(result.output.replace("\n", " "))
    assert command == ["train", "mine.yaml", "-m", "sgd", "--seeds", "7", "--results", "results"]


def test_bench_and_list_take_the_spec_file(in_workdir: Path) -> None:
    bench = runner.invoke(app, ["bench", "mine.yaml", "-m", "sgd", "--device", "cpu", "--batches", "2"])
    assert bench.exit_code == 0, bench.output
    assert list(in_workdir.glob("results/_bench/mine-*.parquet"))
    listing = runner.invoke(app, ["list", "--benchmark", "mine.yaml"])
    assert listing.exit_code == 0, listing.output
    assert "mine" in listing.output and "two tasks of split MNIST" in listing.output


def test_bench_without_cached_data_prints_a_fetch_command_with_the_spec_path(in_workdir: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path,
                                                                             mnist_mirror: Path) -> None:
    monkeypatch.setenv("CLBENCH_DATA", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CLBENCH_MIRROR", str(mnist_mirror))
    bench = runner.invoke(app, ["bench", "mine.yaml", "-m", "sgd", "--device", "cpu", "--batches", "2",
                                "--results", str(tmp_path / "r")])
    assert bench.exit_code == 0, bench.output
    [command] = printed_commands(bench.output)
    # the data folder (here from CLBENCH_DATA) is named, so that the pasted fetch fills the cache bench reads
    assert command == ["fetch", "mine.yaml", "--data-dir", str(tmp_path / "empty-cache")]
    fetched = runner.invoke(app, command)  # pasted as printed: fetches the spec's data sets into the cache
    assert fetched.exit_code == 0, fetched.output
    assert (tmp_path / "empty-cache" / "mnist").is_dir()


def test_shipped_benchmarks_are_printed_by_name(tmp_path: Path) -> None:
    from clbench.spec import command_argument, load_benchmark

    assert command_argument(load_benchmark("mnist2")) == "mnist2"
    spec = tmp_path / "with space.yaml"
    spec.write_text(SPEC)
    assert command_argument(load_benchmark(str(spec))) == shlex.quote(str(spec))


def test_report_of_every_benchmark_names_the_spec_file_the_runs_came_from(in_workdir: Path) -> None:
    trained = runner.invoke(app, ["train", "mine.yaml", "-m", "sgd", "--seeds", "1", "--device", "cpu",
                                  "--results", "only-sgd"])
    assert trained.exit_code == 0, trained.output
    shipped = runner.invoke(app, ["train", "mnist2", "-m", "sgd", "--seeds", "1", "--device", "cpu",
                                  "--results", "only-sgd", "--set", "data.max_train_samples=300",
                                  "--set", "data.max_test_samples=200", "--set", "training.max_epochs=1",
                                  "--set", "network.hidden=[16]"])
    assert shipped.exit_code == 0, shipped.output
    report = runner.invoke(app, ["report", "--results", "only-sgd"])
    assert report.exit_code == 0, report.output
    commands = sorted(c[:4] for c in printed_commands(report.output) if c[0] == "train")
    assert commands == [["train", "mine.yaml", "-m", "joint,random"], ["train", "mnist2", "-m", "joint,random"]]
