"""The CUDA paths: data, networks and approach state on the GPU, resume, amp, compile, bench, --devices.

Every test here needs a CUDA device and is skipped without one (CI has none). On a machine with a GPU the
default test command runs them; `pytest -m cuda` runs only these. Numerics on CUDA are compared with CUDA:
matrix products there differ from the CPU's in the last bits, so CPU and GPU accuracies are not equal.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from stopping import Stop, StopInTask2, same_numbers
from synthetic import TINY_TRAINING, synthetic_loader, tiny_spec
from typer.testing import CliRunner

from clbench.approaches.registry import REGISTRY
from clbench.data.tasks import build_tasks
from clbench.results import read_run_file
from clbench.run.bench import BenchSettings, run_bench
from clbench.run.bench_data import head
from clbench.run.checkpoints import resume_from_checkpoint
from clbench.run.engine import build_approach, execute
from clbench.run.plan import plan_runs

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

GPU = torch.device("cuda", 0)
SPEC = replace(tiny_spec("mlp", training=replace(TINY_TRAINING, max_epochs=3)),
               network=replace(tiny_spec("mlp").network, dropout=0.2))  # dropout: the CUDA RNG matters


def run(results: Path, method: str, spec=SPEC, observer=None):  # type: ignore[no-untyped-def]
    [plan] = plan_runs(spec, [method], [0], results)
    return execute(plan, device=GPU, loader=synthetic_loader(), observer=observer)


def tensors(value: object) -> list[torch.Tensor]:
    """Every tensor in a nested state (dicts, lists, tuples)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors(item)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in tensors(item)]
    return []


@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_approach_runs_and_resumes_on_cuda_with_the_uninterrupted_numbers(method: str, tmp_path: Path) -> None:
    reference = run(tmp_path / "reference", method)
    assert reference.status == "done" and read_run_file(reference.plan.run_dir)["device"] == "cuda:0"
    with pytest.raises(Stop):
        run(tmp_path / "stopped", method, observer=StopInTask2())
    torch.cuda.manual_seed(12345)  # whatever the process did meanwhile must not matter
    resumed = run(tmp_path / "stopped", method)
    assert resumed.status == "done" and same_numbers(reference.rows, resumed.rows)


@pytest.mark.parametrize("method", ["hat", "ewc", "imm-mode", "lwf", "pathnet", "pnn"])
def test_restored_approach_state_lives_on_the_gpu(method: str, tmp_path: Path) -> None:
    outcome = run(tmp_path, method)
    tasks = build_tasks(SPEC.data, 0, synthetic_loader(), GPU)
    assert tasks[0].train.images.device.type == "cuda" and tasks[0].train.images.dtype == torch.uint8
    approach = build_approach(outcome.plan, tasks, GPU)
    assert resume_from_checkpoint(outcome.plan.run_dir, approach, len(tasks))[0] == len(tasks)
    state = [*approach.network.state_dict().values(), *tensors(approach.extra_state())]
    on_cpu = [t.shape for t in state if t.device.type != "cuda" and t.dtype != torch.uint8]  # RNG states are uint8
    assert not on_cpu
    evaluation = approach.evaluate(tasks[0].test, 0)
    [stored] = [row["accuracy"] for row in outcome.rows if (row["stage"], row["task"], row["evaluation"],
                                                            row["split"]) == (3, 1, "task-aware", "test")]
    assert evaluation.accuracy == stored  # stage 3, task 1: the stored number


@pytest.mark.parametrize("switch", [{"amp": "bf16"}, {"compile": True}])
def test_amp_and_compile_train_hat_on_cuda_close_to_eager(switch: dict, tmp_path: Path) -> None:
    """On the MLP without dropout (compiled dropout draws other random numbers), which learns the synthetic tasks
    in a few epochs; the tiny conv net barely starts to, so its near-chance accuracies would compare noise. The
    test sets are small (about 40 images a task): 0.1 is four images."""
    spec = tiny_spec("mlp")
    eager = run(tmp_path / "eager", "hat", spec)
    switched = run(tmp_path / "switched", "hat", replace(spec, training=replace(spec.training, **switch)))
    assert switched.status == "done"
    for a, b in zip(eager.rows, switched.rows, strict=True):
        assert abs(a["accuracy"] - b["accuracy"]) <= 0.1, (a, b)


@pytest.mark.parametrize("switch", [{"amp": "bf16"}, {"compile": True}])
def test_amp_and_compile_run_hat_on_the_conv_net(switch: dict, tmp_path: Path) -> None:
    spec = tiny_spec("alexnet", training=replace(TINY_TRAINING, max_epochs=2, **switch))
    outcome = run(tmp_path, "hat", spec)
    assert outcome.status == "done" and len(outcome.rows) == 6 * 2  # stages x learned tasks, test and validation
    assert all(math.isfinite(row["loss"]) and 0 <= row["accuracy"] <= 1 for row in outcome.rows)


def host_syncs_in_epoch(approach, data, optimizer) -> int:  # type: ignore[no-untyped-def]
    """How many synchronising CUDA calls one training epoch makes (torch's sync debug mode, as warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            approach.train_epoch(1, 0, data, optimizer)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(warning.message) for warning in caught)


@pytest.mark.parametrize("method", ["sgd", "hat", "adahat", "ewc", "lwf", "imm-mode"])
def test_the_training_step_never_waits_for_the_gpu(method: str, tmp_path: Path) -> None:
    """No per-batch host synchronisation: an epoch of 8 batches synchronises as often as one of 2 (the loss is
    read once per epoch), at stage 2, where HAT's gradient masks and the penalties of task 1 are active."""
    tasks = build_tasks(SPEC.data, 0, synthetic_loader(n_train=2000), GPU)
    [plan] = plan_runs(SPEC, [method], [0], tmp_path)
    approach = build_approach(plan, tasks, GPU)
    approach.learn_task(0, tasks)
    approach.begin_task(1, tasks)
    optimizer = approach.make_optimizer(1, SPEC.training.lr)
    size = SPEC.training.batch_size
    warm_up, short, long = (host_syncs_in_epoch(approach, head(tasks[1].train, n * size), optimizer)
                            for n in (2, 2, 8))
    assert long == short, (warm_up, short, long)


def test_bench_on_cuda_measures_epochs_and_gpu_memory() -> None:
    result = run_bench(tiny_spec("alexnet"), ["hat"], GPU, BenchSettings(batches=3), loader=synthetic_loader(),
                       loader_data="synthetic")
    [row] = result.results
    assert row.epoch_mode == "measured"  # auto measures on CUDA
    assert row.forward_ms > 0 and row.forward_backward_ms > row.forward_ms and row.peak_memory_mb > 0
    assert result.device == GPU


def test_train_jobs_share_one_gpu(tmp_path: Path, mnist_data_dir: Path, mnist_mirror: Path) -> None:
    from clbench.cli import app

    results = tmp_path / "results"
    result = CliRunner().invoke(app, [
        "train", "mnist2", "-m", "sgd,hat", "--seeds", "0", "--jobs", "2", "--devices", "0,0",
        "--results", str(results), "--data-dir", str(mnist_data_dir), "--mirror", str(mnist_mirror),
        "--set", "data.max_train_samples=300", "--set", "data.max_test_samples=200",
        "--set", "training.max_epochs=1"])
    assert result.exit_code == 0, result.output
    runs = [read_run_file(path.parent) for path in results.glob("mnist2/*/*/seed-0/run.json")]
    assert len(runs) == 2 and {info["device"] for info in runs} == {"cuda:0"}
    assert all(info["status"] == "complete" for info in runs)
