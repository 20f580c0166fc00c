"""clbench's speed against raw PyTorch, side by side in one process, with the ratios of issue 29's targets.

    python tools/speed.py                       # every section but `command` (about 3 minutes on 2 CPU cores)
    python tools/speed.py --section command --mirror ../shared/data   # the README's first command, two commits

Sections (`--section`, comma-separated; `all` is every one):

- `eval`: every task evaluated at one stage (the last: every task learned, the task-agnostic candidates the
  classes of every task), both evaluations where the scenario has them, by `clbench.run.rows.evaluate_stage`,
  against a raw loop over the same test images normalised beforehand (the network's body, the heads as one
  linear layer, argmax and summed cross-entropy, in batches of the spec's `eval_batch_size`, inference mode).
  pmnist, mnist5 and cifar100-10 as their specs define them (`sgd` stores both evaluations in either scenario),
  on synthetic images of the real sizes and shapes. The first clbench evaluation of a sequence also normalises
  the test sets into the sequence's input cache (`clbench.data.input_cache.InputCache`); it is reported apart,
  with the bytes the cache holds.
  Target: at most 1.5x.
- `step`: one training step of permuted MNIST's 784-100-100 MLP (`Approach.train_epoch`, per step) against a
  raw loop over normalised float tensors (a `randperm` per epoch, `index_select`, forward, cross-entropy, zero
  grad, backward, gradient-norm clipping, `torch.optim.SGD`): `sgd` at batch 64 (target 1.2x) and 10 (1.3x),
  and `er` at batch 10 (one replayed batch of 10 per step from a reservoir memory of 200, at the second task,
  the memory full of the first's samples) against a raw ER loop (reservoir memory of normalised inputs, one
  replayed batch per step, each sample on its task's head), target 1.3x.
- `startup`: `clbench train` of a one-task, one-epoch run against `python -c "import torch"`, as subprocesses
  in turns; target: at most 1.5 s more.
- `command` (needs real MNIST: `--mirror DIR`, or the data already fetched in `--data-dir`): the training part
  of the README's first command (fetch into an empty data folder, train, report) at this checkout and at
  `--baseline` (default b3ef878, checked out with `git worktree` into a temporary folder and run with the same
  interpreter), in turns, `--rounds` each (default 3), the median wall time and the peak resident memory of
  each; targets: at least 2x faster, peak memory at most 1.2x. It checks that both print the same table.
- `scaling`: a quick pmnist run (sgd, 2,000 training images per task, 3 epochs) with 5, 10 and 20 tasks: its
  wall time and the shares of training and evaluation (the rows' `stage_train_seconds` and
  `stage_eval_seconds`; rows written before the fix of issue 29 count each evaluation pass twice).

`CLBENCH_SPEED_TREE=DIR` times the clbench of another checkout (`git worktree add DIR COMMIT`), for before/after
tables.

Timings alternate between clbench and the raw loop (background load hits both alike); each figure is the median
of `--repeats` timed repetitions after a warm-up. Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch.nn import functional

REPO = Path(__file__).resolve().parents[1]
# CLBENCH_SPEED_TREE: time another checkout's clbench (e.g. a `git worktree` of an earlier commit) with this script;
# hence the data types imported from clbench.data.tasks, where every commit has them
TREE = Path(os.environ.get("CLBENCH_SPEED_TREE") or REPO).resolve()
sys.path.insert(0, str(TREE))

from clbench.approaches.base import Approach  # noqa: E402
from clbench.approaches.datatypes import ApproachContext  # noqa: E402
from clbench.approaches.resolution import resolve  # noqa: E402
from clbench.cli.common import default_data_dir  # noqa: E402
from clbench.data.custom import n_classes_lookup  # noqa: E402
from clbench.data.tasks import LabelledData, TaskSequence, build_tasks  # noqa: E402
from clbench.nets import MultiHeadNet  # noqa: E402
from clbench.run.bench_data import raw_task_datasets, synthetic_loader  # noqa: E402
from clbench.run.rows import evaluate_stage  # noqa: E402
from clbench.seeding import seed_global_torch  # noqa: E402
from clbench.spec import BenchmarkSpec, load_benchmark  # noqa: E402

SECTIONS = ("eval", "step", "startup", "command", "scaling")
DEFAULT_SECTIONS = ("eval", "step", "startup", "scaling")
BASELINE = "b3ef878"
FIRST_COMMAND_TRAIN = ["train", "pmnist", "-m", "sgd,hat,joint,random", "--seeds", "0-2", "--set", "data.n_tasks=5",
                       "--set", "data.max_train_samples=2000", "--set", "training.max_epochs=3",
                       "--set", "hat.training.max_epochs=20", "--set", "hat.c=2"]
ONE_TASK_RUN = ["train", "pmnist", "-m", "sgd", "--seeds", "0", "--set", "data.n_tasks=1",
                "--set", "data.max_train_samples=500", "--set", "training.max_epochs=1"]


@dataclass(frozen=True)
class Line:
    """One measured ratio: what, clbench's figure, the reference's figure, the target."""

    what: str
    clbench: float
    reference: float
    unit: str
    target: str
    ok: bool
    ratio: float | None = None
    note: str = ""
    scored: bool = True  # False: shown beside the targets, no target of its own (no verdict, no exit status)
    measured: bool = True  # False: the figure could not be taken (its reason in `what`); not met, not missed

    def show(self) -> str:
        if not self.measured:
            return f"| {self.what} | - | - | - | {self.target} | not measured | |"
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        verdict = ("met" if self.ok else "MISSED") if self.scored else "-"
        return (f"| {self.what} | {self.clbench:.3f} {self.unit} | {self.reference:.3f} {self.unit} | {ratio} | "
                f"{self.target} | {verdict} | {self.note} |")


def not_measured(what: str, target: str) -> Line:
    """A target whose figure could not be taken (`what` says why): printed as such, and the exit status is 1."""
    return Line(what, 0.0, 0.0, "s", target, False, measured=False)


def median_alternating(first: Callable[[], float], second: Callable[[], float], repeats: int,
                       warmup: int = 1) -> tuple[float, float]:
    """The median of `repeats` timings of each, taken in turns after `warmup` untimed calls of each."""
    for _ in range(warmup):
        first(), second()
    a, b = [], []
    for _ in range(repeats):
        a.append(first())
        b.append(second())
    return statistics.median(a), statistics.median(b)


def seconds_of(action: Callable[[], object]) -> Callable[[], float]:
    def timed() -> float:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start
    return timed


# ------------------------------------------------------------------------------------------------- setting up
def synthetic_tasks(spec: BenchmarkSpec, seed: int = 0) -> TaskSequence:
    """Every task of the spec on synthetic images of the real sizes (CPU)."""
    names = set(raw_task_datasets(spec.data, n_classes_lookup(spec)))
    return build_tasks(spec.data, seed, synthetic_loader(names, seed), torch.device("cpu"))


def built_approach(spec: BenchmarkSpec, method: str, tasks: TaskSequence, seed: int = 0) -> Approach:
    """The approach as `clbench train` builds it (seeded), on the CPU."""
    resolved = resolve(spec, method)
    context = ApproachContext(spec.network, resolved.training, tasks.input_shape, tasks.head_sizes,
                              torch.device("cpu"), seed, spec.data.scenario)
    seed_global_torch(seed)
    return resolved.cls(context, resolved.hyperparameters)


def normalised(data: LabelledData, task: int) -> torch.Tensor:
    """A split's inputs normalised once (what a raw script keeps in memory)."""
    return data.transform(data.images, task).contiguous()


