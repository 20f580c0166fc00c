"""Avalanche's own SplitMNIST pipeline, as close to clbench's `seq-mnist` as Avalanche's API allows (issue 59).

    python tools/avalanche_splitmnist.py naive 0 --lr 0.03 --mnist ../shared/data/mnist
    python tools/avalanche_splitmnist.py replay 0 --lr 0.1 --mem-size 500 --mnist ../shared/data/mnist
    python tools/avalanche_splitmnist.py der 0 --lr 0.03 --mem-size 500 --alpha 1.0 --beta 0.5 --mnist ...
    python tools/avalanche_splitmnist.py der 0 --lr 0.03 --mem-size 500 --alpha 1.0 --der-memory reservoir --mnist ...

Needs the extra `avalanche` (avalanche-lib 0.6). `SplitMNIST(n_experiences=5, fixed_class_order=[0..9],
return_task_id=False)`: digits in order, 0-1 first, no task labels (class-incremental), its inputs normalised by
MNIST's mean and std (Avalanche's default transform) as clbench's; its `SimpleMLP(hidden_size=100, hidden_layers=2,
drop_rate=0)` (784-100-100, one linear output over the 10 classes, PyTorch's default initialisation; `--xavier`:
clbench's instead); plain SGD at `--lr`; batch 10, one epoch per experience; Naive, Replay (`mem_size`) or DER
(`mem_size`, `batch_size_mem` 10, `alpha`, `beta`; `--der-memory`: its memory changed one part at a time, see
tools/avalanche_der_memory.py). `--mnist` is a folder with MNIST's four upstream `.gz` files
(copied into a temporary torchvision layout; nothing is downloaded). One CPU thread. Prints one line: the final
accuracy over the 10,000 test images (Avalanche's stream top-1, the class-IL accuracy) and the script's wall
seconds, import included. Not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

START = time.perf_counter()

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("strategy", choices=("naive", "replay", "der"))
    parser.add_argument("seed", type=int)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--mem-size", type=int, default=500)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--beta", type=float, default=0.5)
    parser.add_argument("--der-memory", default="avalanche",
                        choices=("avalanche", "training-logits", "reservoir", "reservoir-from-second"),
                        help="der: Avalanche's memory as it is, or changed (tools/avalanche_der_memory.py)")
    parser.add_argument("--mnist", type=Path, required=True, help="folder with MNIST's four .gz files")
    parser.add_argument("--xavier", action="store_true",
                        help="clbench's initialisation instead of PyTorch's: Xavier-uniform weights, zero biases "
                             "(clbench/nets/common.py reset_parameters)")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    import torch

    torch.set_num_threads(1)
    from avalanche.benchmarks.classic import SplitMNIST
    from avalanche.training import Naive, Replay
    from avalanche_pipeline import common_arguments, final_accuracy, mnist_root, simple_mlp  # tools/, beside this

    with tempfile.TemporaryDirectory() as root:
        mnist_root(args.mnist, root)
        torch.manual_seed(args.seed)
        benchmark = SplitMNIST(n_experiences=5, seed=args.seed, fixed_class_order=list(range(10)),
                               return_task_id=False, dataset_root=root)
        model = simple_mlp(xavier=args.xavier)
        common = common_arguments(model, args.lr, batch_size=10)
        if args.strategy == "naive":
            strategy = Naive(model, **common)
        elif args.strategy == "replay":
            strategy = Replay(model, mem_size=args.mem_size, **common)
        else:
            from avalanche_der_memory import der_strategy  # tools/, beside this script

            strategy = der_strategy(args.der_memory, model=model, mem_size=args.mem_size, batch_size_mem=10,
                                    alpha=args.alpha, beta=args.beta, **common)
        for experience in benchmark.train_stream:
            strategy.train(experience)
        results = strategy.eval(benchmark.test_stream)
    accuracy = final_accuracy(results)
    init = (" xavier" if args.xavier else "") + (f" memory {args.der_memory}" if args.strategy == "der" else "")
    print(f"{args.strategy} seed {args.seed} lr {args.lr}{init}: final class-IL accuracy {100 * accuracy:.2f}%, "
          f"{time.perf_counter() - START:.1f} s")


if __name__ == "__main__":
    main()
