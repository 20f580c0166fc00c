"""Many runs at once: worker processes, device slots, dying workers, Ctrl-C, and two commands on one folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import torch
from runhelpers import Recorder
from synthetic import SyntheticLoader, synthetic_loader, tiny_spec
from typer.testing import CliRunner

from clbench.cli import app
from clbench.errors import ClbenchError
from clbench.results import read_run_file
from clbench.run.engine import execute
from clbench.run.execution import Execution, check_execution, parse_devices
from clbench.run.plan import plan_runs
from clbench.run.scheduler import RunRequest, run_in_processes, run_request, slot_devices

CPU = torch.device("cpu")
SPEC = tiny_spec("mlp")
TESTS = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class DyingLoader:
    """Kills its own process, like the kernel's out-of-memory killer would."""

    def __call__(self, name: str, form: str):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGKILL)


def numbers(rows: list[dict]) -> list[tuple[float, float]]:
    return [(row["accuracy"], row["loss"]) for row in rows]


def test_worker_slots_take_the_devices_round_robin() -> None:
    assert slot_devices(5, ["cuda:0", "cuda:1"]) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert parse_devices("0, 1,cpu,cuda:3") == ("cuda:0", "cuda:1", "cpu", "cuda:3")


@pytest.mark.parametrize("execution", [
    Execution(jobs=0), Execution(executor="slurm"), Execution(device="cpu", devices=("cpu",)),
    Execution(devices=("tpu:0",)), Execution(executor="ray", jobs=2), Execution(executor="ray", gpus_per_run=0),
])
def test_bad_execution_options_are_refused_before_any_work(execution: Execution) -> None:
    with pytest.raises(ClbenchError):
        check_execution(execution)


def test_check_execution_resolves_the_local_devices() -> None:
    assert check_execution(Execution(device="cpu", jobs=2)).devices == ("cpu",)
    assert check_execution(Execution(devices=("cpu", "cpu:0"))).devices == ("cpu", "cpu:0")


def test_a_failing_run_becomes_a_failed_outcome(tmp_path: Path) -> None:
    [plan] = plan_runs(SPEC, ["sgd"], [0], tmp_path)

    def broken(name: str, form: str):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    outcome = run_request(RunRequest(plan, "cpu", broken), Recorder())
    assert outcome.status == "failed" and "disk on fire" in outcome.error and not outcome.succeeded


def test_a_worker_process_gives_the_serial_numbers_and_its_death_fails_only_its_run(tmp_path: Path) -> None:
    plans = plan_runs(SPEC, ["sgd"], [0, 1], tmp_path / "pool")
    requests = [RunRequest(plans[0], "", SyntheticLoader(), threads=1), RunRequest(plans[1], "", DyingLoader())]
    recorder = Recorder()
    done, died = run_in_processes(requests, 1, ["cpu"], recorder)
    assert (done.status, died.status) == ("done", "failed") and "exited with code" in died.error
    [reference] = plan_runs(SPEC, ["sgd"], [0], tmp_path / "serial")
    assert numbers(done.rows) == numbers(execute(reference, device=CPU, loader=synthetic_loader()).rows)
    assert recorder.of("task_finished", done.plan.run_id) == [0, 1, 2]  # events came back from the worker
    assert recorder.of("ended", died.plan.run_id) == ["failed"]


@pytest.mark.slow
def test_workers_give_the_serial_numbers_and_survive_a_dying_worker(tmp_path: Path) -> None:
    plans = plan_runs(SPEC, ["sgd", "ewc"], [0], tmp_path / "pool") + plan_runs(SPEC, ["sgd"], [1], tmp_path / "pool")
    requests = [RunRequest(plans[0], "", SyntheticLoader(), threads=1),
                RunRequest(plans[1], "", SyntheticLoader(), threads=1), RunRequest(plans[2], "", DyingLoader())]
    recorder = Recorder()
    outcomes = run_in_processes(requests, 2, ["cpu", "cpu:0"], recorder)

    assert [outcome.status for outcome in outcomes] == ["done", "done", "failed"]
    assert "exited with code" in outcomes[2].error and not (plans[2].run_dir / "accuracy.parquet").exists()
    for outcome in outcomes[:2]:
        [reference] = plan_runs(SPEC, [outcome.plan.method], [0], tmp_path / "serial")
        assert numbers(outcome.rows) == numbers(execute(reference, device=CPU, loader=synthetic_loader()).rows)
        assert recorder.of("task_finished", outcome.plan.run_id) == [0, 1, 2]
        [device] = recorder.of("launched", outcome.plan.run_id)
        assert set(pd.read_parquet(outcome.plan.run_dir / "accuracy.parquet")["device"]) == {device}
    assert {recorder.of("launched", plan.run_id)[0] for plan in plans[:2]} == {"cpu", "cpu:0"}  # one per slot


# ---------------------------------------------------------------------- two commands, one results folder

TWO_COMMANDS = """\
import json, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from runhelpers import Recorder, slow
from synthetic import SyntheticLoader, tiny_spec
SPEC = tiny_spec("mlp")
from clbench.run.plan import plan_runs
from clbench.run.scheduler import RunRequest, run_serially
folder = Path({folder!r})
(folder / "ready-{name}").touch()
deadline = time.monotonic() + 60
while len(list(folder.glob("ready-*"))) < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
plans = [slow(plan) for plan in plan_runs(SPEC, ["sgd"], [0, 1, 2, 3], folder / "results")]
outcomes = run_serially([RunRequest(plan, "cpu", SyntheticLoader()) for plan in plans], Recorder())
(folder / "{name}.json").write_text(json.dumps([[o.plan.run_id, o.status] for o in outcomes]))
"""


