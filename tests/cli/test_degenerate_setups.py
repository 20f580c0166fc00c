"""Setups that gave numbers without a word are refused: empty splits, one-class tasks, lr 0, seeds that do not exist."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from clihelpers import NPZ_SPEC, TINY, flat
from filebuilders import constant_images, write_image_folder, write_npz
from resultbuilders import write_run
from typer.testing import CliRunner

from clbench.cli import app
from clbench.data.sources import ImageSet, PreparedDataset
from clbench.data.tasks import build_tasks
from clbench.errors import ClbenchError
from clbench.report.loading import load_results
from clbench.report.tables import build_report
from clbench.spec import DataSpec

runner = CliRunner()
FOLDER_SPEC = """\
name: mine
datasets:
  my-shapes: {format: imagefolder, path: ./my-shapes}
data: {kind: split, datasets: [my-shapes], classes_per_task: [2], form: mnist28, validation_fraction: 0.3}
network: {kind: mlp, hidden: [8]}
"""



def train(spec: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["train", str(spec), "-m", "sgd", "--seeds", "0", "--results",
                                 str(tmp_path / "results"), "--data-dir", str(tmp_path / "data"), *TINY, *extra])
    return result.exit_code, flat(result.output)


@pytest.fixture
def empty_test_npz(tmp_path: Path) -> Path:
    """An npz spec whose x_test is empty (its one task, classes 3 and 7, has no test images)."""
    write_npz(tmp_path / "arrays.npz", x_test=np.zeros((0, 28, 28), np.uint8), y_test=np.zeros(0, np.int64))
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    return tmp_path / "my.yaml"


def test_train_refuses_a_task_without_test_samples_naming_it(empty_test_npz: Path, tmp_path: Path) -> None:
    code, output = train(empty_test_npz, tmp_path)
    assert code == 2, output
    assert "task my-arrays:0-1 (classes 3, 7): no test samples (training 3, validation 1, test 0" in output
    assert not list((tmp_path / "results").rglob("run.json"))


def test_fetch_refuses_a_task_without_test_samples_naming_it(empty_test_npz: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["fetch", str(empty_test_npz), "--data-dir", str(tmp_path / "data")])
    assert result.exit_code == 2, result.output
    assert "task my-arrays:0-1 (classes 3, 7): no test samples" in flat(result.output)


def test_an_image_folder_whose_test_split_lacks_a_whole_task_is_refused(tmp_path: Path) -> None:
    colours = {name: [(10 * i, 20, 30), (40, 10 * i, 50), (1, 2, 3 * i)] for i, name in enumerate("abcd", 1)}
    write_image_folder(tmp_path / "my-shapes", train=colours, test={"a": [(1, 1, 1)], "b": [(2, 2, 2)]})
    (tmp_path / "my.yaml").write_text(FOLDER_SPEC)
    code, output = train(tmp_path / "my.yaml", tmp_path)
    assert code == 2, output
    assert "task my-shapes:2-3 (classes c, d): no test samples" in output


def test_a_task_without_validation_samples_is_refused(tmp_path: Path) -> None:
    write_npz(tmp_path / "arrays.npz", x_train=constant_images([10, 20]), y_train=np.array([3, 7]))
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    code, output = train(tmp_path / "my.yaml", tmp_path)
    assert code == 2, output
    assert "(classes 3, 7): no validation samples (training 2, validation 0, test 2" in output


def test_building_tasks_refuses_an_empty_split_naming_the_task_and_classes() -> None:
    """The guard in every run (built-in data sets, evaluate, bench), beside the up-front check of own data."""
    images = np.zeros((8, 1, 28, 28), np.uint8)
    labels = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    dataset = PreparedDataset("toy", 4, ImageSet(images, labels), ImageSet(images[:2], labels[:2]), (0.5,), (0.5,))
    spec = DataSpec(kind="split", datasets=("mnist",), form="mnist28", classes_per_task=(2,), shuffle_tasks=False)
    with pytest.raises(ClbenchError, match=r"task toy:2-3 \(classes 2, 3\): no test samples"):
        build_tasks(spec, 0, lambda name, form: dataset)


@pytest.mark.parametrize("options", [["--set", "data.classes_per_task=[1]"],
                                     ["--set", "data.classes_per_task=[3]", "--set", "data.remainder=keep"]])
def test_one_class_tasks_are_refused(options: list[str], tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", "sgd", *options, "--results", str(tmp_path / "r"),
                                 "--data-dir", str(tmp_path / "data"), "--mirror", str(tmp_path / "no-mirror")])
    assert result.exit_code == 2, result.output
    assert "would have one class; a task needs at least two classes" in flat(result.output)
    assert not (tmp_path / "r").exists()


def test_a_one_class_data_set_is_refused(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "my-shapes", train={"only": [(1, 2, 3), (4, 5, 6), (7, 8, 9)]},
                       test={"only": [(1, 1, 1)]})
    (tmp_path / "my.yaml").write_text(FOLDER_SPEC.replace("kind: split", "kind: mixture"))
    code, output = train(tmp_path / "my.yaml", tmp_path)
    assert code == 2, output
    assert "task my-shapes (classes only): it has one class; a task needs at least two classes" in output


@pytest.mark.parametrize("option", ["training.lr=0", "hat.training.lr=0"])
def test_a_learning_rate_of_0_is_refused(option: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "mnist2", "-m", "hat", "--set", option, "--results", str(tmp_path / "r"),
                                 "--data-dir", str(tmp_path / "data"), "--mirror", str(tmp_path / "no-mirror")])
    assert result.exit_code == 2, result.output
    assert f"`{option.replace('hat.', 'approaches.hat.').split('=')[0]}` is 0.0; it must be > 0" in flat(result.output)


def test_report_names_seeds_that_no_run_has(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for method in ("sgd", "joint", "random"):
        write_run(results, method, 1, [[0.9], [0.8, 0.9]])
    report = build_report(results, "b", "accuracy", results=load_results(results, "b", seeds=[1, 9]))
    assert len(report.rows) == 3
    assert f"--seeds 1,9: no run of b has seed 9 in {results} (seeds there: 1)" in report.notes
    result = runner.invoke(app, ["report", "b", "--results", str(results), "--seeds", "1,9"])
    assert result.exit_code == 0, result.output
    assert "no run of b has seed 9" in flat(result.output)


REPORT_FORMATS = [[], ["--format", "csv"], ["--summary", "--format", "latex"], ["--time"], ["--html", "page.html"]]


@pytest.mark.parametrize("options", REPORT_FORMATS)
def test_a_seed_filter_that_matches_nothing_is_nothing_to_report(tmp_path: Path, options: list[str]) -> None:
    results = tmp_path / "results"
    write_run(results, "sgd", 1, [[0.9], [0.8, 0.9]])
    page = [str(tmp_path / option) if option.endswith(".html") else option for option in options]
    result = runner.invoke(app, ["report", "b", "--results", str(results), "--seeds", "5-6", *page])
    assert result.exit_code == 2, result.output
    assert flat(result.output) == (f"error: no run of b has --seeds 5-6 in {results} (seeds there: 1); train them "
                                   f"with `clbench train b -m METHOD --seeds 5-6 --results {results}`")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("options", REPORT_FORMATS[:2])
def test_an_unknown_benchmark_is_nothing_to_report(tmp_path: Path, options: list[str]) -> None:
    results = tmp_path / "results"
    write_run(results, "sgd", 1, [[0.9], [0.8, 0.9]])
    result = runner.invoke(app, ["report", "nosuch", "--results", str(results), *options])
    assert result.exit_code == 2, result.output
    assert f"error: no runs of nosuch in {results} (benchmarks there: b)" in flat(result.output)
    assert "\n" not in result.output.strip()  # one line
    # no `clbench train nosuch ...` to paste: no benchmark has that name, so train would refuse it
    assert "no benchmark is named nosuch" in flat(result.output) and "clbench train" not in result.output
    shipped = runner.invoke(app, ["report", "mnist5", "--results", str(results), *options])
    assert shipped.exit_code == 2 and f"clbench train mnist5 -m METHOD --seeds 0 --results {results}" in \
        flat(shipped.output)


def test_runs_that_never_finished_are_nothing_to_report(tmp_path: Path) -> None:
    from resultbuilders import write_run_json

    results = tmp_path / "results"
    write_run_json(results / "b" / "sgd" / "c0" / "seed-3", status="failed", error="boom")
    code = runner.invoke(app, ["report", "b", "--results", str(results)])
    assert code.exit_code == 2, code.output
    assert (f"no finished run of b in {results}: 1 started and did not finish; `clbench train b -m sgd --seeds 3 "
            f"--results {results}`") in flat(code.output)
    assert runner.invoke(app, ["report", "--results", str(results)]).exit_code == 2  # every benchmark: none


def test_a_benchmark_with_runs_is_reported_beside_one_without(tmp_path: Path) -> None:
    results = tmp_path / "results"
    write_run(results, "sgd", 1, [[0.9], [0.8, 0.9]])
    write_run(results, "sgd", 2, [[0.9], [0.8, 0.9]], benchmark="c")
    result = runner.invoke(app, ["report", "--results", str(results), "--seeds", "1"])
    assert result.exit_code == 0, result.output
    assert "--seeds 1: no run of c has seed 1" in flat(result.output)
