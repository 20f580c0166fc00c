"""WSN side by side: the authors' permuted-MNIST code (ihaeyong/WSN) and clbench's `wsn` on the same protocol.

Needs (nothing of it is shipped):
- the authors' repository, github.com/ihaeyong/WSN at commit f066982 (``git archive`` it into ``AUTHORS/WSN``);
- a venv at ``AUTHORS/venv`` whose site-packages has a ``.pth`` line pointing at clbench's venv (torch, numpy,
  scipy, pandas, matplotlib), plus ``pip install --no-deps scikit-learn threadpoolctl joblib cloudpickle narwhals``
  (the loader's ``sklearn.utils.shuffle``);
- MNIST's four idx files (canonical names, gzipped) in ``--mnist`` (default /work/shared/data/mnist).

``prepare`` patches the authors' code (each patch listed in ``PATCHES``: imports this machine lacks and that the
pmnist run never uses, and one torch thread) and writes, per seed, the binary cache their loader
(dataloader/pmnist.py:61-72) reads instead of downloading: task i with seed r (the order of
``sklearn.utils.shuffle(range(nperm), random_state=seed)``) permutes the normalised pixels with
``shuffle(pixels, random_state=r * 100 + i)`` (pmnist.py:45), as their first run would write it.
``--train-samples N`` keeps a seeded random N of the 60000 training images (before their 10% validation split);
clbench gets the same reduction (``data.max_train_samples`` = 0.9 N at ``validation_fraction`` 0.1).

``authors`` runs ``scripts/wsn/wsn_pmnist.sh``'s command (main_wsn_pmnist.py: Adam lr 1e-3, lr_min 1e-6, patience
6, factor 2, batch 10, hidden 100, pc_valid 0.1, 5 epochs by default; the script's ``--name hard`` is dropped: the
argument parser has no such option) for each seed and reads the accuracy matrix it saves. ``clbench`` runs the
same protocol through ``clbench train`` (spec written by ``clbench_spec``, every value citing its source).
``summary`` prints final average accuracy and BWT, mean (std), for both.

Usage:
    python tools/authors_wsn.py prepare --authors /work/authors/wsn --seeds 1 2 3 --train-samples 6000
    python tools/authors_wsn.py authors --authors /work/authors/wsn --seeds 1 2 3 --nperm 3 --sparsity 0.5
    python tools/authors_wsn.py clbench --out /tmp/wsn-sbs --seeds 1 2 3 --nperm 3 --sparsity 0.5 --train-samples 6000
    python tools/authors_wsn.py clbench ... --torch-init   # the authors' layer initialisation (authors_wsn_init.py)
    python tools/authors_wsn.py summary --authors /work/authors/wsn --out /tmp/wsn-sbs --sparsity 0.5 --nperm 3

Seen (README, "WSN"): 5 tasks, 6000 images, seeds 1-3: c 0.5 authors 92.75 (0.32), clbench 93.13 (0.14), clbench
with their initialisation 92.94 (0.05); c 0.1: 92.14 (0.01), 93.12 (0.12), 92.26 (0.22).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

# (file, text replaced, replacement): minimal patches for torch 2.14 on CPU without torchvision, seaborn, ipdb
PATCHES = (
    ("main_wsn_pmnist.py", "import torchvision\nfrom torchvision import datasets, transforms\n", ""),
    ("main_wsn_pmnist.py", "import seaborn as sn\n", ""),
    ("main_wsn_pmnist.py", "def main(args):\n", "def main(args):\n    torch.set_num_threads(1)\n"),
    ("networks/utils.py", "import torchvision\nfrom torchvision import datasets, transforms\n", ""),
    ("networks/conditional_task.py", "import ipdb\n", ""),
    ("dataloader/pmnist.py", "from torchvision import datasets, transforms\n", ""),
)
MEAN, STD = 0.1307, 0.3081  # dataloader/pmnist.py:25-26


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        data = handle.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def patch(code: Path) -> None:
    for name, old, new in PATCHES:
        path = code / name
        text = path.read_text()
        if old in text:
            path.write_text(text.replace(old, new, 1))
        elif new and new not in text:
            raise SystemExit(f"{path}: patch target not found: {old!r}")


def write_cache(folder: Path, mnist: Path, seed: int, nperm: int, train_samples: int | None) -> None:
    """The binary files dataloader/pmnist.py:54-56 writes on a first run (data{r}{split}{x,xi,y}.bin)."""
    import torch
    from sklearn.utils import shuffle

    cache = folder / "data" / "binary_pmnist20"
    cache.mkdir(parents=True, exist_ok=True)
    splits = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
              "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
    raw = {}
    for split, (images, labels) in splits.items():
        x = (read_idx(mnist / images).reshape(-1, 784).astype(np.float32) / 255.0 - MEAN) / STD
        y = read_idx(mnist / labels).astype(np.int64)
        if split == "train" and train_samples is not None:
            keep = np.sort(np.random.default_rng(0).permutation(len(y))[:train_samples])
            x, y = x[keep], y[keep]
        raw[split] = (x, y)
    seeds = shuffle(np.array(list(range(nperm)), dtype=int), random_state=seed)  # pmnist.py:17-19
    for i, r in enumerate(seeds):
        perm = shuffle(np.arange(784), random_state=int(r) * 100 + i)  # pmnist.py:45
        for split, (x, y) in raw.items():
            images = torch.from_numpy(np.ascontiguousarray(x[:, perm])).view(-1, 1, 28, 28)
            torch.save(images, cache / f"data{r}{split}x.bin")
            torch.save([torch.from_numpy(x[0].copy()).view(1, 28, 28)], cache / f"data{r}{split}xi.bin")
            torch.save(torch.from_numpy(y), cache / f"data{r}{split}y.bin")


def run_authors(authors: Path, seed: int, nperm: int, sparsity: float, epochs: int) -> Path:
    """One run of scripts/wsn/wsn_pmnist.sh's command in the seed's folder; returns the saved accuracy matrix."""
    folder = authors / f"seed{seed}"
    command = [str(authors / "venv" / "bin" / "python"), str(authors / "WSN" / "main_wsn_pmnist.py"),
               "--seed", str(seed), "--optim", "adam", "--lr", "1e-3", "--lr_min", "1e-6", "--lr_patience", "6",
               "--lr_factor", "2", "--batch_size_train", "10", "--batch_size_test", "10", "--n_hidden", "100",
               "--pc_valid", "0.1", "--sparsity", str(sparsity), "--nperm", str(nperm), "--n_epochs", str(epochs)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with open(folder / f"log-c{sparsity}-T{nperm}.txt", "w") as log:
        subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return folder / "results2" / "wsn_pmnist" / f"wsn_pmnist_SEED_{seed}_LR_0.001_SPARSITY_{1 - (1 - sparsity)}.acc.npy"


def authors_matrix(authors: Path, seed: int, sparsity: float) -> np.ndarray:
    # main_wsn_pmnist.py:267-268 (named with 1 - (1 - c), line 333) through utils.py's safe_save (np.save: .npy)
    name = f"wsn_pmnist_SEED_{seed}_LR_0.001_SPARSITY_{1 - (1 - sparsity)}.acc.npy"
    return np.load(authors / f"seed{seed}" / "results2" / "wsn_pmnist" / name) / 100.0


def final_accuracy_and_bwt(matrix: np.ndarray) -> tuple[float, float]:
    """(mean of the last row, mean of last row - diagonal over the first T-1 tasks): main_wsn_pmnist.py:281."""
    return float(matrix[-1].mean()), float(np.mean((matrix[-1] - np.diag(matrix))[:-1]))


def clbench_spec(nperm: int, sparsity: float, train_samples: int | None, epochs: int) -> str:
    """The authors' pmnist protocol as a clbench spec; every value cites where it comes from."""
    samples = "null" if train_samples is None else str(int(round(train_samples * 0.9)))
    return f"""# WSN's permuted-MNIST protocol (ihaeyong/WSN@f066982), for tools/authors_wsn.py
name: pmnist-wsn
description: "WSN authors' permuted MNIST: 2x100 bias-free MLP, Adam 1e-3, batch 10, 5 epochs"
data:
  kind: permuted
  datasets: [mnist]
  n_tasks: {nperm}                # main_wsn_pmnist.py:329 --nperm (10; reduced here when asked)
  form: mnist28
  shuffle_tasks: true          # dataloader/pmnist.py:18-19 (order shuffled by the seed)
  validation_fraction: 0.1     # scripts/wsn/wsn_pmnist.sh --pc_valid 0.1
  max_train_samples: {samples}  # the same reduction as the authors' cache (tools/authors_wsn.py --train-samples)
network:
  kind: mlp
  hidden: [100, 100]           # networks/mlp.py:15,19-20 (n_hidden=100)
  bias: false                  # networks/mlp.py:19-20,30 (bias=False in every layer and head)
training:
  optimizer: adam              # scripts/wsn/wsn_pmnist.sh --optim adam
  lr: 0.001                    # scripts/wsn/wsn_pmnist.sh --lr 1e-3
  lr_min: 1.0e-6               # scripts/wsn/wsn_pmnist.sh --lr_min 1e-6
  lr_factor: 2                 # scripts/wsn/wsn_pmnist.sh --lr_factor 2
  patience: 6                  # scripts/wsn/wsn_pmnist.sh --lr_patience 6
  max_epochs: {epochs}                # main_wsn_pmnist.py:296 --n_epochs default 5 (the script sets none)
  batch_size: 10               # scripts/wsn/wsn_pmnist.sh --batch_size_train 10
approaches:
  wsn: {{c: {sparsity}}}             # scripts/wsn/wsn_pmnist.sh --sparsity $3 (the kept fraction c)
"""


