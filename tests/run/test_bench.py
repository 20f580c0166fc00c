"""`clbench.run.bench`: timings of the real loop, the stored Parquet, synthetic data; the amp and compile switches."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from synthetic import TINY_TRAINING, make_approach, synthetic_loader, tiny_spec, tiny_tasks

from clbench.approaches.hat.network import build_hat_network
from clbench.data.tasks import build_tasks
from clbench.errors import SpecError
from clbench.nets import build_network, compile_network
from clbench.run.bench import BENCH_COLUMNS, BenchSettings, run_bench, time_training_step, timed_approach, write_bench
from clbench.run.bench_data import bench_tasks, first_datasets, sequence_head_sizes
from clbench.run.bench_data import synthetic_loader as bench_synthetic_loader
from clbench.run.plan import run_config
from clbench.spec import load_benchmark
from clbench.spec.fields import stable_hash

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny_run():  # type: ignore[no-untyped-def]
    return run_bench(tiny_spec("mlp"), ["sgd", "hat", "random"], CPU, BenchSettings(batches=2),
                     loader=synthetic_loader(), loader_data="synthetic")


def test_bench_gives_finite_positive_timings_for_sgd_and_hat(tiny_run) -> None:  # type: ignore[no-untyped-def]
    assert [result.method for result in tiny_run.results] == ["sgd", "hat"]
    for result in tiny_run.results:
        values = (result.forward_ms, result.forward_backward_ms, result.epoch_seconds, result.peak_memory_mb)
        assert all(math.isfinite(value) and value > 0 for value in values), result
        assert result.stage == 1 and result.batch_size == TINY_TRAINING.batch_size
        assert result.epoch_mode == "extrapolated"  # auto on CPU
    assert tiny_run.results[0].config_hash != tiny_run.results[1].config_hash
    assert set(tiny_run.skipped) == {"random"}  # nothing to train, nothing to time


def test_bench_writes_parquet_with_exactly_the_columns(tiny_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_bench(tiny_run, tmp_path)
    assert path.parent == tmp_path / "_bench" and path.name.startswith("tiny-") and path.suffix == ".parquet"
    frame = pd.read_parquet(path)
    assert list(frame.columns) == list(BENCH_COLUMNS)
    assert list(frame["method"]) == ["sgd", "hat"] and set(frame["data"]) == {"synthetic"}
    assert (frame["device"] == "cpu").all() and (frame["n_batches"] == 2).all()
    assert frame[["forward_ms", "forward_backward_ms", "epoch_seconds", "peak_memory_mb"]].gt(0).all().all()
    assert write_bench(tiny_run, tmp_path) != path  # same second: a new file, never an overwrite
    assert b"clbench" in pq.read_schema(path).metadata
    from clbench.report.timing import latest_bench

    # the time table reads the bench files with every column they have, and an empty folder with the same ones
    assert list(latest_bench(tmp_path, "tiny").columns) == list(frame.columns)
    assert list(latest_bench(tmp_path / "empty", "tiny").columns) == list(frame.columns)


def test_measured_epoch_runs_the_whole_first_task() -> None:
    spec = tiny_spec("mlp")
    run = run_bench(spec, ["sgd"], CPU, BenchSettings(batches=1, epoch="measure"), loader=synthetic_loader())
    tasks = tiny_tasks(spec)
    result = run.results[0]
    assert result.epoch_mode == "measured" and result.epoch_seconds > 0
    assert result.epoch_batches == math.ceil(len(tasks[0].train) / TINY_TRAINING.batch_size)


def test_training_step_is_timed_at_stage_one_with_hat_masks_active() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = timed_approach(spec, "hat", tasks, tasks.head_sizes, CPU, 0)
    seconds, stage, sequence = time_training_step(approach, tasks, batches=2, setup_batches=1)
    assert stage == 1 and seconds > 0
    assert len(approach.task_masks) == 2 and approach.multipliers  # task 0 ended before stage 1 was timed
    stage_one = [epoch for epoch in approach.timed_epochs if epoch.stage == 1]
    assert len(stage_one) == 2 and all(epoch.size == 2 for epoch in stage_one)  # warm-up + timed epoch
    assert len(sequence[1].train) == 2 * TINY_TRAINING.batch_size


def test_unknown_method_fails_before_any_work() -> None:
    with pytest.raises(SpecError, match="unknown method"):
        run_bench(tiny_spec("mlp"), ["sgd", "nope"], CPU, loader=synthetic_loader())


def test_uncached_data_are_synthetic_of_the_real_shapes(tmp_path: Path) -> None:
    spec = load_benchmark("mnist2", ["data.max_train_samples=200", "data.max_test_samples=50"])
    tasks, data = bench_tasks(spec, 0, CPU, data_dir=tmp_path)
    assert data == "synthetic" and len(tasks) == 2
    assert tasks.input_shape == (784,) and tasks.head_sizes == (5, 5)
    assert tasks[0].train.images.dtype == torch.uint8 and tasks[0].train.images.shape[1:] == (1, 28, 28)


@pytest.mark.parametrize("benchmark", ["mixture8", "cifar-incremental"])
@pytest.mark.parametrize("seed", [0, 1])
def test_first_tasks_and_head_sizes_follow_the_seeded_order(benchmark: str, seed: int) -> None:
    spec = load_benchmark(benchmark)
    full = build_tasks(spec.data, seed, bench_synthetic_loader(()))  # every data set tiny
    assert sequence_head_sizes(spec, seed) == full.head_sizes
    assert first_datasets(spec, seed) == {name.split(":")[0] for name in full.names[:2]}


def test_max_tasks_keeps_the_first_tasks_unchanged() -> None:
    spec = tiny_spec("mlp", kind="permuted")
    full, first = tiny_tasks(spec), build_tasks(spec.data, 0, synthetic_loader(), "cpu", max_tasks=2)
    assert first.names == full.names[:2]
    for a, b in zip(first.tasks, full.tasks):
        assert torch.equal(a.train.images, b.train.images) and torch.equal(a.valid.labels, b.valid.labels)
        assert torch.equal(a.train.batch(torch.arange(5)).inputs, b.train.batch(torch.arange(5)).inputs)


def test_batch_gather_equals_plain_indexing_with_permutation() -> None:
    tasks = tiny_tasks(tiny_spec("mlp", kind="permuted"))
    data = tasks[1].train
    indices = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))[:7]
    x = data.images[indices].float().div(255.0)
    transform = data.transform
    x = ((x - transform.mean[1][:, None, None]) / transform.std[1][:, None, None]).flatten(1)
    batch = data.batch(indices)
    assert torch.equal(batch.inputs, x[:, transform.permutations[1]])
    assert torch.equal(batch.targets, data.labels[indices])


# ---------------------------------------------------------------------------------------------- amp / compile
def test_amp_bf16_trains_a_tiny_task_without_nan() -> None:
    spec = tiny_spec("mlp", training=replace(TINY_TRAINING, amp="bf16"))
    tasks = tiny_tasks(spec)
    approach = make_approach("hat", spec, tasks)
    x = tasks[0].train.batch(torch.arange(4)).inputs
    with approach.autocast():
        assert approach.network.layers[0](x).dtype == torch.bfloat16  # autocast is on
    log = approach.learn_task(0, tasks)
    evaluation = approach.evaluate(tasks[0].test, 0)
    assert math.isfinite(log.best_valid_loss) and math.isfinite(evaluation.loss)
    assert evaluation.accuracy > 0.5  # learned (chance: 0.25)
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in approach.network.parameters())


def test_amp_none_keeps_float32() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    approach = make_approach("sgd", spec, tasks)
    with approach.autocast():
        assert approach.network.layers[0](tasks[0].train.batch(torch.arange(4)).inputs).dtype == torch.float32


@pytest.mark.parametrize("override", ["training.amp=bf16", "training.compile=true"])
def test_numerics_switches_change_the_config_hash(override: str) -> None:
    from clbench.approaches.resolution import resolve

    plain, switched = load_benchmark("mnist2"), load_benchmark("mnist2", [override])
    assert stable_hash(run_config(plain, resolve(plain, "hat"))) != stable_hash(
        run_config(switched, resolve(switched, "hat")))


def test_unknown_amp_value_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="training.amp"):
        load_benchmark("mnist2", ["training.amp=fp16"])


def test_compile_network_keeps_parameter_names() -> None:
    spec = tiny_spec("mlp")
    plain = build_network(spec.network, (784,), (4, 4))
    gated = build_hat_network(spec.network, (784,), (4, 4), smax=400.0)
    for network, compiled_attribute in ((plain, "features"), (gated, "gated_features")):
        keys = list(network.state_dict())
        compile_network(network)  # lazy: nothing is compiled before the first call
        assert compiled_attribute in vars(network) and list(network.state_dict()) == keys


@pytest.mark.slow
def test_compiled_network_trains_like_eager() -> None:
    spec = tiny_spec("mlp")
    tasks = tiny_tasks(spec)
    eager = make_approach("hat", spec, tasks)
    compiled = make_approach("hat", tiny_spec("mlp", training=replace(TINY_TRAINING, compile=True)), tasks)
    assert "gated_features" in vars(compiled.network)
    eager.learn_task(0, tasks)
    compiled.learn_task(0, tasks)
    a, b = eager.evaluate(tasks[0].test, 0), compiled.evaluate(tasks[0].test, 0)
    assert math.isfinite(b.loss) and abs(a.accuracy - b.accuracy) < 0.1
