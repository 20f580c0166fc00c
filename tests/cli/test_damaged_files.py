"""Damaged result files: `report` names them and goes on; `train` re-makes the run from its last readable checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from clihelpers import NPZ_SPEC_IN_ORDER, TINY, flat, pasted_commands
from filebuilders import constant_images, write_npz
from resultbuilders import write_run, write_run_json
from typer.testing import CliRunner

from clbench import run_files
from clbench.cli import app

runner = CliRunner()
SPEC = NPZ_SPEC_IN_ORDER



def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


# ---------------------------------------------------------------- report


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """sgd seeds 0 and 1 with their references, each with a run.json."""
    root = tmp_path / "results"
    for seed in (0, 1):
        for method in ("sgd", "joint", "random"):
            accuracy = {"sgd": 0.8, "joint": 0.9, "random": 0.5}[method]
            run_dir = write_run(root, method, seed, [[0.9], [accuracy, 0.9]])
            write_run_json(run_dir, config={"benchmark": "b"}, parameters=10)
    return root


def report(results: Path, *options: str) -> tuple[int, str]:
    result = runner.invoke(app, ["report", "b", "--results", str(results), *options])
    return result.exit_code, flat(result.output)


@pytest.mark.parametrize("damage", ["truncated", "empty", "no rows"])
def test_report_names_a_damaged_accuracy_file_and_goes_on(damage: str, results: Path) -> None:
    path = results / "b" / "sgd" / "c0" / "seed-1" / "accuracy.parquet"
    if damage == "truncated":
        truncate(path)
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        pd.read_parquet(path).iloc[:0].to_parquet(path)
    for options in ([], ["--summary"], ["--time"]):
        code, output = report(results, *options)
        assert code == 0, output
        assert f"left out b/sgd/c0/seed-1: {path} is damaged" in output
        assert f"`clbench train b -m sgd --seeds 1 --results {results}` (with the same --set options) re-runs it" \
            in output  # its run.json records no --set options
    code, output = report(results, "--metric", "accuracy")
    assert "| sgd | 90.0 (–) | 85.0 (–) | 1 |" in output  # seed 0 alone


@pytest.mark.parametrize("content", ["[1, 2]", '"complete"', '{"status": "compl', ""])
def test_report_names_a_run_json_that_is_not_an_object_and_goes_on(content: str, results: Path) -> None:
    path = results / "b" / "sgd" / "c0" / "seed-1" / "run.json"
    path.write_text(content)
    for options in ([], ["--summary"], ["--table", "--monitoring"]):
        code, output = report(results, *options)
        assert code == 0, output
        assert f"left out b/sgd/c0/seed-1: {path} is damaged" in output
    report_all = runner.invoke(app, ["report", "--results", str(results)])  # every benchmark: reads spec_file
    assert report_all.exit_code == 0, report_all.output


def test_report_names_the_damaged_run_json_of_an_unfinished_run(results: Path) -> None:
    run_dir = results / "b" / "sgd" / "c1" / "seed-0"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("[]")
    code, output = report(results)
    assert code == 0, output
    assert f"left out b/sgd/c1/seed-0: {run_dir / 'run.json'} is damaged: a JSON list, not an object" in output


# ---------------------------------------------------------------- train


@pytest.fixture
def trained(tmp_path: Path) -> Path:
    """A finished two-task sgd run of a tiny npz benchmark; returns its run folder."""
    write_npz(tmp_path / "arrays.npz", x_train=constant_images([10, 20, 30, 40] * 2),
              y_train=np.array([0, 1, 2, 3] * 2), x_test=constant_images([15, 25, 35, 45]),
              y_test=np.array([0, 1, 2, 3]))
    (tmp_path / "my.yaml").write_text(SPEC)
    assert train(tmp_path)[0] == 0
    (run_dir,) = sorted((tmp_path / "results").glob("mine/sgd/*/seed-0"))
    return run_dir


def train(project: Path, *options: str) -> tuple[int, str]:
    result = runner.invoke(app, ["train", str(project / "my.yaml"), "-m", "sgd", "--seeds", "0", "--results",
                                 str(project / "results"), "--data-dir", str(project / "data"), *TINY, *options])
    return result.exit_code, flat(result.output)


def accuracies(run_dir: Path) -> list[tuple[int, int, float, float]]:
    frame = pd.read_parquet(run_dir / "accuracy.parquet")
    return list(zip(frame["stage"], frame["task"], frame["accuracy"], frame["loss"]))


def test_train_remakes_a_run_whose_accuracy_file_is_truncated(trained: Path) -> None:
    before = accuracies(trained)
    truncate(trained / "accuracy.parquet")
    code, output = train(trained.parents[3].parent)
    assert code == 0, output
    assert "1 done" in output and "skipped" not in output and "damaged, so re-made" in output
    header = json.loads((trained / "run.json").read_text())
    assert header["status"] == "complete" and header["resumed_after_stage"] == 2  # from the last checkpoint
    size = len((trained / "accuracy.parquet").read_bytes())
    assert header["damaged_files"] == [f"{trained / 'accuracy.parquet'} is damaged: {size // 2} bytes, not the {size} "
                                       f"written (truncated or emptied?)"]  # the manifest's record
    assert accuracies(trained) == before


@pytest.mark.parametrize("trouble", ["damaged", "failed"])
def test_the_commands_a_report_prints_for_a_left_out_run_work_when_pasted(trouble: str, trained: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `clbench train` of the report's notes (re-run the left-out run, make the missing references) runs as
    pasted, from another folder (the data cache from the environment), into the same results folder."""
    project = trained.parents[3].parent
    assert train(project, "--seeds", "1")[0] == 0  # a finished run beside it: the report goes on
    before = accuracies(trained)
    if trouble == "damaged":
        truncate(trained / "accuracy.parquet")
    else:
        (trained / "accuracy.parquet").unlink()
        header = json.loads((trained / "run.json").read_text())
        run_files.write_run_json(trained / "run.json", {**header, "status": "failed", "error": "RuntimeError: oom"})
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("CLBENCH_DATA", str(project / "data"))
    report = runner.invoke(app, ["report", str(project / "my.yaml"), "--results", str(project / "results")])
    assert report.exit_code == 0, report.output
    commands = pasted_commands(report.output, "clbench train")
    assert [command[command.index("-m") + 1] for command in commands] == ["sgd", "joint,random"], report.output
    for command in commands:
        pasted = runner.invoke(app, command)
        assert pasted.exit_code == 0, (command, pasted.output)
    assert accuracies(trained) == before
    assert len(list((project / "results" / "mine").glob("*/*/seed-1/accuracy.parquet"))) == 3  # + joint, random
    assert not (elsewhere / "results").exists()


