"""MAS's importance per sample (the paper's equation, clbench) against the authors' demo (a batch's summed norms).

    python tools/mas_batch_importance.py mnist2 --mirror ../shared/data --set data.max_train_samples=2000

Aljundi et al.'s paper (eq. 2) averages |d ||f(x)||^2 / d theta| over samples; clbench does that, one gradient
per sample (`clbench.approaches.importance.functions.mas_importance`). Their demo
(rahafaljundi/MAS-Memory-Aware-Synapses, `Demo.ipynb` with `b1=False`, batch size 200;
`MAS_utils/MAS_based_Training.py`, `compute_importance_l2` and `MAS_Omega_update`) takes per batch the gradient
of the batch's summed squared output norms, its absolute value, and keeps the running mean over samples:
Omega_demo = (1/N) sum_batches |sum_{i in batch} g_i|. By the triangle inequality Omega_clbench >= Omega_demo
entry by entry. This trains MAS on the benchmark's first task (seed 0, the
spec's protocol after `--set`), computes both on that task's training data and prints, per body parameter,
the ratio of their sums and the median of the per-weight ratios (weights where the demo's is > 0).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from clbench.approaches.datatypes import ApproachContext
from clbench.approaches.importance.functions import ParameterDict, mas_importance
from clbench.approaches.resolution import resolve
from clbench.data.batches import LabelledData
from clbench.data.tasks import build_tasks
from clbench.run.loaders import fetching_loader, loader_for
from clbench.spec import load_benchmark

DEMO_BATCH = 200  # Demo.ipynb: batch_size=200, b1=False


def demo_importance(network: torch.nn.Module, body: ParameterDict, data: LabelledData, task: int,
                    batch_size: int = DEMO_BATCH) -> ParameterDict:
    """(1/N) sum over batches of |d sum_{i in batch} ||f(x_i)||^2 / d theta| (eval mode), as the authors' demo."""
    network.eval()
    names = list(body)
    total = {name: torch.zeros_like(body[name]) for name in names}
    for chunk in data.batches(batch_size):
        outputs = network(data.batch(chunk).inputs, task)  # (B, C)
        gradients = torch.autograd.grad(outputs.pow(2).sum(), [body[name] for name in names])
        for name, gradient in zip(names, gradients):
            total[name] += gradient.abs()
    return {name: value / len(data) for name, value in total.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("benchmark")
    parser.add_argument("--mirror", default=None)
    parser.add_argument("--data-dir", default=str(Path.home() / ".cache" / "clbench"))
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    spec = load_benchmark(args.benchmark, args.overrides)
    loader = loader_for(fetching_loader(Path(args.data_dir), args.mirror), spec)
    tasks = build_tasks(spec.data, args.seed, loader)
    resolved = resolve(spec, "mas")
    context = ApproachContext(spec.network, resolved.training, tasks.input_shape, tasks.head_sizes,
                              torch.device("cpu"), args.seed)
    approach = resolved.cls(context, resolved.hyperparameters)
    log = approach.learn_task(0, tasks)
    data = tasks[0].train
    ours = mas_importance(approach.network, approach.body, data, 0, 64)
    demo = demo_importance(approach.network, approach.body, data, 0)
    print(f"{args.benchmark} {' '.join(args.overrides)}: MAS after task 1 ({log.epochs} epochs, {len(data)} "
          f"training samples), Omega per sample (clbench) / Omega of batch sums of {DEMO_BATCH} (authors' demo)")
    for name in approach.body:
        positive = demo[name] > 0
        ratios = ours[name][positive] / demo[name][positive]
        print(f"  {name:20s} sum ratio {float(ours[name].sum() / demo[name].sum()):.2f}   median per-weight ratio "
              f"{float(ratios.median()):.2f}   min {float(ratios.min()):.2f}")


if __name__ == "__main__":
    main()
