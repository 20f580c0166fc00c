"""Side by side on CPU: one clbench epoch vs straightforward PyTorch loops over the same data and model.

Three loops train the first task of a benchmark (default mnist2: split MNIST digits 0-4, MLP 784-800-800-800)
with the same network, plain SGD (lr of the spec), batch 64, gradient-norm clipping, then run the validation
pass:

- clbench: `Approach.train_epoch` + `evaluate_validation` of `sgd` (uint8 images on the device, normalised
  per batch, batch order drawn once per epoch);
- DataLoader: `torch.utils.data.DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)` over images
  normalised once up front (float32), the usual PyTorch script;
- indexing: the same float tensors indexed by a `randperm` per epoch (no DataLoader): a floor for data
  handling in plain PyTorch.

The loops take turns epoch by epoch (so background load hits all of them alike); the first epoch of each is
a warm-up; the table gives the median of the others. Uses real MNIST when it is cached in --data-dir
(default $CLBENCH_DATA, else /tmp/clb-data), else synthetic images of the same shapes and sizes.

    OMP_NUM_THREADS=1 python tools/compare_dataloader.py --epochs 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.nn import functional
from torch.utils.data import DataLoader, TensorDataset

from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.resolution import resolve
from clbench.data.batches import LabelledData, TaskSequence
from clbench.nets import build_network
from clbench.run.bench_data import bench_tasks
from clbench.seeding import seed_global_torch, torch_generator
from clbench.spec import BenchmarkSpec, load_benchmark

Loop = Callable[[], tuple[float, float]]  # one epoch -> (training seconds, validation seconds)


def clbench_loop(spec: BenchmarkSpec, tasks: TaskSequence, seed: int) -> Loop:
    """clbench's own epoch: the `sgd` approach's training pass and validation pass on task 0."""
    resolved = resolve(spec, "sgd")
    context = ApproachContext(spec.network, resolved.training, tasks.input_shape, tasks.head_sizes,
                              torch.device("cpu"), seed)
    seed_global_torch(seed)
    approach = resolved.cls(context, resolved.hyperparameters)
    optimizer = approach.make_optimizer(0, resolved.training.lr)
    train, valid = tasks[0].train, tasks[0].valid
    epoch = [0]

    def run() -> tuple[float, float]:
        start = time.perf_counter()
        approach.train_epoch(0, epoch[0], train, optimizer)
        middle = time.perf_counter()
        approach.evaluate_validation(valid, 0)
        epoch[0] += 1
        return middle - start, time.perf_counter() - middle

    return run


def normalised(data: LabelledData) -> tuple[torch.Tensor, torch.Tensor]:
    """All images normalised once, as float32 (N, D), and the labels."""
    return data.transform(data.images, data.task), data.labels


def plain_loop(spec: BenchmarkSpec, tasks: TaskSequence, seed: int, use_dataloader: bool) -> Loop:
    """A plain PyTorch loop on the same network and data: DataLoader, or randperm indexing."""
    resolved = resolve(spec, "sgd")
    training, clip = resolved.training, resolved.hyperparameters.clip_grad_norm
    seed_global_torch(seed)
    network = build_network(spec.network, tasks.input_shape, tasks.head_sizes)
    optimizer = torch.optim.SGD(network.parameters(), lr=training.lr)
    x_train, y_train = normalised(tasks[0].train)
    x_valid, y_valid = normalised(tasks[0].valid)
    generator = torch_generator(seed, "batch-order")
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=training.batch_size, shuffle=True,
                              generator=generator)
    valid_loader = DataLoader(TensorDataset(x_valid, y_valid), batch_size=training.eval_batch_size)

    def train_batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if use_dataloader:
            yield from train_loader
            return
        for indices in torch.randperm(len(y_train), generator=generator).split(training.batch_size):
            yield x_train[indices], y_train[indices]

    def run() -> tuple[float, float]:
        start = time.perf_counter()
        network.train()
        for x, y in train_batches():
            loss = functional.cross_entropy(network(x, 0), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), clip)
            optimizer.step()
        middle = time.perf_counter()
        network.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for x, y in valid_loader:
                logits = network(x, 0)
                loss_sum += float(functional.cross_entropy(logits, y, reduction="sum"))
                correct += int((logits.argmax(1) == y).sum())
        return middle - start, time.perf_counter() - middle

    return run


def default_data_dir() -> Path:
    return Path(os.environ.get("CLBENCH_DATA") or "/tmp/clb-data")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="mnist2", help="an MLP benchmark (mnist2 or pmnist)")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--epochs", type=int, default=4, help="epochs per loop, the first is a warm-up")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], dest="overrides",
                        help="spec override as in clbench, e.g. --set variant=large (repeatable)")
    args = parser.parse_args()
    spec = load_benchmark(args.benchmark, args.overrides)
    tasks, data = bench_tasks(spec, args.seed, torch.device("cpu"), args.data_dir)
    print(f"{spec.name} {spec.network.hidden} task 0 ({tasks[0].name}): {len(tasks[0].train)} training and "
          f"{len(tasks[0].valid)} validation images, {data} data, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}")
    loops = {"clbench": clbench_loop(spec, tasks, args.seed),
             "DataLoader": plain_loop(spec, tasks, args.seed, use_dataloader=True),
             "indexing": plain_loop(spec, tasks, args.seed, use_dataloader=False)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in loops}
    for _ in range(args.epochs):
        for name, loop in loops.items():
            times[name].append(loop())
    batches = -(-len(tasks[0].train) // spec.training.batch_size)
    print(f"median of {args.epochs - 1} epochs after a warm-up; {batches} training batches per epoch")
    print(f"{'loop':<12}{'train [s]':>11}{'valid [s]':>11}{'epoch [s]':>11}{'ms/batch':>10}")
    for name, samples in times.items():
        train = statistics.median(t for t, _ in samples[1:])
        valid = statistics.median(v for _, v in samples[1:])
        print(f"{name:<12}{train:>11.2f}{valid:>11.2f}{train + valid:>11.2f}{1e3 * train / batches:>10.2f}")


if __name__ == "__main__":
    main()
