"""Count the tensor operations of one training step, per approach: a device-independent proxy for GPU kernel
launches, which bound the step time of the paper's small networks on a fast GPU.

    python tools/count_ops.py mixture8 -m sgd,hat

Times one epoch of task 2 (HAT's gradient masks, EWC's Fisher... of task 1 active) under torch.profiler on
the CPU and prints, per training step, the top-level ATen operators that compute something (views, `detach`
and no-op `to` are left out: they launch no kernel). Backward operators are included. Data are synthetic
images of the benchmark's shapes (`clbench.run.bench_data`), so nothing needs to be cached.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

from clbench.approaches.base import Approach
from clbench.run.bench import timed_approach
from clbench.run.bench_data import bench_tasks, shortened
from clbench.spec import load_benchmark

NO_KERNEL = {f"aten::{name}" for name in (
    "detach to t view narrow reshape unsqueeze squeeze select expand split flatten as_strided slice alias "
    "_reshape_alias lift_fresh result_type empty empty_like").split()}
BATCHES = 6  # training batches of task 2 (joint: of tasks 1 and 2 together)


def operators_per_step(benchmark: str, method: str) -> dict[str, float]:
    """Computing operators per training step of `method` at stage 2, by name (mean over one epoch)."""
    spec = load_benchmark(benchmark)
    device = torch.device("cpu")
    tasks, _ = bench_tasks(spec, 0, device, data_dir="/nonexistent")  # synthetic: the real shapes
    approach = timed_approach(spec, method, tasks, tasks.head_sizes, device, 0)
    if type(approach).learn_task is not Approach.learn_task:
        raise SystemExit(f"{method} trains through its own loop (not the base class's epochs): not counted")
    size = spec.training.batch_size
    sequence = shortened(tasks, [2 * size, BATCHES * size], [size, size])
    approach.learn_task(0, sequence)
    approach.begin_task(1, sequence)
    optimizer = approach.make_optimizer(1, spec.training.lr)
    train, _ = approach.training_data(1, sequence)  # joint: tasks 1 and 2
    approach.train_epoch(1, 0, train, optimizer)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        approach.train_epoch(1, 1, train, optimizer)
    batches = -(-len(train) // size)
    counts: collections.Counter[str] = collections.Counter()
    for event in profiler.events():
        parent = event.cpu_parent
        if event.name.startswith("aten::") and event.name not in NO_KERNEL and (
                parent is None or not parent.name.startswith("aten::")):
            counts[event.name] += 1
    return {name: count / batches for name, count in counts.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", nargs="?", default="mixture8")
    parser.add_argument("-m", "--methods", default="sgd,hat")
    parser.add_argument("--top", type=int, default=0, help="also list the N most frequent operators")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    for method in arguments.methods.split(","):
        counts = operators_per_step(arguments.benchmark, method)
        print(f"{arguments.benchmark} {method}: {sum(counts.values()):.1f} operators per training step")
        for name, count in list(counts.items())[:arguments.top]:
            print(f"    {count:6.1f}  {name}")


if __name__ == "__main__":
    main()
