"""The in-process measurements of `tools/gpu_check.py`, each run as its own process (a crash or a stop at its budget
ends that process only); each appends one JSON line per finished measurement, so a stopped worker keeps what it did.

    python tools/gpu_check_workers.py bench --benchmark mixture8 --device cuda --jsonl FILE [--batches 20]
    python tools/gpu_check_workers.py replay --device cuda --jsonl FILE

`bench`: every approach that runs on the benchmark's network (then the `--extra` ones, e.g. plugins), one at a
time, as `clbench bench` measures it (`clbench.run.bench.bench_method` on `bench_tasks`' synthetic images of the real
shapes and sizes), epochs extrapolated from the timed batches; an approach that fails is recorded with its error and
the next one is measured.

`replay`: clbench's `er` and `derpp` training step on seq-mnist's 784-100-100 MLP at batch 10 (buffer 500, 10
replayed samples per step, the memory full of task 1's samples, timed on task 2) against a raw PyTorch loop of the
same step in the same process (`raw_replay_epoch`), median of `--repeats` epochs in turns after a warm-up; and per
step, under torch.profiler: CUDA kernels, kernel-launch calls, host synchronisations and copies (CPU: aten
operators, the CPU's counterpart of launches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from gpu_check_common import REPO, append_jsonl
from torch.nn import functional

sys.path.insert(0, str(REPO))

from clbench.approaches.base import Approach  # noqa: E402
from clbench.approaches.datatypes import ApproachContext  # noqa: E402
from clbench.approaches.registry import REGISTRY  # noqa: E402
from clbench.approaches.resolution import resolve  # noqa: E402
from clbench.data.batches import LabelledData, TaskSequence  # noqa: E402
from clbench.data.custom import n_classes_lookup  # noqa: E402
from clbench.data.tasks import build_tasks  # noqa: E402
from clbench.run.bench import BenchSettings, NothingToTime, bench_method, device_name  # noqa: E402
from clbench.run.bench_data import bench_tasks, head, raw_task_datasets, synthetic_loader  # noqa: E402
from clbench.seeding import seed_global_torch  # noqa: E402
from clbench.spec import BenchmarkSpec, load_benchmark  # noqa: E402

FIRST = ("hat", "sgd")  # measured first: the paper's comparison
LAST = ("pathnet", "pnn", "bic", "lucir", "icarl")  # the slowest to set up: measured last
# Not run: `clbench bench` skips it after its whole fit (NothingToTime), which took 83 s of a 2-core CPU on a tiny net
NOT_RUN = {"gdumb": "no step of the loop to time: one pass over the stream without a gradient step, then a fit of "
                    "fitting_epochs epochs over the memory (clbench bench skips it after that fit)"}


# ---------------------------------------------------------------------------------------------- bench
def bench_methods(names: Sequence[str]) -> list[str]:
    """`names` in the order they are measured: the paper's comparison first, the slowest to set up last."""
    first = [name for name in FIRST if name in names]
    last = [name for name in names if name in LAST]
    return first + [name for name in names if name not in first and name not in last] + last


def not_measured(spec: BenchmarkSpec, method: str) -> str | None:
    """Why `method` is not measured on this spec (it refuses the network, or has no step to time), else None."""
    refused = REGISTRY[method].unsupported_networks.get(spec.network.kind)
    return f"does not run on network.kind {spec.network.kind}: {refused}" if refused else NOT_RUN.get(method)