# ------------------------------------------------------------------------------------------------- evaluation
EVAL_SETTINGS = (("pmnist", ()), ("mnist5", ()), ("cifar100-10", ()))


def raw_evaluation(network: MultiHeadNet, inputs: Sequence[torch.Tensor], labels: Sequence[torch.Tensor],
                   offsets: Sequence[int], sizes: Sequence[int], batch_size: int,
                   agnostic: bool) -> Callable[[], float]:
    """A raw evaluation of every task: body, the heads as one linear layer, argmax, summed cross-entropy, on the
    task's own head and (`agnostic`) over every class."""
    weight = torch.cat([head.weight for head in network.heads]).detach()
    bias = torch.cat([head.bias for head in network.heads]).detach()

    def run() -> float:
        network.eval()
        total = torch.zeros(2)
        with torch.inference_mode():
            for task, (x, y) in enumerate(zip(inputs, labels)):
                start, width = offsets[task], sizes[task]
                for first in range(0, len(y), batch_size):
                    logits = functional.linear(network.features(x[first:first + batch_size]), weight, bias)
                    target = y[first:first + batch_size]
                    own = logits[:, start:start + width]
                    total[0] += functional.cross_entropy(own, target, reduction="sum")
                    total[1] += (own.argmax(1) == target).sum()
                    if agnostic:
                        total[0] += functional.cross_entropy(logits, target + start, reduction="sum")
                        total[1] += (logits.argmax(1) == target + start).sum()
        return float(total[1])
    return run


