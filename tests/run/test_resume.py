"""Nothing lost: a stopped run resumes after its last finished task and gives exactly the uninterrupted numbers.

In-process for every approach (the run is stopped in the middle of task 2 by an observer, the global RNG is
scrambled, then `execute` resumes it), and for real: `clbench train` in a child process killed with SIGKILL
(or stopped with SIGINT) during task 2, then the same command again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import SHORT_SETTINGS, TINY_TRAINING, synthetic_loader, tiny_resnet_spec, tiny_spec
from typer.testing import CliRunner

from clbench.approaches.registry import REGISTRY
from clbench.cli import app
from clbench.data.tasks import build_tasks
from clbench.nets import parameter_count
from clbench.results import read_run_file
from clbench.run.checkpoints import checkpoint_path, load_checkpoint
from clbench.run.engine import build_approach, execute
from clbench.run.locking import held_lock
from clbench.run.plan import plan_runs

CPU = torch.device("cpu")
TESTS = Path(__file__).resolve().parent.parent
# Dropout makes the global torch RNG matter: a resume that did not restore it would give other numbers.
SPEC = replace(tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3)),
               network=replace(tiny_spec("mlp").network, dropout=0.2))


def run(results: Path, method: str, spec=SPEC, observer=None, force: bool = False):  # type: ignore[no-untyped-def]
    if method in SHORT_SETTINGS:
        spec = replace(spec, approaches={method: SHORT_SETTINGS[method]})
    [plan] = plan_runs(spec, [method], [0], results)
    return execute(plan, device=CPU, loader=synthetic_loader(), observer=observer, force=force)


def stop_in_task_2(results: Path, method: str, spec=SPEC) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Stop):
        run(results, method, spec, observer=StopInTask2())
    torch.rand(1000)  # whatever the process did meanwhile must not matter


@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_approach_resumes_with_the_uninterrupted_numbers(method: str, tmp_path: Path) -> None:
    reference = run(tmp_path / "reference", method)
    stop_in_task_2(tmp_path / "stopped", method)
    spec = replace(SPEC, approaches={method: SHORT_SETTINGS[method]}) if method in SHORT_SETTINGS else SPEC
    [plan] = plan_runs(spec, [method], [0], tmp_path / "stopped")
    assert read_run_file(plan.run_dir)["status"] == "failed"
    resumed = run(tmp_path / "stopped", method)
    assert resumed.status == "done"
    # random has no epochs and gdumb passes each task's stream once: both stop once task 2 is finished
    assert resumed.resumed_after_stage == (2 if method in ("random", "gdumb") else 1)
    assert same_numbers(reference.rows, resumed.rows)
    stored = pd.read_parquet(plan.run_dir / "accuracy.parquet")
    assert stored["accuracy"].tolist() == [row["accuracy"] for row in reference.rows]
    info = read_run_file(plan.run_dir)
    assert info["status"] == "complete" and info["resumed_after_stage"] == resumed.resumed_after_stage
    assert info["previous_status"] == "failed"


def test_resume_restores_batch_norm_statistics_and_the_augment_stream(tmp_path: Path) -> None:
    """ResNet-18 (running statistics in the checkpointed state) with cropped and flipped training and replayed
    batches."""
    spec = tiny_resnet_spec(nf=4, augment=True, training=replace(TINY_TRAINING, max_epochs=3))
    reference = run(tmp_path / "reference", "er", spec)
    stop_in_task_2(tmp_path / "stopped", "er", spec)
    assert same_numbers(reference.rows, run(tmp_path / "stopped", "er", spec).rows)


def test_resume_restores_the_random_streams_of_the_conv_net(tmp_path: Path) -> None:
    spec = tiny_spec("alexnet", training=replace(TINY_TRAINING, max_epochs=3))  # conv and fc dropout
    reference = run(tmp_path / "reference", "hat", spec)
    stop_in_task_2(tmp_path / "stopped", "hat", spec)
    assert same_numbers(reference.rows, run(tmp_path / "stopped", "hat", spec).rows)


def test_checkpoint_keeps_every_random_stream_and_run_json_the_parameter_count(tmp_path: Path) -> None:
    outcome = run(tmp_path, "random")
    checkpoint = load_checkpoint(outcome.plan.run_dir, 0)
    assert {"torch_rng", "rows", "approach", "stage"} <= set(checkpoint)
    # random's guesses are seeded afresh per (stage, task, evaluation): it keeps no generator of its own
    assert "batch_generator" in checkpoint["approach"] and "guess_generator" not in checkpoint["approach"]["extra"]
    sgd = run(tmp_path, "sgd")

    tasks = build_tasks(SPEC.data, 0, synthetic_loader(), CPU)
    expected = parameter_count(build_approach(sgd.plan, tasks, CPU).network)
    assert read_run_file(sgd.plan.run_dir)["parameters"] == expected > 0


def test_force_starts_over_and_never_resumes_stale_checkpoints(tmp_path: Path) -> None:
    first = run(tmp_path, "sgd")
    assert checkpoint_path(first.plan.run_dir, 2).is_file()
    with pytest.raises(Stop):
        run(tmp_path, "sgd", observer=StopInTask2(), force=True)
    assert not (first.plan.run_dir / "accuracy.parquet").exists()
    assert not checkpoint_path(first.plan.run_dir, 2).exists()  # the old stage 3 is gone with the old run
    resumed = run(tmp_path, "sgd")
    assert resumed.resumed_after_stage == 1 and same_numbers(first.rows, resumed.rows)


def test_a_locked_run_is_left_alone(tmp_path: Path) -> None:
    [plan] = plan_runs(SPEC, ["sgd"], [0], tmp_path)
    with held_lock(plan.run_dir) as held:
        assert held
        outcome = run(tmp_path, "sgd")
        assert outcome.status == "locked" and f"pid {os.getpid()}" in outcome.error
        assert read_run_file(plan.run_dir) is None  # nothing written by the process that did not get the lock
    assert run(tmp_path, "sgd").status == "done"
    with held_lock(plan.run_dir):
        assert run(tmp_path, "sgd").status == "locked"  # even a finished run: someone may be re-running it


def test_stale_temporary_files_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    stop_in_task_2(tmp_path, "sgd")
    [plan] = plan_runs(SPEC, ["sgd"], [0], tmp_path)
    stale = [plan.run_dir / ".accuracy.parquet.x1.tmp", plan.run_dir / "checkpoints" / ".stage-02.pt.x2.tmp"]
    for path in stale:
        path.write_bytes(b"half")
    assert run(tmp_path, "sgd").status == "done"
    assert not any(path.exists() for path in stale)


# ---------------------------------------------------------------------- clbench train, killed for real

TINY_YAML = """\
name: tiny
description: tiny synthetic benchmark (3 tasks, MLP with dropout)
data: {kind: split, datasets: [mnist], classes_per_task: [4], remainder: keep, form: mnist28,
       shuffle_tasks: false}