def bench(benchmark: str, device: torch.device, batches: int, overrides: Sequence[str], only: Sequence[str],
          extra: Sequence[str], jsonl: Path) -> None:
    """`only` (default: every approach registered, installed plugins' included) and then the `extra` methods (names
    or method specs such as `package.module:Class`, registered first)."""
    from clbench.approaches.registry import load_entry_points, load_methods

    load_entry_points()
    extra = load_methods(list(extra)) if extra else []
    spec = load_benchmark(benchmark, list(overrides))
    settings = BenchSettings(batches=batches, epoch="extrapolate")
    start = time.perf_counter()
    tasks, data = bench_tasks(spec, settings.seed, device)
    append_jsonl(jsonl, {"benchmark": benchmark, "event": "data", "data": data, "seconds": time.perf_counter() - start,
                         "device_name": device_name(device), "train_sizes": [len(t.train) for t in tasks.tasks]})
    methods = bench_methods(only or sorted(REGISTRY))
    for method in methods + [name for name in bench_methods(extra) if name not in methods]:
        record = {"benchmark": benchmark, "method": method, "data": data}
        start = time.perf_counter()
        if not_measured(spec, method):
            append_jsonl(jsonl, {**record, "status": "skipped", "reason": not_measured(spec, method), "seconds": 0.0})
            continue
        try:
            result = bench_method(spec, method, tasks, device, settings)
            record.update(asdict(result), status="ok")
        except NothingToTime as reason:
            record.update(status="skipped", reason=str(reason))
        except Exception as error:  # recorded; the next approach is measured
            record.update(status="error", reason=f"{type(error).__name__}: {error}")
            traceback.print_exc()
        record["seconds"] = time.perf_counter() - start
        append_jsonl(jsonl, record)
        print(f"{benchmark} {method}: {record['status']} in {record['seconds']:.1f} s", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------- replay
def synchronised(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def built_approach(spec: BenchmarkSpec, method: str, tasks: TaskSequence, device: torch.device) -> Approach:
    """The approach as `clbench train` builds it (seeded)."""
    resolved = resolve(spec, method)
    context = ApproachContext(spec.network, resolved.training, tasks.input_shape, tasks.head_sizes, device, 0,
                              spec.data.scenario, spec.data.augment)
    seed_global_torch(0)
    return resolved.cls(context, resolved.hyperparameters)


def clbench_epoch(approach: Approach, data: LabelledData, stage: int, lr: float) -> Callable[[], tuple[float, int]]:
    """One epoch of the loop's `train_epoch`: (seconds, steps)."""
    optimizer = approach.make_optimizer(stage, lr)
    counter = [0]

    def epoch() -> tuple[float, int]:
        start = synchronised(approach.device)
        _, steps = approach.train_epoch(stage, counter[0], data, optimizer)
        counter[0] += 1
        return synchronised(approach.device) - start, steps
    return epoch


class RawReplay:
    """ER or DER++ in plain PyTorch on the device: a 784-100-100-10 MLP (Mammoth's MNISTMLP: one classifier over the
    10 classes, what clbench's 5 heads of 2 side by side compute), `torch.optim.SGD`, inputs normalised once, a
    reservoir memory of normalised inputs, labels and (DER++) logits with one spare row that absorbs the samples
    reservoir sampling drops (so no step waits for the host)."""

    def __init__(self, method: str, spec: BenchmarkSpec, device: torch.device) -> None:
        resolved = resolve(spec, method)
        self.method, self.hparams, self.device = method, resolved.hyperparameters, device
        hidden = spec.network.hidden
        torch.manual_seed(0)
        self.network = torch.nn.Sequential(torch.nn.Linear(784, hidden[0]), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden[0], hidden[1]), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden[1], 10)).to(device)
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=resolved.training.lr)
        self.generator = torch.Generator(device).manual_seed(0)
        capacity = self.hparams.buffer_size
        self.memory_x = torch.zeros(capacity + 1, 784, device=device)
        self.memory_y = torch.zeros(capacity + 1, dtype=torch.long, device=device)
        self.memory_logits = torch.zeros(capacity + 1, 10, device=device)
        self.capacity, self.seen = capacity, 0

    def fill(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        """The memory as after a task: its first `capacity` samples (with the network's logits)."""
        n = min(self.capacity, len(labels))
        with torch.no_grad():
            self.memory_x[:n], self.memory_y[:n] = inputs[:n], labels[:n]
            self.memory_logits[:n] = self.network(inputs[:n])
        self.seen = len(labels)

    def draw(self) -> torch.Tensor:
        size = min(self.seen, self.capacity)
        return torch.randperm(size, device=self.device, generator=self.generator)[:self.hparams.replay_batch_size]

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's loss (cross-entropy over every output, seq-mnist's class_loss all) and the batch's logits."""
        if self.method == "er":
            chosen = self.draw()
            outputs = self.network(torch.cat([x, self.memory_x[chosen]]))
            return functional.cross_entropy(outputs, torch.cat([y, self.memory_y[chosen]])), outputs[:len(y)]
        outputs = self.network(x)
        loss = functional.cross_entropy(outputs, y)
        first, second = self.draw(), self.draw()
        loss = loss + self.hparams.alpha * functional.mse_loss(self.network(self.memory_x[first]),
                                                               self.memory_logits[first])
        return loss + self.hparams.beta * functional.cross_entropy(self.network(self.memory_x[second]),
                                                                   self.memory_y[second]), outputs

    def store(self, x: torch.Tensor, y: torch.Tensor, logits: torch.Tensor) -> None:
        """Reservoir sampling of the batch, vectorised; dropped samples go to the spare row."""
        positions = torch.arange(self.seen, self.seen + len(y), device=self.device)
        draws = (torch.rand(len(y), device=self.device, generator=self.generator, dtype=torch.float64)
                 * (positions + 1)).long()
        slots = torch.where(positions < self.capacity, positions, draws)
        slots = torch.where(slots < self.capacity, slots, self.capacity)
        self.memory_x[slots], self.memory_y[slots], self.memory_logits[slots] = x, y, logits.detach()
        self.seen += len(y)

    def epoch(self, inputs: torch.Tensor, labels: torch.Tensor, batch_size: int) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            start = synchronised(self.device)
            chunks = torch.randperm(len(labels), device=self.device, generator=self.generator).split(batch_size)
            total = torch.zeros((), device=self.device)
            for indices in chunks:
                x, y = inputs.index_select(0, indices), labels.index_select(0, indices)
                loss, logits = self.loss(x, y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                self.store(x, y, logits)
                total += loss.detach()
            float(total)  # the loop's one read of the loss per epoch, as clbench's
            return synchronised(self.device) - start, len(chunks)
        return run


def profiled_counts(epoch: Callable[[], tuple[float, int]], device: torch.device) -> dict[str, object]:
    """Per step of one epoch under torch.profiler: CUDA kernels (and memory copies/sets), launch calls, host
    synchronisations, copies; on the CPU the aten operators."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    try:
        with profile(activities=activities) as profiler:
            _, steps = epoch()
        events = profiler.key_averages()
    except Exception as error:  # a profiler that cannot start (no CUPTI) leaves the timings standing
        traceback.print_exc()
        return {"profiler_error": f"{type(error).__name__}: {error}"}

    def count(test: Callable[[object], bool]) -> float:
        return sum(event.count for event in events if test(event)) / max(1, steps)

    return {"device_kernels": count(lambda e: e.device_type == DeviceType.CUDA),  # type: ignore[attr-defined]
            "launch_calls": count(lambda e: "LaunchKernel" in e.key),  # type: ignore[attr-defined]
            "host_syncs": count(lambda e: "Synchronize" in e.key),  # type: ignore[attr-defined]
            "memcpy_calls": count(lambda e: "Memcpy" in e.key),  # type: ignore[attr-defined]
            "aten_ops": count(lambda e: e.key.startswith("aten::")),  # type: ignore[attr-defined]
            "profiled_steps": steps}


def normalised(data: LabelledData, task: int) -> torch.Tensor:
    return data.transform(data.images, task).flatten(1).contiguous()


def global_labels(data: LabelledData, offset: int) -> torch.Tensor:
    return data.labels + offset


def replay_method(method: str, spec: BenchmarkSpec, tasks: TaskSequence, device: torch.device, steps: int,
                  repeats: int) -> dict[str, object]:
    """clbench's step against the raw one, at stage 1 with the memory full of task 0's samples."""
    approach = built_approach(spec, method, tasks, device)
    lr = resolve(spec, method).training.lr
    approach.begin_task(0, tasks)
    fill = head(tasks[0].train, 2 * resolve(spec, method).hyperparameters.buffer_size)  # a full memory
    approach.train_epoch(0, 0, fill, approach.make_optimizer(0, lr))
    approach.begin_task(1, tasks)
    batch_size = spec.training.batch_size
    data = head(tasks[1].train, steps * batch_size)
    raw = RawReplay(method, spec, device)
    offsets = approach.context.class_offsets
    raw.fill(normalised(tasks[0].train, 0), global_labels(tasks[0].train, offsets[0]))
    ours = clbench_epoch(approach, data, 1, lr)
    theirs = raw.epoch(normalised(data, 1), global_labels(data, offsets[1]), batch_size)
    ours(), theirs()  # warm-up
    mine, raws = [], []
    for _ in range(repeats):
        seconds, count = ours()
        mine.append(seconds / count)
        seconds, count = theirs()
        raws.append(seconds / count)
    clbench_ms, raw_ms = statistics.median(mine) * 1e3, statistics.median(raws) * 1e3
    return {"method": method, "status": "ok", "batch_size": batch_size, "steps_per_epoch": steps,
            "repeats": repeats, "clbench_ms": clbench_ms, "raw_ms": raw_ms, "ratio": clbench_ms / raw_ms,
            "clbench_counts": profiled_counts(ours, device), "raw_counts": profiled_counts(theirs, device),
            "buffer_size": raw.capacity, "replay_batch_size": raw.hparams.replay_batch_size}


def replay(device: torch.device, dry: bool, jsonl: Path, repeats: int) -> None:
    overrides = ["data.max_train_samples=200"] if dry else []
    spec = load_benchmark("seq-mnist", overrides)
    names = set(raw_task_datasets(spec.data, n_classes_lookup(spec)))
    tasks = build_tasks(spec.data, 0, synthetic_loader(names, 0), device, max_tasks=2)
    steps = 10 if dry else 200
    for method in ("er", "derpp"):
        start = time.perf_counter()
        try:
            record = replay_method(method, spec, tasks, device, steps, repeats)
        except Exception as error:  # recorded; the next method is measured
            traceback.print_exc()
            record = {"method": method, "status": "error", "reason": f"{type(error).__name__}: {error}"}
        record["seconds"] = time.perf_counter() - start
        append_jsonl(jsonl, record)
        print(f"replay {method}: {record['status']} in {record['seconds']:.1f} s", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("worker", choices=("bench", "replay"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--jsonl", type=Path, required=True, help="append one JSON line per measurement here")
    parser.add_argument("--benchmark", default="mixture8")
    parser.add_argument("--batches", type=int, default=20, help="bench: batches timed per measurement")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="bench: a spec override")
    parser.add_argument("--methods", default="", help="bench: comma-separated (default: every approach)")
    parser.add_argument("--extra", default="", help="bench: more methods after those, e.g. plugins' module:Class")
    parser.add_argument("--repeats", type=int, default=3, help="replay: timed epochs of each, in turns")
    parser.add_argument("--dry", action="store_true", help="replay: tiny sizes")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.worker == "bench":
        only = [name for name in args.methods.split(",") if name]
        extra = [name for name in args.extra.split(",") if name]
        bench(args.benchmark, device, args.batches, args.overrides, only, extra, args.jsonl)
    else:
        replay(device, args.dry, args.jsonl, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
