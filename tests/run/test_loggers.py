"""`clbench train --log tensorboard,csv,wandb`: the training logs hold the run's epochs and its stored accuracies at
increasing global steps, a resumed run logs each step once, loggers change no stored number, a failing logger is
reported once, and a logger whose package is missing is refused before any training."""

from __future__ import annotations

import importlib.abc
import logging
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import syscalltrace
import torch
from clihelpers import NPZ_SPEC, TINY, invoke_fresh
from filebuilders import write_npz
from importchecks import assert_imports_no_torch, cli_code
from logreaders import csv_rows, csv_series, tensorboard_scalars, wandb_run
from stopping import Stop, StopInTask2
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec

from clbench.approaches.registry import REGISTRY
from clbench.run.engine import SilentObserver, execute
from clbench.run.loggers.csv_writer import COLUMNS, CsvWriter
from clbench.run.loggers.wandb_writer import CACHE_FOLDER
from clbench.run.plan import RunPlan, plan_runs

CPU = torch.device("cpu")
SPEC = tiny_spec("mlp", n_tasks=2, training=replace(TINY_TRAINING, max_epochs=2))  # 2 tasks x 2 epochs
TIMING = ["stage_train_seconds", "stage_eval_seconds", "started_utc", "finished_utc"]
LOGGER_MODULE = "clbench.run.loggers.run_loggers"
REPO = Path(__file__).resolve().parents[2]


class EpochRecorder(SilentObserver):
    def __init__(self) -> None:
        self.epochs: list = []

    def epoch_finished(self, plan, epoch) -> None:  # type: ignore[no-untyped-def]
        self.epochs.append(epoch)


def train(results: Path, method: str = "sgd", loggers: tuple[str, ...] = (), spec=SPEC,  # type: ignore[no-untyped-def]
          observer=None) -> RunPlan:
    [plan] = plan_runs(spec, [method], [0], results)
    outcome = execute(plan, device=CPU, loader=synthetic_loader(), observer=observer, loggers=loggers)
    assert outcome.status == "done", outcome.error
    return plan


def stored(plan: RunPlan) -> pd.DataFrame:
    return pd.read_parquet(plan.run_dir / "accuracy.parquet")


def test_records(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["split"] == "test"]


test_records.__test__ = False  # a helper, not a test


def expected_stage_scalars(frame: pd.DataFrame) -> dict[str, list[tuple[int, float]]]:
    """By hand from the stored rows: each task's test accuracy per evaluation at steps 0, 2, 4 (2 epochs a stage)
    and their mean over the learned tasks from stage 1."""
    expected: dict[str, list[tuple[int, float]]] = {}
    for (stage, evaluation), group in test_records(frame).groupby(["stage", "evaluation"], sort=True):
        for task, accuracy in zip(group["task"], group["accuracy"]):
            expected.setdefault(f"accuracy/{evaluation}/task{task}", []).append((2 * stage, accuracy))
        if stage:
            learned = group[group["task"] <= stage]["accuracy"]
            expected.setdefault(f"accuracy/{evaluation}/mean", []).append((2 * stage, learned.mean()))
    return expected