def test_train_remakes_a_run_whose_run_json_is_not_an_object(trained: Path) -> None:
    before = accuracies(trained)
    size = (trained / "run.json").stat().st_size
    (trained / "run.json").write_text("[]")
    code, output = train(trained.parents[3].parent)
    assert code == 0, output
    assert "1 done" in output and "damaged, so re-made" in output
    header = json.loads((trained / "run.json").read_text())
    assert header["status"] == "complete" and header["resumed_after_stage"] == 2
    assert header["damaged_files"] == [f"{trained / 'run.json'} is damaged: 2 bytes, not the {size} written "
                                       f"(truncated or emptied?)"]  # its size in the manifest, not the new run.json
    assert accuracies(trained) == before


def test_a_truncated_last_checkpoint_is_named_and_the_previous_one_is_used(trained: Path) -> None:
    before = accuracies(trained)
    (trained / "accuracy.parquet").unlink()  # as if killed after writing the last checkpoint
    truncate(trained / "checkpoints" / "stage-02.pt")
    code, output = train(trained.parents[3].parent)
    assert code == 0, output
    header = json.loads((trained / "run.json").read_text())
    assert header["resumed_after_stage"] == 1
    assert len(header["damaged_files"]) == 1
    assert header["damaged_files"][0].startswith(f"{trained / 'checkpoints' / 'stage-02.pt'} is damaged: ")
    assert "damaged, so re-made" in output
    assert accuracies(trained) == before  # the resumed run gives the uninterrupted numbers


def test_evaluate_names_a_truncated_checkpoint(trained: Path) -> None:
    project = trained.parents[3].parent
    truncate(trained / "checkpoints" / "stage-01.pt")
    result = runner.invoke(app, ["evaluate", str(project / "my.yaml"), "-m", "sgd", "--seeds", "0", "--results",
                                 str(project / "results"), "--data-dir", str(project / "data"), *TINY])
    assert result.exit_code == 1, result.output  # a damaged stored file: a runtime failure
    assert f"{trained / 'checkpoints' / 'stage-01.pt'} is damaged" in flat(result.output)
    command = (f"clbench train {project / 'my.yaml'} -m sgd --seeds 0 {' '.join(TINY[:4])} --results "
               f"{project / 'results'}")
    assert f"`{command}` remakes it from the run's last good checkpoint" in flat(result.output)