def eval_section(repeats: int) -> list[Line]:
    lines = []
    for name, overrides in EVAL_SETTINGS:
        spec = load_benchmark(name, list(overrides))
        tasks = synthetic_tasks(spec)
        approach = built_approach(spec, "sgd", tasks)
        stage = len(tasks) - 1
        cache = getattr(tasks[0].test, "cache", None)  # None: a checkout without an input cache
        evaluation = seconds_of(partial(evaluate_stage, approach, tasks, stage))
        first = evaluation()
        cached_bytes = cache.used_bytes if cache is not None else 0
        inputs = [normalised(task.test, t) for t, task in enumerate(tasks.tasks)]
        labels = [task.test.labels for task in tasks.tasks]
        offsets = approach.context.class_offsets
        raw = raw_evaluation(approach.multihead, inputs, labels, offsets, tasks.head_sizes,
                             spec.training.eval_batch_size, approach.predicts_without_task_id())
        ours, theirs = median_alternating(evaluation, seconds_of(raw), repeats)
        images = sum(len(task.test) for task in tasks.tasks)
        evaluations = "both evaluations" if approach.predicts_without_task_id() else "task-aware"
        ratio = ours / theirs
        lines.append(Line(f"eval: {name} ({spec.data.scenario} scenario, {len(tasks)} tasks, {images:,} test images, "
                          f"{evaluations}), one stage", ours * 1e3, theirs * 1e3, "ms", "<= 1.5x", ratio <= 1.5,
                          ratio, f"first evaluation (fills the cache) {first * 1e3:.0f} ms; cache "
                                 f"{cached_bytes / 2**20:.1f} MiB for the test sets"))
    return lines


# ------------------------------------------------------------------------------------------------- training step
def raw_loop(network: MultiHeadNet, n_samples: int, batch_size: int, lr: float, clip: float,
             batch_loss: Callable[[torch.Tensor], torch.Tensor],
             after_step: Callable[[torch.Tensor], None] | None = None, seed: int = 0) -> Callable[[], float]:
    """A raw epoch, timed per step: a `randperm`, then per batch of indices `batch_loss`, zero_grad, backward,
    clipping (`torch.nn.utils.clip_grad_norm_`), `torch.optim.SGD`'s step and `after_step`."""
    optimizer = torch.optim.SGD(network.parameters(), lr=lr)
    parameters = list(network.parameters())
    generator = torch.Generator().manual_seed(seed)

    def epoch() -> float:
        network.train()
        chunks = torch.randperm(n_samples, generator=generator).split(batch_size)
        total = torch.zeros(())
        start = time.perf_counter()
        for indices in chunks:
            loss = batch_loss(indices)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, clip)
            optimizer.step()
            if after_step is not None:
                after_step(indices)
            total += loss.detach()
        float(total)
        return (time.perf_counter() - start) / len(chunks)
    return epoch


def raw_training(network: MultiHeadNet, inputs: torch.Tensor, labels: torch.Tensor, task: int, batch_size: int,
                 lr: float, clip: float) -> Callable[[], float]:
    """A raw epoch: index_select, forward, cross-entropy on the task's head (`raw_loop` does the rest)."""
    def batch_loss(indices: torch.Tensor) -> torch.Tensor:
        logits = network(inputs.index_select(0, indices), task)
        return functional.cross_entropy(logits, labels.index_select(0, indices))
    return raw_loop(network, len(labels), batch_size, lr, clip, batch_loss)


