"""Avalanche's own PermutedMNIST pipeline at the quick `pmnist` protocol of docs/avalanche.md (issue 59).

    python tools/avalanche_permutedmnist.py naive 0 --mnist ../shared/data/mnist
    python tools/avalanche_permutedmnist.py ewc 0 --ewc-lambda 2500 --mnist ../shared/data/mnist

Needs the extra `avalanche` (avalanche-lib 0.6). `PermutedMNIST(n_experiences=10, seed=SEED,
return_task_id=False)`: 10 seeded pixel permutations, no task labels, the 10 digits as one output shared by every
experience (the domain scenario, clbench's `--set data.scenario=domain`), inputs normalised by MNIST's mean and std
(Avalanche's default transform) as clbench's; each experience's training set cut to `--train-per-task` images, a
seeded draw of an equal number per class (clbench's `data.max_train_samples`: 10000); its `SimpleMLP(hidden_size=100,
hidden_layers=2, drop_rate=0)` (784-100-100-10, as pmnist's small network) with clbench's initialisation
(Xavier-uniform weights, zero biases: clbench/nets/common.py reset_parameters); plain SGD at `--lr` (pmnist's 0.05);
batch 64, one epoch per experience; Naive, or EWC (`ewc_lambda`, mode separate). `--mnist` is a folder with MNIST's
four upstream `.gz` files (copied into a temporary torchvision layout; nothing is downloaded). One CPU thread.
Prints one line: the final accuracy over the 10 experiences' whole test sets (Avalanche's stream top-1, the mean of
the ten since they are the same size) and the script's wall seconds, import included. Not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

START = time.perf_counter()

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("strategy", choices=("naive", "ewc"))
    parser.add_argument("seed", type=int)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--train-per-task", type=int, default=10000)
    parser.add_argument("--ewc-lambda", type=float, default=2500.0)
    parser.add_argument("--mnist", type=Path, required=True, help="folder with MNIST's four .gz files")
    return parser.parse_args()


def stratified(targets: list[int], total: int, seed: int) -> list[int]:
    """A seeded draw of total / classes indices of each class, in index order."""
    import random

    by_class: dict[int, list[int]] = {}
    for index, target in enumerate(targets):
        by_class.setdefault(int(target), []).append(index)
    per_class, draw = total // len(by_class), random.Random(seed)
    return sorted(index for members in by_class.values() for index in draw.sample(members, per_class))


def main() -> None:
    args = arguments()
    import torch

    torch.set_num_threads(1)
    from avalanche.benchmarks.classic import PermutedMNIST
    from avalanche.training import EWC, Naive
    from avalanche_pipeline import common_arguments, final_accuracy, mnist_root, simple_mlp  # tools/, beside this

    with tempfile.TemporaryDirectory() as root:
        mnist_root(args.mnist, root)
        torch.manual_seed(args.seed)
        benchmark = PermutedMNIST(n_experiences=10, seed=args.seed, return_task_id=False, dataset_root=root)
        model = simple_mlp(xavier=True)
        common = common_arguments(model, args.lr, batch_size=64)
        if args.strategy == "naive":
            strategy = Naive(model, **common)
        else:
            strategy = EWC(model, ewc_lambda=args.ewc_lambda, mode="separate", **common)
        for index, experience in enumerate(benchmark.train_stream):
            data = experience.dataset
            experience.dataset = data.subset(stratified(list(data.targets), args.train_per_task,
                                                        args.seed * 1000 + index))
            strategy.train(experience)
        results = strategy.eval(benchmark.test_stream)
    accuracy = final_accuracy(results)
    extra = f" ewc_lambda {args.ewc_lambda:g}" if args.strategy == "ewc" else ""
    print(f"{args.strategy} seed {args.seed} lr {args.lr}{extra}: final accuracy {100 * accuracy:.2f}% (domain), "
          f"{time.perf_counter() - START:.1f} s")


if __name__ == "__main__":
    main()