def run_clbench(out: Path, seeds: list[int], nperm: int, sparsity: float, train_samples: int | None,
                epochs: int, torch_init: bool = False) -> None:
    """`clbench train` on the authors' protocol; `torch_init`: with their layers' initialisation
    (tools/authors_wsn_init.py) instead of clbench's Xavier-uniform bodies."""
    out.mkdir(parents=True, exist_ok=True)
    spec = out / f"pmnist-wsn-c{sparsity}-T{nperm}{'-torch-init' if torch_init else ''}.yaml"
    text = clbench_spec(nperm, sparsity, train_samples, epochs)
    method = "wsn"
    if torch_init:
        method = str(Path(__file__).resolve().parent / "authors_wsn_init.py") + ":WSNTorchInit"
        text = text.replace("  wsn: {c:", "  wsn-torch-init: {c:")
    spec.write_text(text)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CLBENCH_MIRROR": os.environ.get("CLBENCH_MIRROR",
                                                                                     "/work/shared/data")}
    results = out / (f"c{sparsity}-T{nperm}" + ("-torch-init" if torch_init else ""))
    command = [sys.executable, "-m", "clbench", "train", str(spec), "--method", method, "--seeds",
               ",".join(str(seed) for seed in seeds), "--results", str(results), "--device", "cpu"]
    subprocess.run(command, env=env, check=True)