class RawReservoir:
    """A raw ER memory: normalised inputs, labels and task ids; reservoir sampling, vectorised per batch."""

    def __init__(self, capacity: int, shape: Sequence[int], generator: torch.Generator) -> None:
        self.inputs = torch.zeros((capacity, *shape))
        self.labels = torch.zeros(capacity, dtype=torch.long)
        self.tasks = torch.zeros(capacity, dtype=torch.long)
        self.capacity, self.size, self.seen, self.generator = capacity, 0, 0, generator

    def add(self, x: torch.Tensor, y: torch.Tensor, task: int) -> None:
        n = len(y)
        positions = torch.arange(self.seen, self.seen + n)
        draws = (torch.rand(n, generator=self.generator, dtype=torch.float64) * (positions + 1)).long()
        slots = torch.where(positions < self.capacity, positions, draws)
        kept = slots < self.capacity
        self.inputs[slots[kept]] = x[kept]
        self.labels[slots[kept]] = y[kept]
        self.tasks[slots[kept]] = task
        self.seen += n
        self.size = min(self.capacity, self.seen)

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        chosen = torch.randperm(self.size, generator=self.generator)[:n]
        return (self.inputs.index_select(0, chosen), self.labels.index_select(0, chosen),
                self.tasks.index_select(0, chosen))


def raw_er_training(network: MultiHeadNet, inputs: torch.Tensor, labels: torch.Tensor, task: int, batch_size: int,
                    lr: float, clip: float, memory: RawReservoir) -> Callable[[], float]:
    """A raw ER epoch: the batch and one replayed batch, each sample's loss on its task's head; after the step the
    batch is offered to the memory (`raw_loop` does the rest)."""
    heads = network.heads[:task + 1]
    current: list[tuple[torch.Tensor, torch.Tensor]] = []  # the step's batch, offered after the step

    def batch_loss(indices: torch.Tensor) -> torch.Tensor:
        x, y = inputs.index_select(0, indices), labels.index_select(0, indices)
        current[:] = [(x, y)]
        old_x, old_y, old_t = memory.sample(batch_size)
        features = network.features(torch.cat([x, old_x]))
        logits = torch.stack([head(features) for head in heads], 1)  # (B, tasks, classes)
        owners = torch.cat([torch.full_like(y, task), old_t])
        return functional.cross_entropy(logits[torch.arange(len(owners)), owners], torch.cat([y, old_y]))

    def offer(_: torch.Tensor) -> None:
        memory.add(*current.pop(), task)

    return raw_loop(network, len(labels), batch_size, lr, clip, batch_loss, offer)


def clbench_training(approach: Approach, data: LabelledData, stage: int, lr: float) -> Callable[[], float]:
    """clbench's epoch (`Approach.train_epoch`), per step."""
    optimizer = approach.make_optimizer(stage, lr)
    epoch_index = [0]

    def epoch() -> float:
        start = time.perf_counter()
        _, batches = approach.train_epoch(stage, epoch_index[0], data, optimizer)
        epoch_index[0] += 1
        return (time.perf_counter() - start) / batches
    return epoch


STEP_SAMPLES = 6400  # training images per task: 100 steps at batch 64, 640 at batch 10