@pytest.mark.slow
def test_two_commands_on_one_results_folder_never_run_a_run_twice(tmp_path: Path) -> None:
    children = [subprocess.Popen([sys.executable, "-c", TWO_COMMANDS.format(
        tests=str(TESTS), folder=str(tmp_path), name=name)],
        env={**os.environ, "OMP_NUM_THREADS": "1"}) for name in ("a", "b")]
    assert [child.wait(timeout=300) for child in children] == [0, 0]
    statuses: dict[str, list[str]] = {}
    for name in ("a", "b"):
        for run_id, status in json.loads((tmp_path / f"{name}.json").read_text()):
            statuses.setdefault(run_id, []).append(status)
    assert len(statuses) == 4
    assert all(sorted(found) in (["done", "locked"], ["done", "skipped"]) for found in statuses.values())
    assert any("locked" in found for found in statuses.values())  # they really ran at the same time
    for plan in plan_runs(SPEC, ["sgd"], [0, 1, 2, 3], tmp_path / "results"):
        reference = execute(plan_runs(SPEC, ["sgd"], [plan.seed], tmp_path / "serial")[0], device=CPU,
                            loader=synthetic_loader())
        stored = pd.read_parquet(plan.run_dir / "accuracy.parquet")
        assert list(zip(stored["accuracy"], stored["loss"])) == numbers(reference.rows)
        assert read_run_file(plan.run_dir)["previous_status"] is None  # started once, never restarted
    assert not list((tmp_path / "results").rglob("*.tmp"))


# ---------------------------------------------------------------------- Ctrl-C with --jobs

JOBS_CHILD = """\
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even when pytest runs in the
# background (started with SIGINT ignored; the workers this child spawns would inherit that)
sys.path.insert(0, {tests!r})
import clbench.run.loaders as loaders
import clbench.run.plan as planning
from runhelpers import slow
from synthetic import SyntheticLoader
plan_runs = planning.plan_runs
planning.plan_runs = lambda *args, **kwargs: [slow(plan) for plan in plan_runs(*args, **kwargs)]
loaders.fetching_loader = lambda data_dir, mirror: SyntheticLoader()
loaders.prepare_data = lambda specs, data_dir, mirror: None
from clbench.cli import main
sys.argv = ["clbench"] + {arguments!r}
main()
"""

TINY_YAML = """\
name: tiny
description: tiny synthetic benchmark
data: {kind: split, datasets: [mnist], classes_per_task: [4], remainder: keep, form: mnist28,
       shuffle_tasks: false}
network: {kind: mlp, hidden: [32, 32]}
training: {lr: 0.05, patience: 2, max_epochs: 4, batch_size: 32, eval_batch_size: 256}
"""


@pytest.fixture
def synthetic_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """`clbench train` in this process on synthetic data (a loader that worker processes can receive), with
    one torch thread per worker as in this process (CPU numbers depend on the thread count)."""
    import clbench.run.loaders as loaders

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(loaders, "fetching_loader", lambda data_dir, mirror: SyntheticLoader())
    monkeypatch.setattr(loaders, "prepare_data", lambda specs, data_dir, mirror: None)


@pytest.mark.slow
def test_ctrl_c_with_jobs_interrupts_every_worker_then_the_command_resumes(tmp_path: Path,
                                                                           synthetic_cli: None) -> None:
    spec_file = tmp_path / "tiny.yaml"
    spec_file.write_text(TINY_YAML)
    arguments = ["train", str(spec_file), "-m", "sgd", "--seeds", "0-2", "--jobs", "2", "--results",
                 str(tmp_path / "results"), "--device", "cpu"]
    log = tmp_path / "child.log"
    with open(log, "wb") as stream:  # its own session: a terminal's Ctrl-C reaches the whole process group
        child = subprocess.Popen([sys.executable, "-c", JOBS_CHILD.format(
            tests=str(TESTS), arguments=arguments)], stdout=stream,
            stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not list((tmp_path / "results").rglob("stage-01.pt")):
        assert child.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGINT)
    assert child.wait(timeout=120) == 130, log.read_text()

    run_files = [read_run_file(path.parent) for path in (tmp_path / "results").rglob("run.json")]
    assert 1 <= len(run_files) <= 2  # seed 2 never started
    assert {info["status"] for info in run_files} == {"interrupted"}
    assert not list((tmp_path / "results").rglob("*.tmp")) and not list((tmp_path / "results").rglob("accuracy*"))

    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    for plan in plan_runs(SPEC, ["sgd"], [0, 1, 2], tmp_path / "serial"):
        reference = execute(plan, device=CPU, loader=synthetic_loader())
        [run_dir] = (tmp_path / "results" / "tiny" / "sgd").glob(f"*/seed-{plan.seed}")
        stored = pd.read_parquet(run_dir / "accuracy.parquet")
        assert list(zip(stored["accuracy"], stored["loss"])) == numbers(reference.rows)
