"""Speed and memory of each approach on the current device, like the paper's appendix "Training Time".

Per approach (`run_bench`), on the benchmark's first two tasks in seeded order:

- `epoch_seconds`: one epoch of the first task as the loop runs it (the training pass and the validation
  pass), either measured (the second of two full epochs) or extrapolated from `batches` timed training
  batches and a validation subset, scaled to the task's size (`EPOCH_MODES`; `auto`: measured on CUDA,
  extrapolated on CPU). The choice is printed and stored in the Parquet file's metadata.
- `forward_backward_ms`: one real training step of the loop at stage 1 (batch gather and normalisation, the
  approach's `loss`, backward, `before_step`, gradient clipping, SGD step, `after_step`), so that HAT's
  gradient masks and every regulariser of earlier tasks are active: task 0 is first learned on a couple of
  batches (`learn_task`, with `end_task`), then task 1 on `batches` batches; the first of its epochs is the
  warm-up, a later one is timed.
- `forward_ms`: one evaluation forward pass (eval mode, no autograd, `predict` of task 1) of a training-size
  batch, timed over `batches` batches after a warm-up pass over the same batches.
- `peak_memory_mb`: `torch.cuda.max_memory_allocated` since the approach started (CUDA), or the process's
  peak resident set size so far (CPU; it includes Python, torch and the data, and never goes down).

CUDA timings synchronise the device before reading the clock. When the benchmark's data are not cached,
synthetic images of the real shapes and sizes stand in (`data` = "synthetic"; `clbench.run.bench_data`).
"""

from __future__ import annotations

import math
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

import clbench
from clbench.approaches.base import Approach
from clbench.approaches.datatypes import ApproachContext, Evaluation
from clbench.approaches.optim import StepOptimizer
from clbench.approaches.resolution import resolve
from clbench.data.batches import LabelledData, TaskSequence
from clbench.data.tasks import DatasetLoader
from clbench.errors import ClbenchError
from clbench.results import BENCH_COLUMNS, BENCH_FOLDER, utc_now, write_parquet
from clbench.run.bench_data import bench_tasks, sequence_head_sizes, shortened
from clbench.seeding import seed_global_torch
from clbench.spec import BenchmarkSpec
from clbench.spec.fields import stable_hash, to_dict

EPOCH_MODES = ("auto", "measure", "extrapolate")


class NothingToTime(ClbenchError):
    """The approach trains nothing (e.g. `random`) or not in epochs of the loop (`gdumb`), so it has no step to
    time."""


@dataclass(frozen=True)
class BenchSettings:
    """How much to measure: `batches` timed per measurement, the epoch mode, the seed."""

    batches: int = 50
    epoch: str = "auto"
    seed: int = 0
    setup_batches: int = 2  # batches of the short task-0 training before the stage-1 step

    def epoch_mode(self, device: torch.device) -> str:
        """measure or extrapolate (`auto`: measure on CUDA, where a full epoch takes seconds)."""
        if self.epoch not in EPOCH_MODES:
            raise ClbenchError(f"--epoch {self.epoch!r}: use one of {', '.join(EPOCH_MODES)}")
        if self.epoch == "auto":
            return "measure" if device.type == "cuda" else "extrapolate"
        return self.epoch


@dataclass(frozen=True)
class BenchResult:
    """One approach's measurements (times per batch in ms, the epoch in s, memory in MiB)."""

    method: str
    batch_size: int
    forward_ms: float
    forward_backward_ms: float
    epoch_seconds: float
    epoch_mode: str  # "measured" or "extrapolated"
    epoch_batches: int  # training batches in the first task's full epoch
    peak_memory_mb: float
    stage: int  # the 0-based stage the training step was timed at (1 unless the benchmark has one task)
    n_batches: int  # batches timed per measurement
    config_hash: str


@dataclass(frozen=True)
class BenchRun:
    """A whole `clbench bench` invocation: the results and what they were measured on."""

    benchmark: str
    device: torch.device
    data: str  # "real" or "synthetic"
    results: list[BenchResult]
    skipped: dict[str, str] = field(default_factory=dict)  # method -> why it was not timed
    measured_utc: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # stored in the Parquet metadata


@dataclass(frozen=True)
class Timed:
    """One timed call of the loop: the stage, seconds, and batches (training) or samples (validation)."""

    stage: int
    seconds: float
    size: int


class _EnoughEpochs(Exception):
    """Raised by the timing mixin to end `learn_task` once the wanted epochs are timed."""


class TimedLoop(Approach):
    """Mixin placed before an approach class: times its `train_epoch` and `evaluate_validation` calls.

    The calls are the real loop's; only a clock (with device synchronisation) is wrapped around them.
    `stop_after_validations` > 0 ends `learn_task` (by an exception) after that many validation passes.
    """

    timed_epochs: list[Timed]
    timed_validations: list[Timed]
    stop_after_validations: int = 0

    def train_epoch(self, stage: int, epoch: int, data: LabelledData,
                    optimizer: StepOptimizer) -> tuple[float, int]:
        start = _clock(self.device)
        loss, n_batches = super().train_epoch(stage, epoch, data, optimizer)
        self.timed_epochs.append(Timed(stage, _clock(self.device) - start, n_batches))
        return loss, n_batches

    def evaluate_validation(self, data: LabelledData, stage: int) -> Evaluation:
        start = _clock(self.device)
        evaluation = super().evaluate_validation(data, stage)
        self.timed_validations.append(Timed(stage, _clock(self.device) - start, len(data)))
        if 0 < self.stop_after_validations <= len(self.timed_validations):
            raise _EnoughEpochs
        return evaluation