def step_section(repeats: int) -> list[Line]:
    lines = []
    for method, batch_size, target in (("sgd", 64, 1.2), ("sgd", 10, 1.3), ("er", 10, 1.3)):
        overrides = [f"training.batch_size={batch_size}", f"data.max_train_samples={STEP_SAMPLES}", "data.n_tasks=2"]
        if method == "er":
            overrides += [f"er.replay_batch_size={batch_size}", "er.buffer_size=200"]
        spec = load_benchmark("pmnist", overrides)
        tasks = synthetic_tasks(spec)
        approach = built_approach(spec, method, tasks)
        resolved = resolve(spec, method)
        lr, clip = resolved.training.lr, resolved.hyperparameters.clip_grad_norm
        twin = built_approach(spec, method, tasks).multihead  # same architecture and initial weights
        stage = 1 if method == "er" else 0
        data = tasks[stage].train
        inputs = normalised(data, stage)
        if method == "er":  # the memory full of task 1's samples, then task 2
            approach.begin_task(0, tasks)
            approach.train_epoch(0, 0, tasks[0].train, approach.make_optimizer(0, lr))
            approach.begin_task(1, tasks)
            memory = RawReservoir(200, inputs.shape[1:], torch.Generator().manual_seed(1))
            memory.add(normalised(tasks[0].train, 0), tasks[0].train.labels, 0)
            raw = raw_er_training(twin, inputs, data.labels, stage, batch_size, lr, clip, memory)
            reference = "raw ER loop"
        else:
            approach.begin_task(0, tasks)
            raw = raw_training(twin, inputs, data.labels, stage, batch_size, lr, clip)
            reference = "raw loop"
        ours, theirs = median_alternating(clbench_training(approach, data, stage, lr), raw, repeats)
        ratio = ours / theirs
        lines.append(Line(f"step: {method} at batch {batch_size}, pmnist 784-100-100 (against a {reference})",
                          ours * 1e3, theirs * 1e3, "ms", f"<= {target}x", ratio <= target, ratio,
                          f"{len(data):,} images per epoch, median of {repeats} epochs"))
    return lines