def test_tensorboard_holds_the_epochs_and_the_stored_accuracies_at_increasing_steps(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    recorder = EpochRecorder()
    plan = train(tmp_path, "sgd", ("tensorboard",), observer=recorder)
    frame = stored(plan)
    assert set(frame["stage_epochs"].dropna()) == {2}
    scalars = tensorboard_scalars(plan.run_dir / "logs")
    epochs = recorder.epochs
    assert [(e.stage, e.epoch) for e in epochs] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    for tag, field in (("train/loss", "train_loss"), ("train/lr", "lr"), ("valid/loss", "valid_loss"),
                       ("valid/accuracy", "valid_accuracy")):
        assert [step for step, _ in scalars[tag]] == [1, 2, 3, 4], tag
        assert [value for _, value in scalars[tag]] == [np.float32(getattr(e, field)) for e in epochs], tag
    assert scalars["train/task"] == [(1, 1.0), (2, 1.0), (3, 2.0), (4, 2.0)]
    assert [step for step, _ in scalars["valid/accuracy/task2"]] == [3, 4]
    expected = expected_stage_scalars(frame)
    assert {"accuracy/task-aware/task2", "accuracy/task-agnostic/mean"} <= set(expected)
    for tag, points in expected.items():
        assert scalars[tag] == [(step, np.float32(value)) for step, value in points], tag
    assert not [tag for tag in scalars if tag.startswith("approach/")]  # sgd has no scalars of its own


def test_the_csv_holds_exactly_the_epochs_and_the_stored_accuracies(tmp_path: Path) -> None:
    recorder = EpochRecorder()
    plan = train(tmp_path, "sgd", ("csv",), observer=recorder)
    rows = csv_rows(plan.run_dir / "logs" / "scalars.csv")
    assert tuple(rows[0]) == COLUMNS == ("step", "stage", "epoch", "tag", "value")
    frame = test_records(stored(plan))
    expected: list[list[str]] = []

    def add_stage(stage: int) -> None:
        group = frame[frame["stage"] == stage]
        cells = [(f"accuracy/{e}/task{t}", a) for t, e, a in zip(group["task"], group["evaluation"], group["accuracy"])]
        for evaluation in ("task-aware", "task-agnostic"):
            learned = group[(group["evaluation"] == evaluation) & (group["task"] <= stage)]["accuracy"]
            cells += [(f"accuracy/{evaluation}/mean", math.fsum(learned) / len(learned))] if stage else []
        expected.extend([str(2 * stage), str(stage), "", tag, repr(float(value))] for tag, value in cells)

    add_stage(0)
    for index, epoch in enumerate(recorder.epochs):
        task = epoch.stage + 1
        expected.extend([str(index + 1), str(task), str(epoch.epoch), tag, repr(float(value))] for tag, value in (
            ("train/loss", epoch.train_loss), ("train/lr", epoch.lr), ("train/task", task),
            ("valid/loss", epoch.valid_loss), ("valid/accuracy", epoch.valid_accuracy),
            (f"valid/accuracy/task{task}", epoch.valid_accuracy)))
        if epoch.epoch == 2:
            add_stage(task)
    assert rows[1:] == expected


def test_a_stage_without_epochs_still_takes_a_step(tmp_path: Path) -> None:
    """The random classifier trains no epoch: its stages' evaluations are at steps 0, 1, 2."""
    plan = train(tmp_path, "random", ("csv",))
    series = csv_series(plan.run_dir / "logs" / "scalars.csv")
    assert [step for step, _ in series["accuracy/task-aware/task1"]] == [0, 1, 2]
    assert [step for step, _ in series["accuracy/task-aware/mean"]] == [1, 2]


@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_approach_logs_at_increasing_steps(method: str, tmp_path: Path) -> None:
    """Every approach (PathNet: no task evaluated at initialisation; PackNet: two phases a task) logs each tag at
    strictly increasing steps, its epochs at 1, 2, 3, ... and the last stage at the run's last step."""
    plan = train(tmp_path, method, ("csv",))
    series = csv_series(plan.run_dir / "logs" / "scalars.csv")
    for tag, points in series.items():
        steps = [step for step, _ in points]
        assert steps == sorted(set(steps)), tag
    epochs = [step for step, _ in series.get("train/loss", [])]
    assert epochs == list(range(1, len(epochs) + 1))
    assert series["accuracy/task-aware/mean"][-1][0] == max(len(epochs), 2)  # 2 tasks


RESUME_SPEC = tiny_spec("mlp", n_tasks=2, training=replace(TINY_TRAINING, max_epochs=3, early_stopping=False))


@pytest.mark.parametrize("method", ["sgd", "hat"])
def test_a_resumed_run_logs_each_step_once_with_the_uninterrupted_values(method: str, tmp_path: Path) -> None:
    """Stopped at epoch 2 of task 2 (step 5: steps 4 and 5 written), resumed after task 1: the logs read back as
    those of an uninterrupted run, each step once."""
    loggers = ("csv", "tensorboard") if has_module("tensorboard") else ("csv",)
    reference = train(tmp_path / "reference", method, loggers, RESUME_SPEC)
    [plan] = plan_runs(RESUME_SPEC, [method], [0], tmp_path / "stopped")
    with pytest.raises(Stop):
        execute(plan, device=CPU, loader=synthetic_loader(), observer=StopInTask2(), loggers=loggers)
    csv_file = plan.run_dir / "logs" / "scalars.csv"
    assert max(step for step, _ in csv_series(csv_file)["train/loss"]) == 5  # written, then dropped on resume
    assert execute(plan, device=CPU, loader=synthetic_loader(), loggers=loggers).resumed_after_stage == 1
    reference_csv = reference.run_dir / "logs" / "scalars.csv"
    assert csv_rows(csv_file) == csv_rows(reference_csv)
    assert [step for step, _ in csv_series(csv_file)["train/loss"]] == [1, 2, 3, 4, 5, 6]
    if "tensorboard" in loggers:
        resumed = tensorboard_scalars(plan.run_dir / "logs")
        assert len(list((plan.run_dir / "logs").glob("events.out.tfevents.*"))) == 2
        assert resumed == tensorboard_scalars(reference.run_dir / "logs")
        assert [step for step, _ in resumed["train/loss"]] == [1, 2, 3, 4, 5, 6]
        assert [step for step, _ in resumed["accuracy/task-aware/task2"]] == [0, 3, 6]


@pytest.mark.parametrize("method", ["hat", "si", "mas", "er", "agem"])
def test_loggers_change_no_stored_number(method: str, tmp_path: Path) -> None:
    """The same run with and without `--log csv` (which asks the approach for its scalars every epoch): the same
    rows, timing columns apart."""
    plain = stored(train(tmp_path / "plain", method)).drop(columns=TIMING)
    plan = train(tmp_path / "logged", method, ("csv",))
    logged = stored(plan).drop(columns=TIMING)
    pd.testing.assert_frame_equal(plain, logged)
    assert [tag for tag in csv_series(plan.run_dir / "logs" / "scalars.csv") if tag.startswith("approach/")]


def test_every_logger_at_once_changes_no_stored_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    offline_wandb(tmp_path, monkeypatch)
    plain = stored(train(tmp_path / "plain", "hat")).drop(columns=TIMING)
    logged = stored(train(tmp_path / "logged", "hat", ("tensorboard", "csv", "wandb"))).drop(columns=TIMING)
    pd.testing.assert_frame_equal(plain, logged)


def test_approach_scalars_are_what_the_approach_holds(tmp_path: Path) -> None:
    """HAT's capacity fractions lie in (0, 1], the cumulative one at least the task's; ER's memory fills up."""
    series = csv_series(train(tmp_path, "hat", ("csv",)).run_dir / "logs" / "scalars.csv")
    task, used = series["approach/task_capacity"], series["approach/capacity_used"]
    assert [step for step, _ in task] == [1, 2, 3, 4]
    assert all(0 < t <= u <= 1 for (_, t), (_, u) in zip(task, used))
    fill = csv_series(train(tmp_path / "er", "er", ("csv",)).run_dir / "logs" / "scalars.csv")["approach/buffer_fill"]
    assert fill[-1][1] == 1.0 and [value for _, value in fill] == sorted(value for _, value in fill)


def test_a_logger_that_raises_is_reported_once_and_the_run_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def broken(self, record) -> None:  # type: ignore[no-untyped-def]
        raise OSError("disk full")

    monkeypatch.setattr(CsvWriter, "write", broken)
    plain = stored(train(tmp_path / "plain", "si")).drop(columns=TIMING)
    with caplog.at_level(logging.WARNING, logger=LOGGER_MODULE):
        logged = stored(train(tmp_path / "logged", "si", ("csv",))).drop(columns=TIMING)
    pd.testing.assert_frame_equal(plain, logged)
    warnings = [record for record in caplog.records if record.name == LOGGER_MODULE]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING and "OSError" in warnings[0].getMessage()


def test_failing_approach_scalars_are_reported_once_and_the_epochs_still_logged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from clbench.approaches.hat.approach import Hat

    def broken(self, stage):  # type: ignore[no-untyped-def]
        raise RuntimeError("no masks")

    monkeypatch.setattr(Hat, "log_scalars", broken)
    with caplog.at_level(logging.WARNING, logger=LOGGER_MODULE):
        plan = train(tmp_path, "hat", ("csv",))
    assert len([record for record in caplog.records if record.name == LOGGER_MODULE]) == 1
    series = csv_series(plan.run_dir / "logs" / "scalars.csv")
    assert [step for step, _ in series["train/loss"]] == [1, 2, 3, 4]
    assert not [tag for tag in series if tag.startswith("approach/")]


# ---------------------------------------------------------------------------------------------- W&B
def offline_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No WANDB_MODE (so clbench's default, offline, applies) and W&B's own files under `tmp_path`."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))


def test_a_wandb_offline_run_holds_the_same_scalars_as_the_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    offline_wandb(tmp_path, monkeypatch)
    plan = train(tmp_path / "r", "er", ("csv", "wandb"))
    name, series = wandb_run(plan.run_dir / "logs")
    assert name == plan.run_id == f"{SPEC.name}/er/{plan.config_hash}/seed-0"
    expected = csv_series(plan.run_dir / "logs" / "scalars.csv")
    assert {"train/loss", "approach/buffer_fill", "accuracy/task-agnostic/mean"} <= set(expected)
    assert series == expected


def test_a_wandb_run_writes_its_service_logs_in_its_folder_and_restores_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B's cache (its service's debug logs) is the run folder's, even where WANDB_CACHE_DIR names another; the
    variables set while W&B starts are restored once it has."""
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    offline_wandb(tmp_path, monkeypatch)
    before = dict(os.environ)
    plan = train(tmp_path / "r", "sgd", ("wandb",))
    assert dict(os.environ) == before
    assert list((plan.run_dir / "logs" / CACHE_FOLDER).rglob("*.log"))
    assert not Path(os.environ["WANDB_CACHE_DIR"]).exists()


def test_wandb_that_cannot_start_is_reported_once_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    wandb = pytest.importorskip("wandb", reason="the wandb extra is not installed")

    def unreachable(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise TimeoutError("no network")

    monkeypatch.setattr(wandb, "init", unreachable)
    with caplog.at_level(logging.WARNING, logger=LOGGER_MODULE):
        plan = train(tmp_path, "sgd", ("wandb", "csv"))
    assert len([record for record in caplog.records if record.name == LOGGER_MODULE]) == 1
    assert (plan.run_dir / "logs" / "scalars.csv").is_file()


def traced_training(tmp_path: Path, loggers: str) -> tuple[Path, list[str]]:
    """`clbench train` of two seeds with `loggers`, without network, under strace, in `tmp_path/work` with HOME and
    TMPDIR fresh folders beside it: the working folder and the trace."""
    work = tmp_path / "work"
    for folder in (work, tmp_path / "home", tmp_path / "tmp"):
        folder.mkdir()
    write_npz(work / "arrays.npz")
    (work / "my.yaml").write_text(NPZ_SPEC)
    command = [sys.executable, "-m", "clbench", "train", "my.yaml", "-m", "sgd", "--seeds", "0-1", "--results", "r",
               "--data-dir", "data", *TINY, "--log", loggers]
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path / "tmp"),
                   "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}  # no WANDB_* variable
    done = subprocess.run(syscalltrace.traced(command, tmp_path / "trace"), cwd=work, env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return work, syscalltrace.trace_lines(tmp_path / "trace")


@pytest.mark.slow
def test_offline_wandb_sends_nothing_and_every_logger_writes_only_in_its_run_folder(tmp_path: Path) -> None:
    """Two seeds with every logger: no connection, no name lookup; no file in HOME; only transient sockets in
    TMPDIR; every file written under the results inside its own run folder (the data cache, clbench's transient
    write check aside; its `git status` of its own checkout writes no lock file there)."""
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    reason = syscalltrace.unavailable()
    if reason:
        pytest.skip(reason)
    work, lines = traced_training(tmp_path, "tensorboard,csv,wandb")
    assert syscalltrace.network_attempts(lines) == []
    created = syscalltrace.created_paths(lines, work)
    assert any(path.suffix == ".wandb" for _, path in created)  # the trace saw the W&B run being written
    assert syscalltrace.outside(created, work, tmp_path / "tmp") == []
    assert list((tmp_path / "home").iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []
    run_dirs = sorted(path.parent.parent for path in (work / "r").glob("*/*/*/seed-*/logs/scalars.csv"))
    assert [path.name for path in run_dirs] == ["seed-0", "seed-1"]
    files = [(call, path) for call, path in created if not call.startswith("mkdir")]
    assert syscalltrace.outside([item for item in files if item[1].is_relative_to(work / "r")], *run_dirs) == []
    for run_dir in run_dirs:  # each run's W&B service ran for that run alone and wrote its log there
        assert list((run_dir / "logs").glob("wandb/offline-run-*/run-*.wandb"))
        assert list((run_dir / "logs" / CACHE_FOLDER).rglob("*.log"))
    assert sorted(path.name for path in work.iterdir()) == ["arrays.npz", "data", "my.yaml", "r"]


# ---------------------------------------------------------------------------------------------- the CLI
def has_module(name: str) -> bool:
    from clbench.run.loggers.choice import module_installed

    return module_installed(name)


class Refuse(importlib.abc.MetaPathFinder):
    """An import hook that hides one top-level package, as an environment without it would."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise ModuleNotFoundError(f"No module named {fullname!r}")
        return None


def npz_command(tmp_path: Path, *options: str) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_npz(tmp_path / "arrays.npz")
    (tmp_path / "my.yaml").write_text(NPZ_SPEC)
    return ["train", str(tmp_path / "my.yaml"), "-m", "sgd", "--results", str(tmp_path / "r"), "--data-dir",
            str(tmp_path / "data"), *TINY, *options]


@pytest.mark.parametrize("hidden", ["sys.modules", "import hook"])
@pytest.mark.parametrize("logger", ["tensorboard", "wandb"])
def test_a_logger_that_is_not_installed_is_refused_before_any_training(
        logger: str, hidden: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == logger or name.startswith(logger + ".")]:
        monkeypatch.delitem(sys.modules, name)
    if hidden == "sys.modules":
        monkeypatch.setitem(sys.modules, logger, None)
    else:
        monkeypatch.setattr(sys, "meta_path", [Refuse(logger), *sys.meta_path])
    code, output = invoke_fresh(*npz_command(tmp_path, "--log", f"csv,{logger}"))
    assert code == 2, output
    assert output == (f"error: --log {logger}: the package {logger} is not installed; install it with "
                      f"`pip install 'clbench[{logger}]'`")
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
    monkeypatch.setenv("CLBENCH_LOG", logger)
    code, output = invoke_fresh(*npz_command(tmp_path))
    assert code == 2 and f"pip install 'clbench[{logger}]'" in output, output


def test_an_unknown_logger_is_refused(tmp_path: Path) -> None:
    code, output = invoke_fresh(*npz_command(tmp_path, "--log", "csv,mlflow"))
    assert code == 2, output
    assert "unknown logger 'mlflow'; choose from tensorboard, csv, wandb" in output


def test_the_option_wins_over_the_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLBENCH_LOG", "csv")
    assert invoke_fresh(*npz_command(tmp_path / "from-environment"))[0] == 0
    assert list((tmp_path / "from-environment" / "r").glob("*/*/*/seed-0/logs/scalars.csv"))
    monkeypatch.setenv("CLBENCH_LOG", "mlflow")  # would be refused
    code, output = invoke_fresh(*npz_command(tmp_path / "option", "--log", "csv"))
    assert code == 0, output
    assert list((tmp_path / "option" / "r").glob("*/*/*/seed-0/logs/scalars.csv"))
    monkeypatch.setenv("CLBENCH_LOG", "")
    assert invoke_fresh(*npz_command(tmp_path / "none"))[0] == 0
    assert not list((tmp_path / "none" / "r").glob("*/*/*/seed-0/logs"))


def test_help_and_the_logger_choice_import_no_torch_tensorboard_or_wandb() -> None:
    assert_imports_no_torch(cli_code(["--help"], ["train", "--help"]), also=("tensorboard", "wandb"))
    assert_imports_no_torch("import clbench.run.loggers; clbench.run.loggers.check_loggers(('csv',))",
                            also=("tensorboard", "wandb"))


def test_worker_processes_write_the_logs_of_their_runs(tmp_path: Path) -> None:
    """`--jobs 2`: the loggers travel with each run request and write in the worker that runs it."""
    from runhelpers import Recorder
    from synthetic import SyntheticLoader

    from clbench.run.execution import Execution, check_execution, run_plans

    plans = plan_runs(SPEC, ["sgd", "hat"], [0], tmp_path)
    execution = check_execution(Execution(device="cpu", jobs=2, loggers=("csv",)))
    outcomes = run_plans(plans, execution, SyntheticLoader(), Recorder())
    assert [outcome.status for outcome in outcomes] == ["done", "done"]
    for plan in plans:
        series = csv_series(plan.run_dir / "logs" / "scalars.csv")
        assert [step for step, _ in series["accuracy/task-aware/task1"]] == [0, 2, 4]