def clbench_matrices(out: Path, nperm: int, sparsity: float, torch_init: bool = False) -> list[np.ndarray]:
    import pandas as pd

    results = out / (f"c{sparsity}-T{nperm}" + ("-torch-init" if torch_init else ""))
    frame = pd.concat(pd.read_parquet(path) for path in results.rglob("accuracy.parquet"))
    frame = frame[(frame["evaluation"] == "task-aware") & (frame["split"] == "test") & (frame["stage"] >= 1)]
    matrices = []
    for _, runs in frame.groupby("seed"):
        matrix = np.zeros((nperm, nperm))
        for row in runs.itertuples():
            if row.task <= row.stage:  # 1-based stage and task
                matrix[row.stage - 1, row.task - 1] = row.accuracy
        matrices.append(matrix)
    return matrices


def describe(name: str, matrices: list[np.ndarray]) -> str:
    values = np.array([final_accuracy_and_bwt(matrix) for matrix in matrices])  # (seeds, 2)
    mean, std = values.mean(axis=0), values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros(2)
    return (f"{name}: final average accuracy {100 * mean[0]:.2f} ({100 * std[0]:.2f}), BWT {100 * mean[1]:.2f} "
            f"({100 * std[1]:.2f}) over {len(values)} seeds: {[round(100 * float(v), 2) for v in values[:, 0]]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["prepare", "authors", "clbench", "summary"])
    parser.add_argument("--authors", type=Path, default=Path("/work/authors/wsn"))
    parser.add_argument("--mnist", type=Path, default=Path("/work/shared/data/mnist"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/wsn-side-by-side"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--nperm", type=int, default=10)
    parser.add_argument("--sparsity", type=float, default=0.5, help="c, the kept fraction (the script's $3)")
    parser.add_argument("--train-samples", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--torch-init", action="store_true", help="clbench with the authors' layer initialisation")
    args = parser.parse_args()
    if args.command == "prepare":
        patch(args.authors / "WSN")
        for seed in args.seeds:
            write_cache(args.authors / f"seed{seed}", args.mnist, seed, args.nperm, args.train_samples)
    elif args.command == "authors":
        for seed in args.seeds:
            run_authors(args.authors, seed, args.nperm, args.sparsity, args.epochs)
    elif args.command == "clbench":
        run_clbench(args.out, args.seeds, args.nperm, args.sparsity, args.train_samples, args.epochs, args.torch_init)
    else:
        authors = [authors_matrix(args.authors, seed, args.sparsity) for seed in args.seeds]
        print(describe("authors", authors))
        print(describe("clbench", clbench_matrices(args.out, args.nperm, args.sparsity)))
        if any(args.out.glob(f"c{args.sparsity}-T{args.nperm}-torch-init")):
            print(describe("clbench, the authors' initialisation",
                           clbench_matrices(args.out, args.nperm, args.sparsity, torch_init=True)))


if __name__ == "__main__":
    main()