def _clock(device: torch.device) -> float:
    """perf_counter after the device finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


# ---------------------------------------------------------------------------------------------- timing
def timed_approach(spec: BenchmarkSpec, method: str, tasks: TaskSequence, head_sizes: tuple[int, ...],
                   device: torch.device, seed: int) -> TimedLoop:
    """The approach as the engine builds it (seeded), with the timing mixin and at most 2 epochs per task."""
    resolved = resolve(spec, method)
    training = replace(resolved.training, max_epochs=2)
    context = ApproachContext(spec.network, training, tasks.input_shape, head_sizes, device, seed,
                              augment=spec.data.augment)
    timed_class = type(f"Timed{resolved.cls.__name__}", (TimedLoop, resolved.cls), {})
    seed_global_torch(seed)
    approach = timed_class(context, resolved.hyperparameters)
    approach.timed_epochs, approach.timed_validations = [], []
    return approach


def time_epoch(approach: TimedLoop, tasks: TaskSequence, mode: str, batches: int) -> tuple[float, int]:
    """(seconds of one epoch of task 0, its training batches): the loop's training + validation pass.

    `measure` times the second of two full epochs; `extrapolate` times the second of two epochs of
    `batches` batches (and a validation subset) and scales both passes to the task's full size. The
    approach is left in the middle of task 0 (`learn_task` is cut short): use a fresh one afterwards.
    """
    batch_size = approach.training_protocol.batch_size
    full_train, full_valid = approach.training_data(0, tasks)
    epoch_batches = math.ceil(len(full_train) / batch_size)
    sequence = tasks
    if mode == "extrapolate":
        sizes = [batches * batch_size] * len(tasks)
        sequence = shortened(tasks, sizes, sizes)
    approach.stop_after_validations = 2
    try:
        approach.learn_task(0, sequence)
    except _EnoughEpochs:
        pass
    train = approach.timed_epochs[-1]
    # no validation split (`data.validation_fraction: 0`, seq-mnist, cifar10-5): an epoch is its training pass
    valid = approach.timed_validations[-1] if approach.timed_validations else Timed(0, 0.0, 0)
    if mode == "measure":
        return train.seconds + valid.seconds, epoch_batches
    valid_seconds = valid.seconds / max(1, valid.size) * len(full_valid)
    return train.seconds / max(1, train.size) * epoch_batches + valid_seconds, epoch_batches


def time_training_step(approach: TimedLoop, tasks: TaskSequence, batches: int,
                       setup_batches: int) -> tuple[float, int, TaskSequence]:
    """(seconds per training step, the stage timed, the shortened sequence) after learning task 0 briefly.

    Task 0 is learned on `setup_batches` batches (so `end_task` sets up masks, Fisher, old models...), then
    task 1 on `batches` batches for two epochs (PathNet: its candidates' epochs); the first is the warm-up.
    With a one-task benchmark the step is timed at stage 0.
    """
    batch_size = approach.training_protocol.batch_size
    stage = 1 if len(tasks) > 1 else 0
    train_sizes = [(batches if t == stage else setup_batches) * batch_size for t in range(len(tasks))]
    sequence = shortened(tasks, train_sizes, [batch_size] * len(tasks))
    for learned in range(stage + 1):
        approach.learn_task(learned, sequence)
    timed = [epoch for epoch in approach.timed_epochs if epoch.stage == stage][1:]
    if not timed:
        # e.g. gdumb: one pass over the stream without a gradient step, its training a fit after the task
        raise NothingToTime(f"{approach.name}: no training epoch after the warm-up at stage {stage}: nothing to time")
    return statistics.median(epoch.seconds / epoch.size for epoch in timed), stage, sequence


def time_forward(approach: Approach, data: LabelledData, task: int, batches: int) -> float:
    """Seconds per evaluation forward pass (`predict`, eval mode, no autograd) of a training-size batch."""
    batch_size = approach.training_protocol.batch_size
    count = max(1, min(batches, len(data) // batch_size))
    inputs = [data.batch(slice(b * batch_size, (b + 1) * batch_size)).inputs for b in range(count)]
    approach.network.eval()
    with torch.inference_mode(), approach.autocast():
        for x in inputs:  # warm-up pass
            approach.predict(x, task)
        start = _clock(approach.device)
        for x in inputs:
            approach.predict(x, task)
        seconds = _clock(approach.device) - start
    return seconds / count


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: peak allocated memory since the last reset; CPU: the process's peak resident set size, MiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def bench_method(spec: BenchmarkSpec, method: str, tasks: TaskSequence, device: torch.device,
                 settings: BenchSettings) -> BenchResult:
    """Measure one approach (see the module docstring); `NothingToTime` if it has no trainable network."""
    from clbench.run.plan import run_config

    head_sizes = sequence_head_sizes(spec, settings.seed)
    if head_sizes[:len(tasks)] != tasks.head_sizes:
        raise RuntimeError(f"bench tasks {tasks.head_sizes} do not start the sequence {head_sizes}")

    def build() -> TimedLoop:
        return timed_approach(spec, method, tasks, head_sizes, device, settings.seed)

    reset_peak_memory(device)
    approach = build()
    if not any(p.requires_grad for p in approach.network.parameters()):
        raise NothingToTime(f"{method} trains no network: nothing to time")
    mode = settings.epoch_mode(device)
    epoch_seconds, epoch_batches = time_epoch(approach, tasks, mode, settings.batches)
    del approach
    approach = build()
    step_seconds, stage, sequence = time_training_step(approach, tasks, settings.batches, settings.setup_batches)
    forward_seconds = time_forward(approach, sequence[stage].train, stage, settings.batches)
    return BenchResult(
        method=method, batch_size=approach.training_protocol.batch_size, forward_ms=forward_seconds * 1e3,
        forward_backward_ms=step_seconds * 1e3, epoch_seconds=epoch_seconds,
        epoch_mode="measured" if mode == "measure" else "extrapolated", epoch_batches=epoch_batches,
        peak_memory_mb=peak_memory_mb(device), stage=stage, n_batches=settings.batches,
        config_hash=stable_hash(run_config(spec, resolve(spec, method))),
    )


def run_bench(spec: BenchmarkSpec, methods: Sequence[str], device: torch.device,
              settings: BenchSettings = BenchSettings(), data_dir: Path | None = None,
              loader: DatasetLoader | None = None, loader_data: str = "real",
              progress: Callable[[str], None] | None = None) -> BenchRun:
    """Measure every method (unknown ones fail before any work); approaches without a network are skipped.

    Data: `loader` if given (its data labelled `loader_data`), else the cache in `data_dir` or synthetic
    data (`bench_tasks`). `progress` is called with each method's name before it is measured.
    """
    for method in methods:
        resolve(spec, method)
    settings.epoch_mode(device)
    tasks, data = bench_tasks(spec, settings.seed, device, data_dir, loader, loader_data)
    results, skipped = [], {}
    for method in methods:
        if progress is not None:
            progress(method)
        try:
            results.append(bench_method(spec, method, tasks, device, settings))
        except NothingToTime as reason:
            skipped[method] = str(reason)
    details = {"epoch_mode": settings.epoch_mode(device), "seed": settings.seed, "batches": settings.batches,
               "compile": spec.training.compile, "amp": spec.training.amp,
               "threads": torch.get_num_threads(), "device_name": device_name(device),
               "training": to_dict(spec.training), "tasks": list(tasks.names),
               "config_hash": {result.method: result.config_hash for result in results},
               "step_stage": {result.method: result.stage + 1 for result in results},  # 1-based, as in results
               "epoch_batches": {result.method: result.epoch_batches for result in results}}
    return BenchRun(spec.name, device, data, results, skipped, utc_now("milliseconds"), details)


def device_name(device: torch.device) -> str:
    """The GPU's name on CUDA, else the processor's (Linux: /proc/cpuinfo's model name)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------------------------------- storage
def bench_rows(run: BenchRun) -> list[dict[str, Any]]:
    """One row per approach with exactly `BENCH_COLUMNS`."""
    return [{
        "benchmark": run.benchmark, "method": result.method, "device": str(run.device),
        "batch_size": result.batch_size, "forward_ms": result.forward_ms,
        "forward_backward_ms": result.forward_backward_ms, "epoch_seconds": result.epoch_seconds,
        "peak_memory_mb": result.peak_memory_mb, "clbench_version": clbench.__version__,
        "torch_version": str(torch.__version__), "measured_utc": run.measured_utc, "data": run.data,
        "n_batches": result.n_batches, "hostname": platform.node(),
    } for result in run.results]


def bench_path(results_dir: Path, benchmark: str, measured_utc: str) -> Path:
    """`<results>/_bench/<benchmark>-<UTC timestamp>.parquet`; `_2`, `_3`... (sorting after it) if it exists."""
    stamp = datetime.fromisoformat(measured_utc).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(results_dir) / BENCH_FOLDER
    path = folder / f"{benchmark}-{stamp}.parquet"
    counter = 2
    while path.exists():
        path = folder / f"{benchmark}-{stamp}_{counter}.parquet"
        counter += 1
    from clbench.results import inside

    return inside(folder, path)


def write_bench(run: BenchRun, results_dir: Path) -> Path:
    """Store a bench run as Parquet (atomically, never overwriting); returns the file."""
    import pandas as pd


    frame = pd.DataFrame(bench_rows(run), columns=list(BENCH_COLUMNS))
    path = bench_path(results_dir, run.benchmark, run.measured_utc)
    write_parquet(path, frame, {"table": "bench", **run.details, "skipped": run.skipped})
    return path