# ------------------------------------------------------------------------------------------------- start-up
def run_seconds(command: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return time.perf_counter() - start


def startup_section(repeats: int, data_dir: Path | None) -> list[Line]:
    if data_dir is None or not (data_dir / "mnist").exists():
        return [not_measured("startup: needs MNIST fetched (--data-dir or --mirror)", "<= +1.5 s")]
    with tempfile.TemporaryDirectory() as results:
        env = {**os.environ, "CLBENCH_DATA": str(data_dir)}
        counter = [0]

        def one_task_run() -> float:
            counter[0] += 1
            return run_seconds([sys.executable, "-m", "clbench", *ONE_TASK_RUN, "--results",
                                f"{results}/{counter[0]}"], env, TREE)

        ours, theirs = median_alternating(one_task_run,
                                          lambda: run_seconds([sys.executable, "-c", "import torch"], env), repeats)
    return [Line("startup: clbench train of a one-task, one-epoch pmnist run against python -c 'import torch'",
                 ours, theirs, "s", "<= +1.5 s", ours - theirs <= 1.5, None, f"difference {ours - theirs:.2f} s")]


# ------------------------------------------------------------------------------------------------- whole commands
@dataclass(frozen=True)
class Measured:
    """One command (or several, summed) as measured: wall seconds, peak resident KiB, CPU seconds, its output."""

    seconds: float
    peak_kib: int
    cpu_seconds: float  # user + system time of its processes: less moved than the wall time by other VMs' load
    output: str

    def plus(self, other: Measured) -> Measured:
        """Two commands run one after the other: times add up, the peak is the larger, the output the later."""
        return Measured(self.seconds + other.seconds, max(self.peak_kib, other.peak_kib),
                        self.cpu_seconds + other.cpu_seconds, other.output)


def measured_command(python: str, arguments: Sequence[str], env: dict[str, str], cwd: Path) -> Measured:
    """One `python -m clbench ...`, measured by a fresh wrapper process (so the children's peak and CPU time are
    this command's alone)."""
    wrapper = ("import resource, subprocess, sys, time\n"
               "start = time.perf_counter()\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "seconds = time.perf_counter() - start\n"
               "sys.stderr.write(done.stderr)\n"
               "if done.returncode: sys.exit(done.returncode)\n"
               "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
               "print(seconds, usage.ru_maxrss, usage.ru_utime + usage.ru_stime)\n"
               "print(done.stdout, end='')\n")
    done = subprocess.run([python, "-c", wrapper, python, "-m", "clbench", *arguments], capture_output=True,
                          text=True, env=env, cwd=cwd)
    if done.returncode:
        raise SystemExit(f"`clbench {' '.join(arguments)}` in {cwd} failed:\n{done.stderr[-3000:]}")
    head, _, out = done.stdout.partition("\n")
    seconds, peak, cpu = head.split()
    return Measured(float(seconds), int(peak), float(cpu), out)


def first_command(tree: Path, mirror: Path | None, data_dir: Path | None) -> Measured:
    """The README's first command without the set-up (fetch into an empty folder, train, report), at `tree`."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        env = {**os.environ, "PYTHONPATH": str(tree), "CLBENCH_DATA": str(folder / "data")}
        fetch = ["fetch", "pmnist"] + (["--mirror", str(mirror)] if mirror is not None else [])
        if mirror is None:  # no mirror: copy the fetched files (the fetch then only verifies)
            assert data_dir is not None
            shutil.copytree(data_dir / "mnist", folder / "data" / "mnist")
        total = Measured(0.0, 0, 0.0, "")
        for arguments in (fetch, [*FIRST_COMMAND_TRAIN, "--results", str(folder / "results")],
                          ["report", "pmnist", "--table", "--results", str(folder / "results")]):
            total = total.plus(measured_command(sys.executable, arguments, env, tree))
        return total


def command_section(rounds: int, baseline: str, mirror: Path | None, data_dir: Path | None) -> list[Line]:
    if mirror is None and (data_dir is None or not (data_dir / "mnist").exists()):
        return [not_measured("command: needs --mirror DIR or MNIST fetched (--data-dir, $CLBENCH_DATA or clbench's "
                             "cache)", ">= 2x")]
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "baseline"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(old), baseline], check=True,
                       capture_output=True)
        try:
            rounds_of: dict[str, list[Measured]] = {"new": [], "old": []}
            for round_index in range(rounds):
                for which, tree in (("old", old), ("new", REPO)):
                    measured = first_command(tree, mirror, data_dir)
                    rounds_of[which].append(measured)
                    print(f"  round {round_index + 1} {which}: {measured.seconds:.1f} s, "
                          f"CPU {measured.cpu_seconds:.1f} s, peak {measured.peak_kib / 1024:.0f} MiB", flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old)], capture_output=True)
    return command_lines(rounds_of["new"], rounds_of["old"], baseline)


def command_lines(new: Sequence[Measured], old: Sequence[Measured], baseline: str) -> list[Line]:
    """The command section's lines from the rounds of this checkout (`new`) and of the baseline (`old`): medians of
    wall time, peak memory and CPU time; the speed-up counts only when the two tables printed are the same."""
    def median(rounds: Sequence[Measured], value: Callable[[Measured], float]) -> float:
        return statistics.median(value(measured) for measured in rounds)

    rounds = len(new)
    same = _table_lines(new[-1].output) == _table_lines(old[-1].output)
    new_time, old_time = median(new, lambda m: m.seconds), median(old, lambda m: m.seconds)
    new_peak, old_peak = median(new, lambda m: m.peak_kib) / 1024, median(old, lambda m: m.peak_kib) / 1024
    new_cpu, old_cpu = median(new, lambda m: m.cpu_seconds), median(old, lambda m: m.cpu_seconds)
    print("table at this checkout:\n" + "\n".join(_table_lines(new[-1].output)))
    return [Line(f"command: the README's first command (fetch, train, report), against {baseline}", new_time,
                 old_time, "s", ">= 2x faster", old_time / new_time >= 2 and same, old_time / new_time,
                 f"speed-up; {rounds} rounds in turns, medians; same table: {'yes' if same else 'NO'}"),
            Line(f"command: its peak resident memory, against {baseline}", new_peak, old_peak, "MiB", "<= 1.2x",
                 new_peak / old_peak <= 1.2, new_peak / old_peak),
            Line(f"command: its CPU time (user + system, every process), against {baseline}", new_cpu, old_cpu, "s",
                 "-", True, old_cpu / new_cpu, "speed-up in CPU time; no target (the target is the wall time)",
                 scored=False)]


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


# ------------------------------------------------------------------------------------------------- task scaling
def scaling_section(data_dir: Path | None) -> list[str]:
    import pandas as pd

    if data_dir is None or not (data_dir / "mnist").exists():
        return ["scaling: not measured: needs MNIST fetched (--data-dir or --mirror)"]
    rows = ["| tasks | wall [s] | training [s] | evaluation [s] | evaluation share |", "|---|---|---|---|---|"]
    for n_tasks in (5, 10, 20):
        with tempfile.TemporaryDirectory() as results:
            arguments = ["train", "pmnist", "-m", "sgd", "--seeds", "0", "--set", f"data.n_tasks={n_tasks}",
                         "--set", "data.max_train_samples=2000", "--set", "training.max_epochs=3",
                         "--results", results]
            wall = run_seconds([sys.executable, "-m", "clbench", *arguments],
                               {**os.environ, "CLBENCH_DATA": str(data_dir)}, TREE)
            frame = pd.concat(pd.read_parquet(path) for path in Path(results).rglob("accuracy.parquet"))
            stages = frame.drop_duplicates("stage")
            train, evaluation = stages["stage_train_seconds"].fillna(0).sum(), stages["stage_eval_seconds"].sum()
            rows.append(f"| {n_tasks} | {wall:.1f} | {train:.1f} | {evaluation:.1f} | "
                        f"{evaluation / (train + evaluation):.0%} |")
    return rows


# ------------------------------------------------------------------------------------------------- main
def parse_arguments(argv: Sequence[str] | None) -> tuple[argparse.Namespace, tuple[str, ...]]:
    """The options and the sections asked for; --mirror and --data-dir made absolute (against this folder), since
    the timed commands run in other folders (a worktree of the baseline)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", default=",".join(DEFAULT_SECTIONS),
                        help=f"comma-separated, of {', '.join(SECTIONS)}, or all (default: all but command)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per figure (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each commit in `command` (default 3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"the commit `command` compares with ({BASELINE})")
    parser.add_argument("--mirror", type=absolute, default=None,
                        help="an offline mirror of MNIST (e.g. ../shared/data)")
    parser.add_argument("--data-dir", type=absolute, default=None, help="clbench's data cache (default: $CLBENCH_DATA, "
                                                                    "else a temporary folder fetched from --mirror)")
    args = parser.parse_args(argv)
    sections = SECTIONS if args.section == "all" else tuple(args.section.split(","))
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)} or all")
    return args, sections