network: {kind: mlp, hidden: [32, 32], dropout: 0.2}
training: {lr: 0.05, patience: 2, max_epochs: 4, batch_size: 32, eval_batch_size: 256}
"""

# The child is `clbench train` on synthetic data; every epoch of tasks >= 2 sleeps 0.3 s (numerics unchanged)
# so that the parent can stop it in the middle of task 2.
CHILD = """\
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises, even when pytest was started in the
# background (`cmd &` in a script starts it with SIGINT ignored, and the child would inherit that)
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
import synthetic
import clbench.run.loaders as loaders
from clbench.approaches.base import Approach
loaders.fetching_loader = lambda data_dir, mirror: synthetic.synthetic_loader()
loaders.prepare_data = lambda specs, data_dir, mirror: None
epoch = Approach.train_epoch
def slow_epoch(self, stage, *args):
    if stage >= 1:
        time.sleep(0.3)
    return epoch(self, stage, *args)
Approach.train_epoch = slow_epoch
from clbench.cli import main
sys.argv = ["clbench"] + {arguments!r}
main()
"""


@pytest.fixture
def synthetic_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """`clbench train` in this process on the synthetic loader."""
    import clbench.run.loaders as loaders

    monkeypatch.setattr(loaders, "fetching_loader", lambda data_dir, mirror: synthetic_loader())
    monkeypatch.setattr(loaders, "prepare_data", lambda specs, data_dir, mirror: None)


def train_arguments(spec_file: Path, method: str, results: Path) -> list[str]:
    return ["train", str(spec_file), "-m", method, "--seeds", "0", "--results", str(results), "--device", "cpu"]


def stop_child_in_task_2(arguments: list[str], run_root: Path, how: signal.Signals, log: Path) -> int:
    """Start `clbench train` in a child, wait for the task-1 checkpoint, signal it during task 2; its exit code."""
    code = CHILD.format(tests=str(TESTS), arguments=arguments)
    with open(log, "wb") as stream:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=stream, stderr=subprocess.STDOUT,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not list(run_root.glob("*/seed-0/checkpoints/stage-01.pt")):
        assert child.poll() is None, f"child ended early:\n{log.read_text()}"
        assert time.monotonic() < deadline, "no task-1 checkpoint after 120 s"
        time.sleep(0.05)
    time.sleep(0.4)  # in task 2: its 4 epochs sleep 1.2 s in all
    assert child.poll() is None, "the child finished before it could be stopped"
    child.send_signal(how)
    return child.wait(timeout=60)


@pytest.mark.parametrize(("method", "how"), [("sgd", signal.SIGKILL), ("ewc", signal.SIGINT),
                                             ("sgd", signal.SIGTERM),
                                             pytest.param("hat", signal.SIGKILL, marks=pytest.mark.slow),
                                             pytest.param("adahat", signal.SIGKILL, marks=pytest.mark.slow)])
def test_train_stopped_in_task_2_resumes_with_the_uninterrupted_numbers(
        method: str, how: signal.Signals, tmp_path: Path, synthetic_cli: None) -> None:
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(TINY_YAML)
    stopped = tmp_path / "stopped"
    exit_code = stop_child_in_task_2(train_arguments(spec_file, method, stopped), stopped / "tiny" / method, how,
                                     tmp_path / "child.log")
    [run_dir] = (stopped / "tiny" / method).glob("*/seed-0")
    info = read_run_file(run_dir)
    assert not (run_dir / "accuracy.parquet").exists() and not checkpoint_path(run_dir, 1).exists()
    if how in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, or a cluster's pre-emption
        assert exit_code == 130 and info["status"] == "interrupted"
        assert not list(stopped.rglob("*.tmp"))
    else:
        assert exit_code == -signal.SIGKILL and info["status"] == "running"

    runner = CliRunner()
    result = runner.invoke(app, train_arguments(spec_file, method, stopped))
    assert result.exit_code == 0, result.output
    assert read_run_file(run_dir)["resumed_after_stage"] == 1
    result = runner.invoke(app, train_arguments(spec_file, method, tmp_path / "uninterrupted"))
    assert result.exit_code == 0, result.output
    [reference_dir] = (tmp_path / "uninterrupted" / "tiny" / method).glob("*/seed-0")
    resumed = pd.read_parquet(run_dir / "accuracy.parquet")
    reference = pd.read_parquet(reference_dir / "accuracy.parquet")
    evaluations = 1 if REGISTRY[method].needs_task_id else 2  # hat: task-aware rows only
    assert len(resumed) == 4 * 3 * evaluations * 2  # stages 0-3 x 3 tasks x the evaluations x test and validation
    assert resumed["accuracy"].tolist() == reference["accuracy"].tolist()
    assert resumed["loss"].tolist() == reference["loss"].tolist()