def absolute(text: str) -> Path:
    return Path(text).resolve()


def main(argv: Sequence[str] | None = None) -> int:
    args, sections = parse_arguments(argv)
    print(f"clbench from {TREE}; torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} "
          f"CPU(s), {torch.backends.cpu.get_cpu_capability()}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = _data_dir(args, Path(scratch), sections)
        lines: list[Line] = []
        if "eval" in sections:
            lines += eval_section(args.repeats)
        if "step" in sections:
            lines += step_section(args.repeats)
        if "startup" in sections:
            lines += startup_section(args.repeats, data_dir)
        if "command" in sections:
            lines += command_section(args.rounds, args.baseline, args.mirror, data_dir)
        print("\n| measurement | clbench | reference | ratio | target | verdict | note |")
        print("|---|---|---|---|---|---|---|")
        for line in lines:
            print(line.show())
        if "scaling" in sections:
            print()
            print("\n".join(scaling_section(data_dir)))
    return 0 if all(line.ok for line in lines) else 1


def _data_dir(args: argparse.Namespace, scratch: Path, sections: Sequence[str]) -> Path | None:
    """Where MNIST is: --data-dir, else $CLBENCH_DATA, else fetched from --mirror into `scratch`, else clbench's
    own data cache when `clbench fetch` put MNIST there."""
    explicit = args.data_dir or (Path(os.environ["CLBENCH_DATA"]) if os.environ.get("CLBENCH_DATA") else None)
    if explicit is not None and (explicit / "mnist").exists():
        return explicit
    if args.mirror is not None and set(sections) & {"startup", "scaling", "command"}:
        subprocess.run([sys.executable, "-m", "clbench", "fetch", "pmnist", "--mirror", str(args.mirror)],
                       check=True, capture_output=True, env={**os.environ, "CLBENCH_DATA": str(scratch)}, cwd=REPO)
        return scratch
    cache = default_data_dir()  # $CLBENCH_DATA is unset here when explicit is None
    return cache if explicit is None and (cache / "mnist").exists() else explicit


if __name__ == "__main__":
    raise SystemExit(main())
